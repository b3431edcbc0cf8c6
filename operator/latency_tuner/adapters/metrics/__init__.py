"""Metrics sources: where an Observation of a vLLM Deployment comes from.

Two backends behind one small protocol (``MetricsSource``): ``prometheus`` (a Prometheus server
through prometheus-api-client) and ``scrape`` (the pods' ``/metrics`` scraped directly, the
embedded default for clusters without Prometheus and for the demo). Both evaluate the same
aggregates (``core.signals``) with the same arithmetic, so they agree on the same server.

Exception tree (``errors``)::

    MetricsError                 the source could not answer
    ├── SourceUnreachable        connection refused, DNS, TLS, timeout
    └── QueryFailed              the source answered with an error (bad query, 4xx/5xx)

"No data" is not an error: ``observe`` returns ``NoData`` for it.
"""

from latency_tuner.adapters.metrics.base import MetricsSource
from latency_tuner.adapters.metrics.errors import MetricsError, QueryFailed, SourceUnreachable

__all__ = ["MetricsError", "MetricsSource", "QueryFailed", "SourceUnreachable"]
