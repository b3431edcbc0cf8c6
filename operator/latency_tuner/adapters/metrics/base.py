"""The one seam between the operator and any metrics backend: the loop's port
(``controller.ports.MetricsSource``), named here for the backends that implement it."""

from latency_tuner.controller.ports import MetricsSource

__all__ = ["MetricsSource"]
