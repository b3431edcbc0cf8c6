"""What a LatencyTarget may make the operator do beyond tuning vLLM's flags: nothing it could
not do itself.

The operator patches Deployments with its own rights, and a LatencyTarget (spec and status) is
written by a tenant. These pure checks answer the questions where a tenant's text would reach
further than vLLM's flags: which image a quantization variant may switch to, which Prometheus a
LatencyTarget may name, and whether a container change is one the knob catalog could make.
Each returns None when allowed, else the reason in words. No I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

from latency_tuner.api.spec import VARIANT_FLAGS, LatencyTargetSpec
from latency_tuner.core.cluster import ContainerConfig
from latency_tuner.core.knobs.registry import KNOBS
from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

DEFAULT_REGISTRY = "docker.io"


def image_repository(image: str) -> str:
    """The registry and repository of an image reference, tag and digest left out, with
    Docker's defaults filled in: ``vllm/vllm-openai:v0.11.0`` -> ``docker.io/vllm/vllm-openai``,
    ``nginx`` -> ``docker.io/library/nginx``."""
    name = image.split("@", 1)[0]
    head, _, last = name.rpartition("/")
    if ":" in last:
        last = last.rsplit(":", 1)[0]
    parts = [p for p in [*head.split("/"), last] if p] if head else [last]
    first = parts[0]
    if len(parts) > 1 and ("." in first or ":" in first or first == "localhost"):
        registry, path = first.lower(), parts[1:]
    else:
        registry, path = DEFAULT_REGISTRY, parts
    if registry == DEFAULT_REGISTRY and len(path) == 1:
        path = ["library", *path]
    return "/".join([registry, *path])


def variant_image_refusal(
    image: str, *, running: str | None, allowed_prefixes: Sequence[str]
) -> str | None:
    """None when a variant may run ``image``: it is in the running image's repository, or it
    starts with one of the operator's allowed prefixes. Else why not."""
    repository = image_repository(image)
    if running is not None and repository == image_repository(running):
        return None
    if any(image.startswith(p) or repository.startswith(p) for p in allowed_prefixes):
        return None
    allowed = ", ".join(allowed_prefixes) or "none configured (--variant-images)"
    where = f"the running image's repository ({image_repository(running)})" if running else ""
    return (
        f"image {image} is outside {where or 'the running repository'} and the operator's "
        f"allowed variant images ({allowed})"
    )


def prometheus_url_refusal(url: str, *, allowed_prefixes: Sequence[str]) -> str | None:
    """None when a LatencyTarget may name this Prometheus URL, else why not. With no prefixes
    configured any http(s) URL is allowed (the operator then sends it no credentials)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{url!r} is not an http(s) URL"
    if parts.username is not None or parts.password is not None:
        return f"{url!r} carries credentials in the URL"
    if not allowed_prefixes:
        return None
    for prefix in allowed_prefixes:
        allowed = urlsplit(prefix)
        if (
            parts.scheme == allowed.scheme
            and parts.netloc.lower() == allowed.netloc.lower()
            and parts.path.startswith(allowed.path)
        ):
            return None
    return f"{url} does not start with an allowed prefix ({', '.join(allowed_prefixes)})"


def _skeleton(line: VllmCommandLine) -> tuple[list[str] | None, list[str] | None]:
    """The command line with every vLLM option and the model taken out: the program, the
    launcher, and anything else a shell script runs."""
    for key in dict(line.flags()):
        line = line.without(key)
    if line.model is not None:
        line = line.with_model("MODEL")
    return line.render()


def _values(line: VllmCommandLine) -> dict[str, list[str | None]]:
    out: dict[str, list[str | None]] = {}
    for key, value in line.flags():
        out.setdefault(key.removeprefix("no-"), []).append(
            ("no-" if key.startswith("no-") else "") + (value or "")
        )
    return out


def change_refusal(
    current: ContainerConfig,
    proposed: ContainerConfig,
    spec: LatencyTargetSpec,
    *,
    allowed_images: Sequence[str],
) -> str | None:
    """None when going from ``current`` to ``proposed`` is a change the knob catalog could
    make; else why not. Checked before every patch, whatever asked for it (a trial, a
    rollback, a restore): the status they come from is writable by others than the operator,
    so a container found there is never applied unchecked. A change may touch only knob flags
    and a quantization variant's flags, model and image; the program, launcher and every other
    word of the command line stay; the GPU limit moves only with tensor parallelism."""
    if proposed == current:
        return None
    try:
        now = VllmCommandLine.of_container(current.command, current.args, image=current.image)
        new = VllmCommandLine.of_container(proposed.command, proposed.args, image=proposed.image)
    except NotVllmError as exc:
        return f"the proposed container is not a vLLM server: {exc}"
    if _skeleton(now) != _skeleton(new):
        return "the proposed container changes the command beyond vLLM's flags"
    before, after = _values(now), _values(new)
    allowed = {knob.flag for knob in KNOBS} | set(VARIANT_FLAGS)
    touched = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    outside = [k for k in touched if k not in allowed]
    if outside:
        return f"the proposed container changes --{', --'.join(outside)}, which no knob sets"
    variants = spec.knobs.quantization.variants if spec.knobs.quantization else []
    if new.model != now.model:
        models = {v.model for v in variants if v.model}
        if new.model not in models and now.model not in models:
            return f"the proposed container serves {new.model}, which no variant lists"
    if proposed.image != current.image:
        reason = variant_image_refusal(
            proposed.image, running=current.image, allowed_prefixes=allowed_images
        )
        if reason is not None:
            return reason
    if proposed.gpu_limit != current.gpu_limit:
        tp = spec.knobs.tensor_parallel
        size = new.get("tensor-parallel-size") or "1"
        if tp is None or not size.isdigit() or proposed.gpu_limit != int(size):
            return (
                f"the proposed container asks for {proposed.gpu_limit} GPUs, which only "
                "tensor parallelism may change, to its own size"
            )
    return None
