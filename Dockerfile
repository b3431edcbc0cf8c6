# syntax=docker/dockerfile:1
# The latency-tuner image: the operator (`run`, the default), and the same binary for
# `sim` (a vLLM stand-in), `bench` and `diagnose`. Runs as the non-root user 65532 with a
# read-only root filesystem (the chart mounts an emptyDir at /tmp).

ARG PYTHON_IMAGE=python:3.11-slim

# ---- build: a wheel of this repo, installed with its dependencies into /opt/venv ----------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator/ operator/
RUN python -m pip wheel --no-deps --wheel-dir /dist . \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install /dist/*.whl \
 && /opt/venv/bin/latency-tuner --version

# ---- runtime: the venv only; no compiler, no pip cache, no source tree ----------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="latency-tuner" \
      org.opencontainers.image.description="Keeps vLLM Deployments inside their latency targets" \
      org.opencontainers.image.licenses="Apache-2.0"
# A passwd entry for 65532: kopf and getpass look the user up, and fail on an unknown uid.
RUN groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --home-dir /tmp --no-create-home \
      --shell /usr/sbin/nologin nonroot
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
USER 65532:65532
# 8080: operator metrics; 8081: kopf /healthz; 8000: `sim` (vLLM's port).
EXPOSE 8080 8081 8000
ENTRYPOINT ["latency-tuner"]
CMD ["run"]
