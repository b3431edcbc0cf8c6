"""Tuning reports: what the operator did to one LatencyTarget, as Markdown, a PNG and JSON.

One report for both the demo and ``latency-tuner report NAME`` on a real cluster, built from
the LatencyTarget as the API server holds it (spec and status), its events and its Deployment:
what a user could read with kubectl, gathered in one place and kept after the instance is gone,
with what tuning cost (rollouts, trials, GPU-hours spent in trials). This package renders
values it is given; it never talks to a cluster and never reads a clock (``now`` is passed in).
"""

from latency_tuner.report.model import TuningReport, build_report, event_rows, objectives_of
from latency_tuner.report.render import markdown, to_json, write

__all__ = [
    "TuningReport",
    "build_report",
    "event_rows",
    "markdown",
    "objectives_of",
    "to_json",
    "write",
]
