"""``--enforce-eager``: CUDA graphs off, every decode step pays kernel-launch overhead.

Its presence is a deployment problem (often left over from debugging); the change removes the
flag, which turns CUDA graphs back on. Felt most in short decode steps (small models, low
concurrency). This module never adds the flag. Pure.
"""

from __future__ import annotations

from latency_tuner.core.config_view import ConfigView
from latency_tuner.core.evidence import Evidence, Finding
from latency_tuner.core.knobs.base import (
    Detected,
    FixKnob,
    KnobClass,
    KnobName,
    boolean_written,
)
from latency_tuner.vllm.args import VllmCommandLine


class EnforceEager(FixKnob):
    name = KnobName.ENFORCE_EAGER
    flag = "enforce-eager"
    knob_class = KnobClass.SAFE
    what = "turn CUDA graphs back on (remove --enforce-eager)"

    def written(self, cl: VllmCommandLine) -> str | None:
        return boolean_written(cl, self.flag)

    def effective(self, cv: ConfigView) -> str:
        return str(cv.enforce_eager).lower()

    def detect(self, cv: ConfigView) -> Detected | None:
        if not cv.enforce_eager:
            return None
        return Detected(
            Finding.EAGER_MODE,
            Evidence(
                "enforce_eager",
                1.0,
                "--enforce-eager: CUDA graphs are off, every decode step pays "
                "kernel-launch overhead",
            ),
            advice_when_met="removing --enforce-eager would speed up decoding",
        )


KNOB = EnforceEager()
