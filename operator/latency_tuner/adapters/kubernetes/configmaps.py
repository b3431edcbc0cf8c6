"""Read one key of a tenant's ConfigMap, in the LatencyTarget's own namespace, size-capped, and
only if the ConfigMap opts in to the quality gate.

The quality gate's prompts live in a ConfigMap the tenant writes: the operator reads only the
one the spec names, only in the target's namespace (never another, whatever the spec says).
It reads it with its own rights, which a LatencyTarget's author may not have, and the value
goes to that author's pods: so a ConfigMap without ``SAMPLES_LABEL: "true"`` is refused before
its data is looked at, with the same message as a missing one, and none of its bytes leaves
this module. A value over the cap is refused before parsing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from latency_tuner.adapters.kubernetes.client import Calls, NotFound, Rest, namespaced
from latency_tuner.core.quality.samples import (
    MAX_SAMPLES_BYTES,
    InvalidSamples,
    not_lent_message,
    opted_in,
)


class ConfigMaps:
    def __init__(self, api_client: Any, *, calls: Calls | None = None) -> None:
        self._calls = calls or Calls("configmaps", workers=1)
        self._rest = Rest(api_client)

    async def read_key(self, *, namespace: str, name: str, key: str) -> str:
        """The value of ``key``; ``InvalidSamples`` when the ConfigMap is missing or does not
        opt in, when the key is missing or when the value is over ``MAX_SAMPLES_BYTES``."""
        try:
            obj = await self._calls.run(
                self._rest, "GET", namespaced("", "v1", namespace, "configmaps", name)
            )
        except NotFound:
            raise InvalidSamples(not_lent_message(namespace, name)) from None
        return lent_value(obj, namespace=namespace, name=name, key=key)


def lent_value(obj: Mapping[str, Any], *, namespace: str, name: str, key: str) -> str:
    """``key`` of the ConfigMap ``obj`` (as the API server returned it) if the ConfigMap opts
    in to the quality gate; else ``InvalidSamples`` saying so, and nothing of its data."""
    if not opted_in((obj.get("metadata") or {}).get("labels")):
        raise InvalidSamples(not_lent_message(namespace, name))
    value = (obj.get("data") or {}).get(key)
    if not isinstance(value, str):
        raise InvalidSamples(f"ConfigMap {name} has no key {key}")
    if len(value.encode()) > MAX_SAMPLES_BYTES:
        raise InvalidSamples(
            f"ConfigMap {name} key {key} is larger than {MAX_SAMPLES_BYTES // 1024} KiB"
        )
    return value
