"""Custom resources are checked against their CRD's openAPIV3Schema, as the real server does."""

from __future__ import annotations

from typing import Any

import httpx
from tests.integration.apiserver.support import WIDGETS, widget

MERGE = {"Content-Type": "application/merge-patch+json"}


async def test_an_invalid_custom_resource_is_refused_with_field_paths(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    body = widget("w", size=0, mode="C")
    del body["spec"]["size"]
    body["spec"]["mode"] = "C"
    response = await client.post(WIDGETS, json=body)
    assert response.status_code == 422
    status = response.json()
    assert status["kind"] == "Status"
    assert status["reason"] == "Invalid"
    assert status["details"]["kind"] == "Widget"
    causes = {c["field"]: c["reason"] for c in status["details"]["causes"]}
    assert causes == {"spec.mode": "FieldValueNotSupported", "spec.size": "FieldValueRequired"}
    assert status["message"].startswith('Widget.tests.example.com "w" is invalid: [')


async def test_patches_and_replacements_are_validated_too(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    created = (await client.post(WIDGETS, json=widget("w", size=2))).json()
    patched = await client.patch(f"{WIDGETS}/w", json={"spec": {"size": 0}}, headers=MERGE)
    assert patched.status_code == 422
    assert patched.json()["details"]["causes"][0]["field"] == "spec.size"
    replacement = {**created, "spec": {"size": "big"}}
    replaced = await client.put(f"{WIDGETS}/w", json=replacement)
    assert replaced.status_code == 422
    assert replaced.json()["details"]["causes"][0]["reason"] == "FieldValueTypeInvalid"


async def test_schema_defaults_are_applied_and_unknown_fields_pruned(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    created = (await client.post(WIDGETS, json=widget("w", size=2, colour="red"))).json()
    assert created["spec"] == {"size": 2, "mode": "A"}


async def test_strict_field_validation_refuses_unknown_fields_instead_of_pruning(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    body = widget("w", size=2, colour="red")
    response = await client.post(WIDGETS, params={"fieldValidation": "Strict"}, json=body)
    assert response.status_code == 400
    assert 'unknown field "spec.colour"' in response.json()["message"]


async def test_a_server_side_dry_run_stores_nothing(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    response = await client.post(WIDGETS, params={"dryRun": "All"}, json=widget("w"))
    assert response.status_code == 201
    assert (await client.get(f"{WIDGETS}/w")).status_code == 404


async def test_cel_rules_and_list_types_of_the_schema_are_enforced(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    body = widget("w", size=1, range={"min": 5, "max": 1}, tags=["a", "a"])
    response = await client.post(WIDGETS, json=body)
    assert response.status_code == 422
    causes = {c["field"]: (c["reason"], c["message"]) for c in response.json()["details"]["causes"]}
    assert causes == {
        "spec.range": (
            "FieldValueInvalid",
            'Invalid value: "object": min must not be greater than max',
        ),
        "spec.tags[1]": ("FieldValueDuplicate", 'Duplicate value: "a"'),
    }
    fine = widget("w", size=1, range={"min": 1, "max": 5}, tags=["a", "b"])
    assert (await client.post(WIDGETS, json=fine)).status_code == 201
