"""Time for the simulator's engine, injected: real (HTTP serving) or virtual (benchmarks).

``RealClock`` reads ``time.monotonic`` and sleeps with asyncio; ``VirtualClock`` only moves when
told to, instantly, so a simulation runs as fast as the CPU allows. Nothing else in the engine
reads a clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

__all__ = ["Clock", "RealClock", "VirtualClock"]


class Clock(Protocol):
    def now(self) -> float: ...

    async def sleep_until(self, t: float) -> None: ...


class RealClock:
    """Monotonic seconds; ``sleep_until`` wakes at (or just after) ``t``."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep_until(self, t: float) -> None:
        delay = t - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            await asyncio.sleep(0)  # always yield, so the server keeps serving


class VirtualClock:
    """Simulated seconds that advance only through ``advance_to`` / ``sleep_until``."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> None:
        if t > self._now:
            self._now = t

    async def sleep_until(self, t: float) -> None:
        self.advance_to(t)
