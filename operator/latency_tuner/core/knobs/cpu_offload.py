"""``--cpu-offload-gb``: weights kept in CPU memory, streamed to the GPU on every step.

Its presence (a value above 0) is a deployment problem, not a setting to tune: every decode
step copies the offloaded gigabytes over PCIe (>= 15.6 ms per GB on PCIe Gen5, vs about 0.4 ms
from HBM). The change removes the flag. It is "safe": if the model does not fit without it, the
rollout fails to start, is rolled back at its progress deadline and the value is marked
incompatible, while the old pod keeps serving (a Deployment keeps it until the new one is
ready). This module never picks another offload size. Pure.
"""

from __future__ import annotations

from latency_tuner.api.durations import format_duration
from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Evidence, Finding
from latency_tuner.core.knobs.base import Detected, FixKnob, KnobClass, KnobName

PCIE_GEN5_MS_PER_GB = 15.6  # ms to stream one GB of weights over PCIe Gen5, per step
HBM_MS_PER_GB = 0.4  # the same read from HBM


class CpuOffload(FixKnob):
    name = KnobName.CPU_OFFLOAD
    flag = "cpu-offload-gb"
    knob_class = KnobClass.SAFE
    what = "stop offloading weights to CPU memory"

    def effective(self, cv: ConfigView) -> str:
        return f"{cv.cpu_offload_gb:g}"

    def detect(self, cv: ConfigView) -> Detected | None:
        gb = cv.cpu_offload_gb
        if gb <= 0:
            return None
        return Detected(
            Finding.CPU_OFFLOAD,
            Evidence(
                "cpu_offload_gb",
                gb,
                f"--cpu-offload-gb {gb:g}: every step streams {gb:g} GB of weights over PCIe "
                f"(>= {format_duration(gb * PCIE_GEN5_MS_PER_GB / 1000)} per step on PCIe "
                f"Gen5, vs ~{format_duration(gb * HBM_MS_PER_GB / 1000)} from HBM)",
                0.0,
                ">",
                "GB",
            ),
            advice=(
                "if the model does not fit without --cpu-offload-gb, serve a quantized variant "
                "or spread it over more GPUs (tensor parallelism) instead of offloading",
            ),
            advice_when_met="removing --cpu-offload-gb would speed up every step",
        )


KNOB = CpuOffload()
