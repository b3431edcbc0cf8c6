"""URLs kmock 0.8 failed or did not serve: namespaces, trailing slashes, discovery, OpenAPI."""

from __future__ import annotations

from typing import Any

import httpx

from latency_tuner.sandbox.apiserver import ApiServer


async def test_the_namespaces_list_and_a_namespace_are_served(client: httpx.AsyncClient) -> None:
    # kmock 0.8: 500 ValueError from its path parser.
    listed = await client.get("/api/v1/namespaces")
    assert listed.status_code == 200
    assert {"default", "kube-system"} <= {i["metadata"]["name"] for i in listed.json()["items"]}
    one = await client.get("/api/v1/namespaces/default")
    assert one.status_code == 200
    assert one.json()["status"] == {"phase": "Active"}
    status = await client.get("/api/v1/namespaces/default/status")
    assert status.json()["metadata"]["name"] == "default"


async def test_version_and_api_answer_with_a_trailing_slash(client: httpx.AsyncClient) -> None:
    # kmock 0.8: 404 for both.
    version = await client.get("/version/")
    api = await client.get("/api/")
    assert version.status_code == 200
    assert version.json()["major"] == "1"
    assert api.status_code == 200
    assert api.json()["versions"] == ["v1"]


async def test_discovery_lists_builtins_with_status_subresources_and_short_names(
    client: httpx.AsyncClient,
) -> None:
    groups = (await client.get("/apis")).json()
    assert {"apps", "apiextensions.k8s.io", "events.k8s.io"} <= {
        g["name"] for g in groups["groups"]
    }
    apps = (await client.get("/apis/apps/v1")).json()
    by_name = {r["name"]: r for r in apps["resources"]}
    assert by_name["deployments"]["namespaced"] is True
    assert by_name["deployments"]["shortNames"] == ["deploy"]
    assert "deployments/status" in by_name
    core = {r["name"]: r for r in (await client.get("/api/v1")).json()["resources"]}
    assert core["nodes"]["namespaced"] is False
    assert {"pods", "namespaces", "events"} <= set(core)


async def test_a_created_crd_is_established_and_served_in_discovery(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    group = (await client.get("/apis/tests.example.com")).json()
    assert group["preferredVersion"]["version"] == "v1"
    resources = {
        r["name"]: r for r in (await client.get("/apis/tests.example.com/v1")).json()["resources"]
    }
    assert resources["widgets"]["kind"] == "Widget"
    assert resources["widgets"]["shortNames"] == ["wg"]
    assert resources["widgets"]["namespaced"] is True
    assert "widgets/status" in resources


async def test_deleting_a_crd_stops_serving_its_resource(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    deleted = await client.delete(
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    )
    assert deleted.status_code == 200
    assert (await client.get("/apis/tests.example.com/v1")).status_code == 404
    assert (await client.get("/apis/tests.example.com/v1/widgets")).status_code == 404


async def test_openapi_carries_the_crd_schemas(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    # kmock 0.8: 404 for /openapi/*.
    index = (await client.get("/openapi/v3")).json()
    url = index["paths"]["apis/tests.example.com/v1"]["serverRelativeURL"]
    schemas = (await client.get(url)).json()["components"]["schemas"]
    widget = schemas["com.example.tests.v1.Widget"]
    assert widget["properties"]["spec"]["required"] == ["size"]
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": "tests.example.com", "version": "v1", "kind": "Widget"}
    ]
    v2 = (await client.get("/openapi/v2")).json()
    assert "com.example.tests.v1.Widget" in v2["definitions"]


async def test_unknown_urls_answer_a_kubernetes_not_found_status(client: httpx.AsyncClient) -> None:
    response = await client.get("/apis/nothing.example.com/v1/things")
    assert response.status_code == 404
    assert response.json()["kind"] == "Status"
    assert response.json()["reason"] == "NotFound"


async def test_kmock_reactions_still_take_precedence_over_the_emulation(
    api: ApiServer, client: httpx.AsyncClient
) -> None:
    api.emulator["get /version"] << {"major": "9"}
    assert (await client.get("/version")).json() == {"major": "9"}
    assert (await client.get("/api/v1/namespaces/default")).status_code == 200


async def test_kmock_reactions_can_answer_for_resources_the_emulator_does_not_know(
    api: ApiServer, client: httpx.AsyncClient
) -> None:
    api.emulator["get /apis/metrics.k8s.io/v1beta1/pods"] << {"items": []}
    assert (await client.get("/apis/metrics.k8s.io/v1beta1/pods")).json() == {"items": []}
    assert (await client.get("/apis/metrics.k8s.io/v1beta1/nodes")).status_code == 404
