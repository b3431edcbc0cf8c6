"""The cost model lands within 20% of every reference point (reference/latency_points.csv).

Those rows sum measured kernel timings of one step and leave out HTTP, tokenisation and
scheduler time, so they are compared with the model's kernel-only part
(``predict(kernel_only=True)``: no per-step host time, no per-request server time). The NIM
single-client rows are end-to-end measurements and are compared with the whole model.

Run this file as a script to print the fidelity table:
    .venv/bin/python tests/unit/simulator/cost/test_reference_points.py
(``benchmarks/simulator/fidelity.py`` prints every group, measured_points.csv included.)
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import pytest

from latency_tuner.simulator.measured import REFERENCE_GPUS
from latency_tuner.simulator.predict import predict

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "fixtures" / "reference"
# /work/shared/reference beside /work/main; a worktree under /work/wt sits one level deeper.
SHARED = next(
    (
        p / "shared" / "reference"
        for p in (REPO.parent, REPO.parent.parent)
        if (p / "shared").is_dir()
    ),
    REPO.parent / "shared" / "reference",
)
TOLERANCE = 0.20


@dataclass(frozen=True)
class Point:
    id: str
    measure: str
    model: str
    gpu: str
    tp: int
    weights: str
    kv_cache: str
    prompt_tokens: int
    output_tokens: int
    batch: int
    expected_ms: float


def load_points(folder: Path = FIXTURES) -> list[Point]:
    with (folder / "latency_points.csv").open(newline="") as f:
        return [
            Point(
                id=row["id"],
                measure=row["measure"],
                model=row["model"],
                gpu=row["gpu"],
                tp=int(row["tp"]),
                weights=row["weights"],
                kv_cache=row["kv_cache"],
                prompt_tokens=int(row["prompt_tokens"]),
                output_tokens=int(row["output_tokens"]),
                batch=int(row["batch"]),
                expected_ms=float(row["ttft_ms" if row["measure"] == "ttft" else "itl_ms"]),
            )
            for row in csv.DictReader(f)
        ]


def model_ms(point: Point, *, kernel_only: bool = True) -> float:
    # weights=fp8 rows are FP8 checkpoints: same weights as --quantization fp8 on the BF16 one.
    prediction = predict(
        point.model,
        REFERENCE_GPUS.get(point.gpu, point.gpu),
        tp=point.tp,
        quantization="fp8" if point.weights == "fp8" else None,
        kv_cache_dtype="fp8" if point.kv_cache == "fp8" else None,
        prompt_tokens=point.prompt_tokens,
        output_tokens=point.output_tokens,
        batch=point.batch,
        kernel_only=kernel_only,
    )
    return prediction.ttft_ms if point.measure == "ttft" else prediction.itl_ms


POINTS = load_points()


def test_the_fixture_copy_holds_every_reference_row() -> None:
    assert len(POINTS) == 41
    assert {p.measure for p in POINTS} == {"ttft", "itl"}


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/reference is not beside the repository")
def test_the_fixture_copy_matches_the_shared_reference() -> None:
    for name in ("latency_points.csv", "nim_points.csv", "measured_points.csv"):
        assert (FIXTURES / name).read_text() == (SHARED / name).read_text()


@pytest.mark.parametrize("point", POINTS, ids=[p.id for p in POINTS])
def test_the_model_is_within_20_percent_of_the_reference_point(point: Point) -> None:
    got = model_ms(point)
    error = (got - point.expected_ms) / point.expected_ms
    assert abs(error) <= TOLERANCE, f"{point.id}: model {got:.2f} ms vs {point.expected_ms} ms"


def load_single_client_nim_points() -> list[tuple[str, Point, float]]:
    """NIM rows with one client: no queueing, so predict's idle-engine TTFT and ITL apply."""
    with (FIXTURES / "nim_points.csv").open(newline="") as f:
        rows = [row for row in csv.DictReader(f) if row["concurrency"] == "1"]
    points = []
    for row in rows:
        for measure in ("ttft", "itl"):
            point = Point(
                id=f"{row['id']}_{measure}",
                measure=measure,
                model=f"{row['model']}-Instruct",
                gpu=row["gpu"],
                tp=int(row["tp"]),
                weights=row["weights"],
                kv_cache="bf16",
                prompt_tokens=int(row["prompt_tokens"]),
                output_tokens=int(row["output_tokens"]),
                batch=1,
                expected_ms=float(row[f"{measure}_ms"]),
            )
            points.append((point.id, point, point.expected_ms))
    return points


NIM_POINTS = load_single_client_nim_points()


@pytest.mark.parametrize(
    ("name", "point", "expected"), NIM_POINTS, ids=[n for n, _, _ in NIM_POINTS]
)
def test_the_model_is_within_20_percent_of_measured_single_client_nim_latency(
    name: str, point: Point, expected: float
) -> None:
    # End-to-end measurements: HTTP, tokenisation and engine CPU time included on both sides.
    got = model_ms(point, kernel_only=False)
    assert abs(got - expected) / expected <= TOLERANCE, f"{name}: model {got:.2f} ms"


def fidelity_table() -> str:
    lines = [f"{'reference row':36} {'measure':7} {'ref ms':>9} {'model ms':>9} {'error':>7}"]
    worst = 0.0
    for point in POINTS:
        got = model_ms(point)
        error = (got - point.expected_ms) / point.expected_ms * 100
        worst = max(worst, abs(error))
        lines.append(
            f"{point.id:36} {point.measure:7} {point.expected_ms:9.2f} {got:9.2f} {error:+6.1f}%"
        )
    lines.append(f"max |error| = {worst:.1f}% over {len(POINTS)} rows")
    for name, point, expected in NIM_POINTS:
        got = model_ms(point, kernel_only=False)
        error = (got - expected) / expected * 100
        lines.append(f"{name:36} {point.measure:7} {expected:9.2f} {got:9.2f} {error:+6.1f}%")
    return "\n".join(lines)


if __name__ == "__main__":
    print(fidelity_table())
