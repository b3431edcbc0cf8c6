"""What the server manages on objects: identity, versions, generation, status, deletion."""

from __future__ import annotations

from typing import Any

import httpx
from tests.integration.apiserver.support import WIDGETS, deployment, widget

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
MERGE = {"Content-Type": "application/merge-patch+json"}


async def test_created_objects_get_uid_timestamp_generation_and_resource_version(
    client: httpx.AsyncClient,
) -> None:
    # kmock 0.8: none of these, so kopf's `test` op on /metadata/resourceVersion always failed.
    created = (await client.post(DEPLOYMENTS, json=deployment("d", "a"))).json()
    meta = created["metadata"]
    assert len(meta["uid"]) == 36
    assert meta["creationTimestamp"].endswith("Z")
    assert meta["generation"] == 1
    assert int(meta["resourceVersion"]) > 0


async def test_post_answers_201_and_fills_the_namespace_from_the_url(
    client: httpx.AsyncClient,
) -> None:
    # kmock 0.8: 200 and no metadata.namespace.
    response = await client.post(DEPLOYMENTS, json=deployment("d", "a"))
    assert response.status_code == 201
    assert response.json()["metadata"]["namespace"] == "default"
    again = await client.post(DEPLOYMENTS, json=deployment("d", "a"))
    assert again.status_code == 409
    assert again.json()["reason"] == "AlreadyExists"


async def test_creating_in_a_missing_namespace_is_not_found(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/api/v1/namespaces/nowhere/configmaps", json={"metadata": {"name": "c"}}
    )
    assert response.status_code == 404
    assert response.json()["message"] == 'namespaces "nowhere" not found'


async def test_resource_version_grows_on_every_write_and_generation_only_on_spec_changes(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    created = (await client.post(WIDGETS, json=widget("w", size=1))).json()
    labelled = (
        await client.patch(f"{WIDGETS}/w", json={"metadata": {"labels": {"x": "y"}}}, headers=MERGE)
    ).json()
    statused = (
        await client.patch(f"{WIDGETS}/w/status", json={"status": {"ok": True}}, headers=MERGE)
    ).json()
    resized = (await client.patch(f"{WIDGETS}/w", json={"spec": {"size": 2}}, headers=MERGE)).json()
    versions = [
        int(o["metadata"]["resourceVersion"]) for o in (created, labelled, statused, resized)
    ]
    assert versions == sorted(set(versions))
    assert [o["metadata"]["generation"] for o in (created, labelled, statused, resized)] == [
        1,
        1,
        1,
        2,
    ]
    noop = (await client.patch(f"{WIDGETS}/w", json={"spec": {"size": 2}}, headers=MERGE)).json()
    assert noop["metadata"]["resourceVersion"] == resized["metadata"]["resourceVersion"]


async def test_status_writes_change_only_status_and_object_writes_never_change_status(
    client: httpx.AsyncClient,
) -> None:
    created = await client.post(
        DEPLOYMENTS, json={**deployment("d", "a"), "status": {"replicas": 9}}
    )
    assert "replicas" not in created.json().get("status", {})  # dropped on create, as in Kubernetes
    via_status = await client.patch(
        f"{DEPLOYMENTS}/d/status",
        json={"spec": {"replicas": 5}, "status": {"replicas": 1}},
        headers=MERGE,
    )
    assert via_status.json()["spec"]["replicas"] == 1
    assert via_status.json()["status"] == {"replicas": 1}
    via_object = await client.patch(
        f"{DEPLOYMENTS}/d", json={"spec": {"replicas": 3}, "status": {"replicas": 7}}, headers=MERGE
    )
    assert via_object.json()["spec"]["replicas"] == 3
    assert via_object.json()["status"] == {"replicas": 1}


async def test_a_failed_json_patch_test_answers_422_and_changes_nothing(
    client: httpx.AsyncClient,
) -> None:
    # kmock 0.8: 500. kopf treats only 422 as "the object changed meanwhile, retry".
    created = (await client.post(DEPLOYMENTS, json=deployment("d", "a"))).json()
    rv = created["metadata"]["resourceVersion"]
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
        {"op": "add", "path": "/metadata/finalizers", "value": ["x"]},
    ]
    headers = {"Content-Type": "application/json-patch+json"}
    failed = await client.patch(f"{DEPLOYMENTS}/d", json=ops, headers=headers)
    assert failed.status_code == 422
    assert failed.json()["reason"] == "Invalid"
    current = (await client.get(f"{DEPLOYMENTS}/d")).json()
    assert current["metadata"]["resourceVersion"] == rv
    ops[0]["value"] = rv
    applied = await client.patch(f"{DEPLOYMENTS}/d", json=ops, headers=headers)
    assert applied.status_code == 200
    assert applied.json()["metadata"]["finalizers"] == ["x"]


async def test_a_strategic_merge_patch_merges_containers_env_and_ports_by_key(
    client: httpx.AsyncClient,
) -> None:
    # kmock 0.8: the patch's containers list replaced the whole list.
    await client.post(DEPLOYMENTS, json=deployment("d", "a", "b"))
    patch = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "b", "args": ["--new"], "env": [{"name": "E", "value": "1"}]},
                        {"name": "a", "$patch": "delete"},
                        {"name": "c", "image": "example/c:1"},
                    ]
                }
            }
        }
    }
    headers = {"Content-Type": "application/strategic-merge-patch+json"}
    patched = (await client.patch(f"{DEPLOYMENTS}/d", json=patch, headers=headers)).json()
    containers = patched["spec"]["template"]["spec"]["containers"]
    assert containers == [
        {
            "name": "b",
            "image": "example/b:1",
            "args": ["--new"],
            "env": [{"name": "E", "value": "1"}],
        },
        {"name": "c", "image": "example/c:1"},
    ]
    assert patched["metadata"]["generation"] == 2


async def test_strategic_merge_patch_is_refused_for_custom_resources(
    client: httpx.AsyncClient, crd: dict[str, Any]
) -> None:
    await client.post(WIDGETS, json=widget("w"))
    headers = {"Content-Type": "application/strategic-merge-patch+json"}
    response = await client.patch(f"{WIDGETS}/w", json={"spec": {"size": 2}}, headers=headers)
    assert response.status_code == 415


async def test_put_replaces_and_a_stale_resource_version_is_a_conflict(
    client: httpx.AsyncClient,
) -> None:
    # kmock 0.8: PUT answered 404.
    created = (await client.post(DEPLOYMENTS, json=deployment("d", "a"))).json()
    replacement = deployment("d", "z")
    replacement["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    replaced = await client.put(f"{DEPLOYMENTS}/d", json=replacement)
    assert replaced.status_code == 200
    assert [c["name"] for c in replaced.json()["spec"]["template"]["spec"]["containers"]] == ["z"]
    assert replaced.json()["metadata"]["uid"] == created["metadata"]["uid"]
    stale = await client.put(f"{DEPLOYMENTS}/d", json=replacement)
    assert stale.status_code == 409
    assert stale.json()["reason"] == "Conflict"
    assert stale.json()["details"] == {"name": "d", "group": "apps", "kind": "deployments"}


async def test_a_merge_patch_with_a_stale_resource_version_is_a_conflict(
    client: httpx.AsyncClient,
) -> None:
    await client.post(DEPLOYMENTS, json=deployment("d", "a"))
    patch = {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 2}}
    response = await client.patch(f"{DEPLOYMENTS}/d", json=patch, headers=MERGE)
    assert response.status_code == 409


async def test_missing_objects_answer_a_not_found_status(client: httpx.AsyncClient) -> None:
    response = await client.get(f"{DEPLOYMENTS}/missing")
    assert response.status_code == 404
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'deployments.apps "missing" not found',
        "reason": "NotFound",
        "code": 404,
        "details": {"name": "missing", "group": "apps", "kind": "deployments"},
    }


async def test_deletion_waits_for_the_finalizers_then_the_object_goes(
    client: httpx.AsyncClient,
) -> None:
    body = deployment("d", "a")
    body["metadata"]["finalizers"] = ["tests/guard"]
    await client.post(DEPLOYMENTS, json=body)
    deleting = await client.delete(f"{DEPLOYMENTS}/d")
    assert deleting.status_code == 200
    assert deleting.json()["metadata"]["deletionTimestamp"]
    still = await client.get(f"{DEPLOYMENTS}/d")
    assert still.status_code == 200
    released = await client.patch(
        f"{DEPLOYMENTS}/d", json={"metadata": {"finalizers": None}}, headers=MERGE
    )
    assert released.status_code == 200
    assert (await client.get(f"{DEPLOYMENTS}/d")).status_code == 404


async def test_no_finalizer_can_be_added_to_an_object_being_deleted(
    client: httpx.AsyncClient,
) -> None:
    body = deployment("d", "a")
    body["metadata"]["finalizers"] = ["tests/guard"]
    await client.post(DEPLOYMENTS, json=body)
    await client.delete(f"{DEPLOYMENTS}/d")
    patch = {"metadata": {"finalizers": ["tests/guard", "tests/other"]}}
    response = await client.patch(f"{DEPLOYMENTS}/d", json=patch, headers=MERGE)
    assert response.status_code == 422


async def test_lists_carry_kind_api_version_and_a_resource_version(
    client: httpx.AsyncClient,
) -> None:
    # kmock 0.8: no kind/apiVersion and resourceVersion "...".
    created = (await client.post(DEPLOYMENTS, json=deployment("d", "a"))).json()
    listed = (await client.get(DEPLOYMENTS)).json()
    assert listed["kind"] == "DeploymentList"
    assert listed["apiVersion"] == "apps/v1"
    assert int(listed["metadata"]["resourceVersion"]) >= int(created["metadata"]["resourceVersion"])
    assert [i["metadata"]["name"] for i in listed["items"]] == ["d"]


async def test_label_and_field_selectors_filter_lists(client: httpx.AsyncClient) -> None:
    for name in ("one", "two", "three"):
        await client.post(DEPLOYMENTS, json=deployment(name, "a"))

    async def names(**params: str) -> list[str]:
        items = (await client.get("/apis/apps/v1/deployments", params=params)).json()["items"]
        return [i["metadata"]["name"] for i in items]

    assert await names(labelSelector="app=two") == ["two"]
    assert await names(labelSelector="app in (one,three)") == ["one", "three"]
    assert await names(labelSelector="app!=one,app") == ["three", "two"]
    assert await names(labelSelector="!app") == []
    assert await names(labelSelector="app notin (one)") == ["three", "two"]
    assert await names(labelSelector="app=two") == ["two"]  # the same selector again
    for _ in range(2):  # a selector that does not parse is refused every time, never cached
        bad = await client.get("/apis/apps/v1/deployments", params={"labelSelector": "a=(b"})
        assert bad.status_code == 400
    assert await names(fieldSelector="metadata.name=three") == ["three"]
    assert await names(fieldSelector="metadata.namespace=default,metadata.name!=one") == [
        "three",
        "two",
    ]


async def test_events_are_accepted_in_both_event_groups(client: httpx.AsyncClient) -> None:
    core = {
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "Deployment", "name": "d", "namespace": "default"},
        "reason": "Tuned",
        "message": "hello",
        "type": "Normal",
    }
    modern = {"metadata": {"name": "e2"}, "reason": "Tuned", "note": "hello", "action": "Tune"}
    assert (await client.post("/api/v1/namespaces/default/events", json=core)).status_code == 201
    response = await client.post("/apis/events.k8s.io/v1/namespaces/default/events", json=modern)
    assert response.status_code == 201


async def test_deleting_a_namespace_deletes_what_is_in_it(client: httpx.AsyncClient) -> None:
    await client.post("/api/v1/namespaces", json={"metadata": {"name": "team"}})
    await client.post("/api/v1/namespaces/team/configmaps", json={"metadata": {"name": "c"}})
    assert (await client.delete("/api/v1/namespaces/team")).status_code == 200
    assert (await client.get("/api/v1/namespaces/team/configmaps/c")).status_code == 404


async def test_a_namespaced_list_holds_its_namespace_and_a_deleted_object_leaves_every_list(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/api/v1/namespaces", json={"metadata": {"name": "team"}})
    await client.post(DEPLOYMENTS, json=deployment("d", "a"))
    await client.post("/apis/apps/v1/namespaces/team/deployments", json=deployment("t", "a"))

    async def names(path: str) -> list[str]:
        return [i["metadata"]["name"] for i in (await client.get(path)).json()["items"]]

    assert await names(DEPLOYMENTS) == ["d"]
    assert await names("/apis/apps/v1/namespaces/team/deployments") == ["t"]
    assert await names("/apis/apps/v1/namespaces/nowhere/deployments") == []
    assert await names("/apis/apps/v1/deployments") == ["d", "t"]
    assert {"default", "team"} <= set(await names("/api/v1/namespaces"))  # cluster-scoped
    assert (await client.delete(DEPLOYMENTS + "/d")).status_code == 200
    assert await names(DEPLOYMENTS) == []
    assert await names("/apis/apps/v1/deployments") == ["t"]
    await client.post(DEPLOYMENTS, json=deployment("d", "b"))  # the same name again
    assert await names("/apis/apps/v1/deployments") == ["d", "t"]
