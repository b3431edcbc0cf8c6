"""Why a metrics source could not answer (see the tree in the package docstring)."""

from latency_tuner.controller.errors import MetricsUnavailable


class MetricsError(MetricsUnavailable):
    """The source could not answer; the observation is unknown, not empty."""


class SourceUnreachable(MetricsError):
    """Connection refused, name not resolved, TLS failure or timeout."""


class QueryFailed(MetricsError):
    """The source answered with an error."""
