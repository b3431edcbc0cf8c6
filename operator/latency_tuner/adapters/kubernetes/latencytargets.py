"""LatencyTarget objects: list them (to find conflicts) and write their status subresource."""

from __future__ import annotations

from typing import Any

from latency_tuner.adapters.kubernetes.client import MERGE_PATCH, Calls, NotFound, Rest, namespaced
from latency_tuner.api.resource import GROUP, PLURAL, VERSION
from latency_tuner.api.status import LatencyTargetStatus


class LatencyTargets:
    def __init__(self, api_client: Any, *, calls: Calls | None = None) -> None:
        self._calls = calls or Calls("latencytargets", workers=4)
        self._rest = Rest(api_client)

    async def get(self, *, namespace: str, name: str) -> dict[str, Any] | None:
        """The object as the API server holds it now, or None when it is gone."""
        try:
            obj: dict[str, Any] = await self._calls.run(
                self._rest, "GET", namespaced(GROUP, VERSION, namespace, PLURAL, name)
            )
        except NotFound:
            return None
        return obj

    async def list(self, *, namespace: str) -> list[dict[str, Any]]:
        listing = await self._calls.run(
            self._rest, "GET", namespaced(GROUP, VERSION, namespace, PLURAL)
        )
        items: list[dict[str, Any]] = listing.get("items", [])
        return items

    async def write_status(
        self, *, namespace: str, name: str, status: LatencyTargetStatus
    ) -> dict[str, Any]:
        """Replace the status by merge patch; fields the new status lacks are sent as null
        (a merge patch's way to delete them)."""
        body = {"status": status_document(status)}
        result: dict[str, Any] = await self._calls.run(
            self._rest,
            "PATCH",
            namespaced(GROUP, VERSION, namespace, PLURAL, name, "status"),
            body=body,
            content_type=MERGE_PATCH,
        )
        return result


def status_document(status: LatencyTargetStatus) -> dict[str, Any]:
    """The status as a merge patch: camelCase, JSON types; a top-level field that is unset is
    sent as null so the patch deletes it. Nested nulls are left out: the API server would
    prune them anyway (CRD fields are not nullable)."""
    document: dict[str, Any] = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    for name, info in type(status).model_fields.items():
        document.setdefault(info.alias or name, None)
    return document
