"""What to run: the immutable benchmark configuration and its validation. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BenchConfig:
    """One benchmark run.

    Stop condition: after ``requests`` sent requests, or ``duration`` seconds of sending
    (in-flight requests then finish), or - with neither - only when the caller's ``stop``
    event is set (the long-running background-load mode; in-flight requests are cancelled).
    ``rate`` None is a closed loop (``concurrency`` workers sending back to back); otherwise
    Poisson arrivals at ``rate`` req/s, never more than ``concurrency`` in flight.
    """

    url: str
    model: str | None = None
    chat: bool = False
    concurrency: int = 1
    prompt_tokens: int = 128
    output_tokens: int = 128
    requests: int | None = None
    duration: float | None = None
    shared_prefix_tokens: int = 0
    rate: float | None = None
    seed: int = 0
    timeout: float = 60.0
    api_key: str | None = None
    progress_interval: float = 0.5
    #: Connections per httpx.AsyncClient (0: one client for everything). See runner.py for
    #: why large concurrency is split over several clients.
    pool_shard_size: int = 16

    def __post_init__(self) -> None:
        problems = []
        if not self.url.startswith(("http://", "https://")):
            problems.append("url must start with http:// or https://")
        if self.concurrency < 1:
            problems.append("concurrency must be >= 1")
        if self.prompt_tokens < 1:
            problems.append("prompt_tokens must be >= 1")
        if self.output_tokens < 1:
            problems.append("output_tokens must be >= 1")
        if not 0 <= self.shared_prefix_tokens < self.prompt_tokens:
            problems.append("shared_prefix_tokens must be >= 0 and < prompt_tokens")
        if self.requests is not None and self.requests < 1:
            problems.append("requests must be >= 1")
        if self.duration is not None and not self.duration > 0:
            problems.append("duration must be > 0")
        if self.requests is not None and self.duration is not None:
            problems.append("give requests or duration, not both")
        if self.rate is not None and not self.rate > 0:
            problems.append("rate must be > 0 (omit it for a closed loop)")
        if not self.timeout > 0:
            problems.append("timeout must be > 0")
        if not self.progress_interval > 0:
            problems.append("progress_interval must be > 0")
        if self.pool_shard_size < 0:
            problems.append("pool_shard_size must be >= 0")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def base_url(self) -> str:
        """The server root: a trailing ``/`` or ``/v1`` in ``url`` is tolerated."""
        base = self.url.rstrip("/")
        return base[: -len("/v1")] if base.endswith("/v1") else base
