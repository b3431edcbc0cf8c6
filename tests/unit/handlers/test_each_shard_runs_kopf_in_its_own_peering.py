"""kopf's run arguments per shard: a peering of the shard's own, and a priority per process so
that one replica of a shard leads (kopf pauses every peer when the top priority is shared)."""

from __future__ import annotations

from latency_tuner.handlers.cli import run_kwargs
from latency_tuner.settings import parse_settings

ENV = {"LT_PROMETHEUS_URL": "http://prometheus:9090", "HOSTNAME": "tuner-x"}


def test_a_standalone_operator_has_no_peering_and_no_priority() -> None:
    kwargs = run_kwargs(parse_settings([], ENV))
    assert (kwargs["peering_name"], kwargs["priority"]) == (None, None)


def test_replicas_of_one_shard_peer_under_the_shards_name_with_their_own_priorities() -> None:
    argv = ["--standalone", "false", "--shards", "3", "--shard-index", "2"]
    first, second = run_kwargs(parse_settings(argv, ENV)), run_kwargs(parse_settings(argv, ENV))
    assert first["peering_name"] == "latency-tuner-shard-2"
    assert isinstance(first["priority"], int)
    assert first["priority"] > 0
    assert isinstance(second["priority"], int)


def test_one_shard_with_replicas_keeps_todays_peering_name() -> None:
    kwargs = run_kwargs(parse_settings(["--standalone", "false"], ENV))
    assert kwargs["peering_name"] == "latency-tuner"
