# syntax=docker/dockerfile:1
# The latency-tuner image: the operator (`run`, the default), and the same binary for
# `sim` (a vLLM stand-in), `bench` and `diagnose`. Runs as the non-root user 65532 with a
# read-only root filesystem (the chart mounts an emptyDir at /tmp).

# The base image. Pin it by digest when you build for production, e.g.
#   --build-arg PYTHON_IMAGE=python:3.11-slim@sha256:<digest of the image you have verified>
# (`docker buildx imagetools inspect python:3.11-slim` prints it). The default stays a tag on
# purpose: a digest is only worth writing when it was read from the registry, and this
# repository was prepared where Docker Hub could not be reached, so none was.
ARG PYTHON_IMAGE=python:3.11-slim

# ---- build: a wheel of this repo, installed with its dependencies into /opt/venv ----------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Dependencies first, from the lock file only: exact versions, each file checked against the
# sha256 PyPI published (scripts/lock-image-deps.sh regenerates it). A layer of its own, so a
# source change does not reinstall them.
COPY requirements.lock ./
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --require-hashes --only-binary=:all: --no-deps \
      -r requirements.lock
COPY pyproject.toml README.md ./
COPY operator/ operator/
# The project itself: --no-deps, so nothing outside the lock is resolved; `pip check` fails
# the build when the lock no longer satisfies pyproject.toml.
RUN python -m pip wheel --no-deps --wheel-dir /dist . \
 && /opt/venv/bin/pip install --no-deps /dist/*.whl \
 && /opt/venv/bin/pip check \
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
