"""The failures the loop tells apart; adapters raise them (or subclasses of them)."""


class ClusterError(Exception):
    """The cluster refused or failed a request."""


class StaleWrite(ClusterError):
    """The object changed since it was read: read again, never overwrite."""


class ContainerNotFound(ClusterError):
    """The Deployment has no container of the given name."""


class MetricsUnavailable(Exception):
    """The metrics source could not answer; the observation is unknown, not empty."""


class NameTaken(ClusterError):
    """An object the operator would create exists and is not the operator's."""
