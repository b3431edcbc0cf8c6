"""Time of one tensor-parallel all-reduce: a start-up latency plus the ring's bytes over the
slowest link in the ring.

A ring all-reduce of S bytes over n GPUs moves 2(n-1)/n x S bytes through every GPU's link
(reduce-scatter then all-gather). The ring is as fast as its slowest edge:
- inside the GPU's link domain (NVLink on an SXM board, an NVLink bridge pair): the link itself;
- over PCIe, GPUs sit ``gpus_per_switch`` to a PCIe switch: an edge inside a switch is direct
  peer-to-peer at the PCIe link's rate; an edge between switches of one CPU socket goes through
  the root complex, staged in host memory (NCCL's SHM path), and all such edges of the ring
  share the socket's host path; an edge between sockets also crosses the CPU interconnect, and
  the ring's two such edges share it.
So over PCIe TP2 runs at link speed, TP4 at a fraction, TP8 (two sockets) at a smaller one: a
33.5 MB prefill message costs ~1.7 ms at TP2 but ~40 ms at TP8 on L40S, while a 16 KB decode
message stays latency-bound (tens of microseconds) whatever the TP.

Pure arithmetic: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from latency_tuner.hardware import GpuSpec

__all__ = ["CollectiveModel", "allreduce_seconds"]


@dataclass(frozen=True)
class CollectiveModel:
    """Achieved fractions and latencies of NCCL-style collectives (custom all-reduce on NVLink)."""

    nvlink_latency_s: float = 6e-6  # custom all-reduce launch + barrier, small message
    nvlink_latency_per_gpu_s: float = 1e-6
    nvlink_bw: float = 0.70  # achieved bus bandwidth / link peak
    pcie_latency_s: float = 10e-6  # NCCL LL protocol over PCIe, small message
    pcie_latency_per_gpu_s: float = 1e-6
    pcie_p2p_bw: float = 0.62  # peer-to-peer through one PCIe switch: ~20 of 32 GB/s on Gen4
    host_staged_bw: float = 0.22  # one socket's root complex via host memory: ~7 GB/s on Gen4
    cross_socket_bw: float = 0.094  # through the CPU interconnect as well: ~3 GB/s on Gen4
    gpus_per_switch: int = 2
    gpus_per_socket: int = 4


def _ring_bandwidth(gpu: GpuSpec, tp: int, m: CollectiveModel) -> float:
    """Bytes/s of the ring's slowest edge."""
    if gpu.link == "NVLink" and tp <= gpu.link_domain:
        return gpu.link_gb_s * 1e9 * m.nvlink_bw
    pcie = gpu.pcie_gb_s * 1e9
    # Groups of GPUs joined without the host: NVLink-bridged sets, else GPUs under one switch.
    group = gpu.link_domain if gpu.link == "NVLink" else m.gpus_per_switch
    inside = gpu.link_gb_s * 1e9 * m.nvlink_bw if gpu.link == "NVLink" else pcie * m.pcie_p2p_bw
    if tp <= group:
        return inside
    groups = -(-tp // group)
    if tp <= m.gpus_per_socket:
        # Every group boundary of the ring is an edge through this socket's root complex.
        return min(inside, pcie * m.host_staged_bw / groups)
    sockets = -(-tp // m.gpus_per_socket)
    groups_per_socket = -(-groups // sockets)
    # Two ring edges cross between sockets; the others between groups stay on one socket.
    on_socket = pcie * m.host_staged_bw / max(1, groups_per_socket - 1)
    return min(inside, on_socket, pcie * m.cross_socket_bw / 2)


def allreduce_seconds(
    message_bytes: float, tp: int, gpu: GpuSpec, model: CollectiveModel | None = None
) -> float:
    """One all-reduce of ``message_bytes`` (per GPU) across ``tp`` GPUs of type ``gpu``."""
    if tp <= 1:
        return 0.0
    m = model or CollectiveModel()
    ring_bytes = message_bytes * 2.0 * (tp - 1) / tp
    if gpu.link == "NVLink" and tp <= gpu.link_domain:
        latency = m.nvlink_latency_s + m.nvlink_latency_per_gpu_s * tp
    else:
        latency = m.pcie_latency_s + m.pcie_latency_per_gpu_s * tp
    return latency + ring_bytes / _ring_bandwidth(gpu, tp, m)
