"""The scale benchmark's fleet /metrics: one namespace's path holds exactly that namespace's
pods, every family parses as Prometheus text, and the whole fleet is the union of the paths."""

from __future__ import annotations

from benchmarks.scale.fleet_metrics import FleetMetrics
from prometheus_client.parser import text_string_to_metric_families


def _pods_by_namespace(text: bytes) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            seen.setdefault(sample.labels["namespace"], set()).add(sample.labels["pod"])
    return seen


def test_a_namespaces_path_serves_only_that_namespaces_pods() -> None:
    namespaces = {"vllm-0": "team-a", "vllm-1": "team-b", "vllm-2": "team-a"}
    pods = {name: f"{name}-pod-1" for name in namespaces}
    fleet = FleetMetrics(namespaces, pods, clock=lambda: 100.0)

    team_a = _pods_by_namespace(fleet.render("team-a"))
    team_b = _pods_by_namespace(fleet.render("team-b"))
    everyone = _pods_by_namespace(fleet.render())

    assert team_a == {"team-a": {"vllm-0-pod-1", "vllm-2-pod-1"}}
    assert team_b == {"team-b": {"vllm-1-pod-1"}}
    assert everyone == {"team-a": team_a["team-a"], "team-b": team_b["team-b"]}
    assert fleet.render("team-c") == b""


def test_a_pods_counters_keep_counting_across_scrapes_of_its_namespace() -> None:
    namespaces = {"vllm-0": "team-a", "vllm-1": "team-b"}
    pods = {name: f"{name}-pod-1" for name in namespaces}
    now = [0.0]
    fleet = FleetMetrics(namespaces, pods, clock=lambda: now[0])

    def requests(text: bytes) -> float:
        for family in text_string_to_metric_families(text.decode()):
            for sample in family.samples:
                if sample.name.endswith("request_success_total"):
                    return float(sample.value)
        raise AssertionError("no request counter")

    fleet.render("team-a")
    now[0] = 10.0
    first = requests(fleet.render("team-a"))
    now[0] = 20.0
    fleet.render("team-b")  # another namespace's scrape leaves team-a's counters alone
    second = requests(fleet.render("team-a"))
    assert first > 0
    assert second == 2 * first
