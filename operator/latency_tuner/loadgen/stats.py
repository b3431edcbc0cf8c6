"""Summary statistics for latency samples: pure functions, no clocks, no I/O.

Percentiles interpolate linearly between closest ranks, exactly like numpy's default
(``method="linear"``) and ``statistics.quantiles(..., method="inclusive")``, so numbers agree
with vLLM's ``benchmark_serving.py`` (which uses numpy) on the same samples.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: The percentiles every summary carries.
PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0 <= q <= 100) of already sorted values, linear interpolation."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile {q} outside [0, 100]")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    lower, upper = sorted_values[low], sorted_values[high]
    # lower + (upper - lower) * f stays inside [lower, upper] (no overshoot from rounding).
    return lower + (upper - lower) * fraction if fraction else lower


@dataclass(frozen=True)
class Summary:
    """Count, mean, min, max and the PERCENTILES of one sample set (same unit as the input)."""

    count: int
    mean: float
    minimum: float
    maximum: float
    p50: float
    p90: float
    p95: float
    p99: float

    def scaled(self, factor: float) -> Summary:
        """The same summary in another unit (e.g. seconds -> milliseconds with 1000)."""
        return Summary(
            count=self.count,
            mean=self.mean * factor,
            minimum=self.minimum * factor,
            maximum=self.maximum * factor,
            p50=self.p50 * factor,
            p90=self.p90 * factor,
            p95=self.p95 * factor,
            p99=self.p99 * factor,
        )

    def as_dict(self) -> dict[str, float | int]:
        return {
            "count": self.count,
            "mean": self.mean,
            "min": self.minimum,
            "max": self.maximum,
            "p50": self.p50,
            "p90": self.p90,
            "p95": self.p95,
            "p99": self.p99,
        }


def summarize(values: Iterable[float]) -> Summary | None:
    """Summary of the values, or None when there are none (no made-up zeros)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return Summary(
        count=len(ordered),
        mean=math.fsum(ordered) / len(ordered),
        minimum=ordered[0],
        maximum=ordered[-1],
        p50=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p95=percentile(ordered, 95),
        p99=percentile(ordered, 99),
    )
