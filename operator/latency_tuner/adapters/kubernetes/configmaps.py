"""Read one key of a tenant's ConfigMap, in the LatencyTarget's own namespace, size-capped.

The quality gate's prompts live in a ConfigMap the tenant writes: the operator reads only the
one the spec names, only in the target's namespace (never another, whatever the spec says),
and refuses a value over the cap before parsing it.
"""

from __future__ import annotations

from typing import Any

import kubernetes

from latency_tuner.adapters.kubernetes.client import Calls, NotFound, raw
from latency_tuner.core.quality.samples import MAX_SAMPLES_BYTES, InvalidSamples


class ConfigMaps:
    def __init__(self, api_client: Any, *, calls: Calls | None = None) -> None:
        self._calls = calls or Calls("configmaps", workers=1)
        self._core = kubernetes.client.CoreV1Api(api_client)

    async def read_key(self, *, namespace: str, name: str, key: str) -> str:
        """The value of ``key``; ``InvalidSamples`` when the ConfigMap or the key is missing
        or the value is over ``MAX_SAMPLES_BYTES``."""
        try:
            obj = await self._calls.run(raw, self._core.read_namespaced_config_map, name, namespace)
        except NotFound:
            raise InvalidSamples(f"ConfigMap {name} not found in namespace {namespace}") from None
        value = (obj.get("data") or {}).get(key)
        if not isinstance(value, str):
            raise InvalidSamples(f"ConfigMap {name} has no key {key}")
        if len(value.encode()) > MAX_SAMPLES_BYTES:
            raise InvalidSamples(
                f"ConfigMap {name} key {key} is larger than {MAX_SAMPLES_BYTES // 1024} KiB"
            )
        return value
