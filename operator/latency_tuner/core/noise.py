"""How much two windows of the same server differ by chance alone, from their own counts.

- ``count_tolerance``: requests arrive as a Poisson process, so a count of n varies by about
  sqrt(n); two counts n1, n2 differ by chance up to ``LOAD_SIGMAS`` x sqrt(n1 + n2), relative to
  the larger. Sparse traffic (tens of requests per window) thus tolerates far more than a
  fixed 25%.
- ``mean_tolerance``: a mean over n requests (prompt or output length) varies by its
  coefficient of variation over sqrt(n), which for request lengths is about 1 (more under
  heavy tails); two means differ by chance up to ``LOAD_SIGMAS`` x sqrt(1/n1 + 1/n2). For
  equal counts that is the count's tolerance; for unequal ones the smaller count decides: the
  mean length of the one request a saturated window finished says next to nothing.
- ``quantile_se``: the standard error of a sample quantile, sqrt(p(1-p)/n) / f(x_p), with
  the density f at the quantile read from the window's own neighbouring quantiles (the
  slope of the quantile function between them). Tight latencies give a small error, a long
  tail a large one, and few requests a large one either way.

Values in, values out: the verdict decides what to do with them. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

LOAD_SIGMAS = 3.0  # counts this many standard deviations apart are a different load


def count_tolerance(n1: int | None, n2: int | None) -> float:
    """The relative difference (against the larger) two Poisson counts reach by chance; 0 when
    either count is unknown or both are 0."""
    if n1 is None or n2 is None or max(n1, n2) <= 0:
        return 0.0
    return min(1.0, LOAD_SIGMAS * math.sqrt(n1 + n2) / max(n1, n2))


def mean_tolerance(n1: int | None, n2: int | None) -> float:
    """The relative difference two mean request lengths over ``n1`` and ``n2`` requests reach
    by chance (1: any); 0 when either count is unknown."""
    if n1 is None or n2 is None:
        return 0.0
    if min(n1, n2) <= 0:
        return 1.0
    return min(1.0, LOAD_SIGMAS * math.sqrt(1 / n1 + 1 / n2))


def quantile_se(quantiles: Mapping[int, float], percentile: int, n: int) -> float | None:
    """Standard error (seconds) of the ``percentile`` quantile estimated from ``n`` samples;
    None when the window lacks the neighbouring quantiles to read the density from."""
    if n <= 0 or percentile not in quantiles:
        return None
    known = sorted(p for p in quantiles if math.isfinite(quantiles[p]))
    below = [p for p in known if p < percentile]
    above = [p for p in known if p > percentile]
    if below and above:
        lo, hi = below[-1], above[0]
    elif len(below) >= 2:  # the top quantile: the slope just below it
        lo, hi = below[-1], percentile
    elif len(above) >= 2:
        lo, hi = percentile, above[0]
    else:
        return None
    spread = quantiles[hi] - quantiles[lo]
    if spread <= 0:
        return 0.0  # every sample in one histogram bucket's interpolation: no spread seen
    p = percentile / 100
    density = (hi - lo) / 100 / spread
    return math.sqrt(p * (1 - p) / n) / density
