"""The ConfigMap reader against the API emulator: one key, in the namespace asked, capped, and
only from a ConfigMap that opts in with the quality-samples label."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from latency_tuner.adapters.kubernetes.client import make_api_client
from latency_tuner.adapters.kubernetes.configmaps import ConfigMaps
from latency_tuner.core.quality.samples import (
    MAX_SAMPLES_BYTES,
    SAMPLES_LABEL,
    InvalidSamples,
    not_lent_message,
)
from latency_tuner.sandbox.apiserver import ApiServer


def configmap(
    namespace: str, name: str, data: dict[str, str], *, lent: bool = True
) -> dict[str, object]:
    meta: dict[str, object] = {"name": name, "namespace": namespace}
    if lent:
        meta["labels"] = {SAMPLES_LABEL: "true"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        for ns in ("team-a", "team-b"):
            await server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await server.create(configmap("team-a", "qa", {"samples.json": '[{"prompt": "hi"}]'}))
        await server.create(configmap("team-b", "secret-qa", {"samples.json": "[]"}))
        big = {"samples.json": "x" * (MAX_SAMPLES_BYTES + 1)}
        await server.create(configmap("team-a", "big", big))
        private = {"samples.json": '[{"prompt": "hunter2"}]'}
        await server.create(configmap("team-a", "db-credentials", private, lent=False))
        yield server


def reader(api: ApiServer, tmp_path: Path) -> ConfigMaps:
    return ConfigMaps(make_api_client(str(api.write_kubeconfig(tmp_path / "kubeconfig"))))


async def test_the_named_key_is_read_from_the_namespace_asked(
    api: ApiServer, tmp_path: Path
) -> None:
    text = await reader(api, tmp_path).read_key(namespace="team-a", name="qa", key="samples.json")
    assert text == '[{"prompt": "hi"}]'


async def test_a_configmap_of_another_namespace_is_not_found_from_this_one(
    api: ApiServer, tmp_path: Path
) -> None:
    with pytest.raises(InvalidSamples) as refused:
        await reader(api, tmp_path).read_key(
            namespace="team-a", name="secret-qa", key="samples.json"
        )
    assert str(refused.value) == not_lent_message("team-a", "secret-qa")


async def test_a_missing_key_or_a_value_over_the_cap_is_refused(
    api: ApiServer, tmp_path: Path
) -> None:
    configmaps = reader(api, tmp_path)
    with pytest.raises(InvalidSamples, match=r"has no key other\.json"):
        await configmaps.read_key(namespace="team-a", name="qa", key="other.json")
    with pytest.raises(InvalidSamples, match="larger than"):
        await configmaps.read_key(namespace="team-a", name="big", key="samples.json")


async def test_a_configmap_without_the_label_is_refused_like_a_missing_one_quoting_nothing(
    api: ApiServer, tmp_path: Path
) -> None:
    with pytest.raises(InvalidSamples) as refused:
        await reader(api, tmp_path).read_key(
            namespace="team-a", name="db-credentials", key="samples.json"
        )
    assert str(refused.value) == not_lent_message("team-a", "db-credentials")
    assert SAMPLES_LABEL in str(refused.value)
    assert "hunter2" not in str(refused.value)
