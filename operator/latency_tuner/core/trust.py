"""What a LatencyTarget may make the operator do beyond tuning vLLM's flags: nothing it could
not do itself.

The operator patches Deployments with its own rights, and a LatencyTarget is written by a
tenant. These pure checks answer the questions where a tenant's text would reach further than
vLLM's flags: which image a quantization variant may switch to, and which Prometheus a
LatencyTarget may name. Each returns None when allowed, else the reason in words. No I/O here.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import urlsplit

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
