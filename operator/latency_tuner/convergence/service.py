"""The Service in front of a virtual Deployment's pods: one load split evenly across every
ready pod, as kube-proxy spreads connections over a Service's endpoints.

Open arrivals (Poisson, bursty) go to the ready pods in turn: with n ready pods each gets every
n-th request. Closed-loop users are spread evenly over the ready pods and keep their pod (a
kept-alive connection) while the set of ready pods stays the same. When it changes: a
request held by a pod that went is lost, and its user sends a new one at once; the users of
that pod go to pods with room; a pod over its even share hands its last users to one under it
-- their request in flight finishes where it is and their next one goes to the new pod, no
earlier than that pod's clock (pods are simulated one after the other up to each step's end,
so a handed-over user's next request may arrive up to one step later than it would have; this
happens only at a change of the ready set).

It counts what every pod was handed and what finished while fewer pods were ready than the
Deployment wants (``short``: the load of ``full`` pods on fewer). Virtual time; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from latency_tuner.convergence.measure import Pod
from latency_tuner.convergence.world import Load
from latency_tuner.simulator.engine import RequestRecord


class Service:
    """Splits ``load`` (``users`` closed-loop users, or open arrivals) over the ready pods."""

    def __init__(self, load: Load, *, users: int, full: int) -> None:
        self.load = load
        self.users = users if load.closed else 0
        self.full = full  # pods the Deployments want ready together
        self.pods: list[Pod] = []
        self.handed: dict[str, int] = {}  # requests handed to each pod, by pod name
        self.finished = 0
        self.short = 0  # finished while fewer than ``full`` pods were ready
        self.dropped = 0  # open arrivals while no pod was ready
        self._turn = 0
        self._assigned: dict[int, Pod | None] = dict.fromkeys(range(self.users))
        self._in_flight: dict[tuple[str, str], int] = {}  # (pod, request id) -> user

    def set_ready(self, pods: Sequence[Pod], at: float) -> None:
        """The ready pods from ``at`` on (every pod has been simulated up to ``at``)."""
        gone = [p for p in self.pods if p not in pods]
        for pod in gone:
            pod.serving = False
        names = {p.name for p in gone}
        self._in_flight = {k: u for k, u in self._in_flight.items() if k[0] not in names}
        for pod in pods:
            if pod not in self.pods:
                pod.engine.on_finish = self._finisher(pod)
        self.pods = list(pods)
        if self.load.closed:
            self._rebalance(gone, at)

    def users_per_pod(self) -> dict[str, int]:
        """Closed loop: how many users each ready pod has now."""
        counts = {p.name: 0 for p in self.pods}
        for pod in self._assigned.values():
            if pod is not None and pod.name in counts:
                counts[pod.name] += 1
        return counts

    def _rebalance(self, gone: Sequence[Pod], at: float) -> None:
        n = len(self.pods)
        waiting = sorted(u for u, p in self._assigned.items() if p is None or p in gone)
        for u in waiting:
            self._assigned[u] = None
        if n == 0:
            return
        share = {p.name: self.users // n + (1 if i < self.users % n else 0)
                 for i, p in enumerate(self.pods)}  # fmt: skip
        by_pod: dict[str, list[int]] = {p.name: [] for p in self.pods}
        for u, p in sorted(self._assigned.items()):
            if p is not None:
                by_pod[p.name].append(u)
        moving = []
        for name, users in by_pod.items():
            moving += users[share[name] :]  # the last users of a pod over its share
            by_pod[name] = users[: share[name]]
        for u in sorted(waiting + moving):
            pod = next(p for p in self.pods if len(by_pod[p.name]) < share[p.name])
            by_pod[pod.name].append(u)
            self._assigned[u] = pod
        busy = set(self._in_flight.values())
        for u in range(self.users):  # nothing in flight (lost with its pod, or gave up): send
            if u not in busy:
                self._send(u, at)

    def _send(self, user: int, at: float) -> None:
        pod = self._assigned[user]
        if pod is None:
            return
        at = max(at, pod.engine.clock.now())
        self.handed[pod.name] = self.handed.get(pod.name, 0) + 1
        rid = pod.accept(self.load.request(at))
        if rid is not None:
            self._in_flight[(pod.name, rid)] = user
        # else: every request of this user was too long for that pod; it waits for a change

    def _finisher(self, pod: Pod) -> Callable[[RequestRecord], None]:
        def finished(record: RequestRecord) -> None:
            self.finished += 1
            if len(self.pods) < self.full:
                self.short += 1
            user = self._in_flight.pop((pod.name, record.request_id), None)
            if user is not None:
                self._send(user, record.finish + self.load.think())

        return finished

    def run_until(self, t: float) -> None:
        """Hand out the open arrivals before ``t`` in turn, then serve until ``t``."""
        if not self.load.closed:
            for request in self.load.arrivals_until(t):
                if not self.pods:
                    self.dropped += 1
                    continue
                pod = self.pods[self._turn % len(self.pods)]
                self._turn += 1
                self.handed[pod.name] = self.handed.get(pod.name, 0) + 1
                pod.accept(request)
        for pod in self.pods:
            pod.run_until(t)
