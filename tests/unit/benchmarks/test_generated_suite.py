"""The harder suite: drawn by a seeded generator, valid, larger, and what its files say."""

from __future__ import annotations

import statistics
from pathlib import Path

import yaml

from latency_tuner.convergence.generate import FAMILIES, generate
from latency_tuner.convergence.scenario import load_suite, parse_scenario
from latency_tuner.convergence.space import build_space
from latency_tuner.convergence.world import Load, make_world

HARD = Path(__file__).resolve().parents[3] / "benchmarks" / "scenarios-hard"


def test_the_generator_gives_the_same_scenarios_for_a_seed_and_new_ones_for_another() -> None:
    assert generate(7, 12) == generate(7, 12)
    assert generate(7, 12) != generate(8, 12)
    assert [d["name"].split("-", 2)[2] for d in generate(7, len(FAMILIES))] == [
        f.__name__.replace("_", "-") for f in FAMILIES
    ]


def test_every_generated_scenario_of_other_seeds_is_valid_and_within_the_space_limit() -> None:
    for seed in (2, 3):
        for data in generate(seed, 2 * len(FAMILIES)):
            build_space(parse_scenario(data, data["name"]))  # raises when invalid


def test_the_committed_hard_suite_is_the_generators_seed_1_and_larger_than_the_shipped_one() -> (
    None
):
    suite = load_suite(HARD)
    assert len(suite) >= 50
    on_disk = {p.stem: yaml.safe_load(p.read_text()) for p in HARD.glob("*.yaml")}
    assert on_disk == {d["name"]: d for d in generate(1, len(on_disk))}
    sizes = [len(build_space(s)) for s in suite]
    assert statistics.median(sizes) >= 20
    assert sum(1 for s in suite if not s.expect.feasible) >= 5  # plus those the oracle finds
    tags = {t for s in suite for t in s.tags}
    assert {"drift", "bursty", "tp-over-pcie", "lossy-unneeded", "tp-not-needed"} <= tags


def test_a_drifting_rate_ends_at_its_multiple_and_the_oracle_sees_the_drifted_rate() -> None:
    data = next(d for d in generate(1, 10) if "drift" in d["tags"])
    scenario = parse_scenario(data)
    w = scenario.workload
    world = make_world("matched", 0)
    early = Load(w, world, seed=0, stream="t").arrivals_until(60.0)
    late = Load(w, world, seed=0, stream="t", offset=w.drift_seconds).arrivals_until(60.0)
    assert w.rate is not None
    assert len(early) / 60.0 < w.rate * 1.25
    assert len(late) / 60.0 > w.rate * w.drift * 0.8
