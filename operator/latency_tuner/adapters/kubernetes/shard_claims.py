"""The shard claim on a LatencyTarget: an annotation, written only at the resourceVersion it was
read at (so of two shards racing for a target, one gets a Conflict), and status.shard."""

from __future__ import annotations

from typing import Any

from latency_tuner.adapters.kubernetes.client import MERGE_PATCH, Calls, Rest, namespaced
from latency_tuner.api.resource import GROUP, PLURAL, VERSION
from latency_tuner.core.sharding.claim import CLAIM_ANNOTATION, Claim


class ShardClaims:
    def __init__(self, api_client: Any, *, calls: Calls | None = None) -> None:
        self._calls = calls or Calls("shard-claims", workers=4)
        self._rest = Rest(api_client)

    async def write(
        self,
        *,
        namespace: str,
        name: str,
        claim: Claim | None,
        resource_version: str,
        finalizers: list[str] | None = None,
    ) -> dict[str, Any]:
        """Set the claim (None removes it), and the finalizers when given, if the object is
        still at ``resource_version``; raises Conflict otherwise. Returns the object."""
        value = claim.to_annotation() if claim is not None else None
        metadata: dict[str, Any] = {
            "resourceVersion": resource_version,
            "annotations": {CLAIM_ANNOTATION: value},
        }
        if finalizers is not None:  # a merge patch replaces a list whole
            metadata["finalizers"] = finalizers
        body = {"metadata": metadata}
        result: dict[str, Any] = await self._calls.run(
            self._rest,
            "PATCH",
            namespaced(GROUP, VERSION, namespace, PLURAL, name),
            body=body,
            content_type=MERGE_PATCH,
        )
        return result

    async def report(self, *, namespace: str, name: str, shard: str) -> None:
        """status.shard: which shard owns the target, for `kubectl get` and humans."""
        body = {"status": {"shard": shard}}
        await self._calls.run(
            self._rest,
            "PATCH",
            namespaced(GROUP, VERSION, namespace, PLURAL, name, "status"),
            body=body,
            content_type=MERGE_PATCH,
        )

    def close(self) -> None:
        self._calls.close()
