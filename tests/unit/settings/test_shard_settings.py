"""A shard knows its index from a flag or, in a StatefulSet, from its hostname's ordinal; an
index that is no shard of the count is refused; each shard peers under a name of its own."""

from __future__ import annotations

import pytest

from latency_tuner.core.sharding.assignment import Sharding
from latency_tuner.settings import SettingsError, parse_settings

ENV = {"LT_PROMETHEUS_URL": "http://prometheus:9090"}


def test_the_shard_index_comes_from_the_flag_or_the_environment() -> None:
    assert parse_settings(["--shards", "4", "--shard-index", "3"], ENV).shard_index == 3
    settings = parse_settings([], {**ENV, "LT_SHARDS": "4", "LT_SHARD_INDEX": "2"})
    assert settings.sharding == Sharding(index=2, shards=4)


def test_a_statefulset_pod_is_the_shard_its_ordinal_names() -> None:
    env = {**ENV, "LT_SHARDS": "3", "HOSTNAME": "latency-tuner-2"}
    settings = parse_settings([], env)
    assert (settings.shard_index, settings.pod_name) == (2, "latency-tuner-2")


def test_the_pod_name_kopf_is_given_names_the_claims_holder() -> None:
    assert parse_settings([], {**ENV, "POD_ID": "tuner-abc", "HOSTNAME": "h"}).pod_name == (
        "tuner-abc"
    )


@pytest.mark.parametrize(
    ("argv", "env", "says"),
    [
        (["--shards", "2", "--shard-index", "2"], {}, "not a shard of 2"),
        ([], {"LT_SHARDS": "2", "HOSTNAME": "latency-tuner-5"}, "replicas must equal --shards"),
        (["--shards", "0"], {}, "at least 1"),
        (["--shard-index", "-1"], {}, "at least 0"),
        (["--shard-mode", "range"], {}, "not one of hash, namespace, label"),
    ],
)
def test_a_shard_that_cannot_exist_is_refused(
    argv: list[str], env: dict[str, str], says: str
) -> None:
    with pytest.raises(SettingsError, match=says):
        parse_settings(argv, {**ENV, **env})


def test_each_shard_peers_in_its_own_peering_and_one_shard_keeps_todays_name() -> None:
    one = parse_settings(["--peering-name", "tuners"], ENV)
    assert one.shard_peering_name == "tuners"
    second = parse_settings(
        ["--peering-name", "tuners", "--shards", "2", "--shard-index", "1"], ENV
    )
    assert second.shard_peering_name == "tuners-shard-1"
