"""What a user is told about readings and defaults they cannot see: a target judged on a quantile
inside its histogram's lowest bucket is flagged (diagnosis evidence, MetricsAvailable message),
and the diagnosis says which vLLM default applies to the flags it would tune, and why."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from tests.unit.core.builders import command_line, healthy, knobs, objectives, queueing

from latency_tuner.api.spec import LatencyTargetSpec
from latency_tuner.api.status import LatencyTargetStatus
from latency_tuner.core.diagnosis import diagnose
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.hardware import HardwareInfo
from latency_tuner.core.rollout.guards import metrics_condition
from latency_tuner.core.rollout.state import Round
from latency_tuner.core.signals import lowest_bucket_warning
from latency_tuner.vllm.defaults import VllmVersion

H100 = HardwareInfo.from_labels("NVIDIA-H100-80GB-HBM3", gpus_per_node=8)
B200 = HardwareInfo.from_labels("NVIDIA-B200", gpus_per_node=8)
# Real vLLM's ITL histogram starts at 10 ms: these ITL quantiles are interpolations.
COARSE_ITL = {"itl_p50": 0.01, "itl_p90": 0.01}


def test_a_target_on_a_quantile_inside_the_lowest_bucket_gets_a_warning() -> None:
    obs = healthy(itl={50: 0.005, 90: 0.009, 99: 0.03}, lowest_bucket_quantiles=COARSE_ITL)
    warning = lowest_bucket_warning(obs, objectives(itl="5ms", percentile=90))
    assert warning is not None
    assert "itl p90 under 10ms" in warning
    assert "itl p50" not in warning  # not the target's percentile
    assert "interpolated" in warning


def test_no_warning_when_the_coarse_quantile_belongs_to_a_metric_without_a_target() -> None:
    obs = healthy(lowest_bucket_quantiles=COARSE_ITL)
    assert lowest_bucket_warning(obs, objectives(ttft="500ms")) is None
    assert lowest_bucket_warning(obs, objectives(itl="50ms", percentile=99)) is None
    assert lowest_bucket_warning(obs, objectives(itl="50ms", percentile=99), any_percentile=True)


def test_the_diagnosis_warns_when_it_rests_on_an_interpolated_quantile() -> None:
    obs = healthy(itl={50: 0.005, 90: 0.009, 99: 0.03}, lowest_bucket_quantiles=COARSE_ITL)
    d = diagnose(obs, objectives(itl="2ms"), command_line(), H100, knobs())
    (warning,) = [e for e in d.evidence if e.signal == "lowest_bucket_quantiles"]
    assert warning.text.startswith("warning: ")
    assert "itl p50 under 10ms" in warning.text
    plain = diagnose(healthy(), objectives(itl="2ms"), command_line(), H100, knobs())
    assert not [e for e in plain.evidence if e.signal == "lowest_bucket_quantiles"]


def _measured_message(window: object, objective_spec: Mapping[str, object]) -> str:
    spec = LatencyTargetSpec.model_validate(
        {"targetRef": {"name": "llama"}, "objectives": objective_spec}
    )
    r = Round(spec, 1, LatencyTargetStatus(), datetime(2026, 12, 2, tzinfo=UTC))
    metrics_condition(r, window)  # type: ignore[arg-type]
    (condition,) = [c for c in r.status.conditions if c.type == "MetricsAvailable"]
    assert (condition.status, condition.reason) == ("True", "Measured")
    return condition.message


def test_the_metrics_condition_message_warns_about_a_target_on_the_lowest_bucket() -> None:
    obs = healthy(lowest_bucket_quantiles=COARSE_ITL)
    itl_p90 = {"itl": {"percentile": 90, "threshold": "5ms"}}
    message = _measured_message(obs, itl_p90)
    assert message.startswith("600 requests in the last 5m")
    assert "warning: itl p90 under 10ms" in message
    ttft_p90 = {"ttft": {"percentile": 90, "threshold": "500ms"}}
    assert "warning" not in _measured_message(obs, ttft_p90)


def _default_texts(hardware: HardwareInfo, version: VllmVersion | None) -> dict[str, str]:
    d = diagnose(
        queueing(),
        objectives(ttft="500ms"),
        command_line("--max-num-seqs", "256"),
        hardware,
        knobs(maxNumSeqs={"min": 16, "max": 1024}),
        version=version,
    )
    assert d.bottleneck is Bottleneck.QUEUEING
    return {e.signal: e.text for e in d.evidence if e.signal.startswith("default_")}


def test_the_diagnosis_says_which_default_batch_budget_applies_by_gpu_size_and_release() -> None:
    on_h100 = _default_texts(H100, VllmVersion(0, 32, 0))
    assert "max-num-batched-tokens=8192" in on_h100["default_max_num_batched_tokens"]
    assert "vLLM 0.32.0 on H100-SXM (80 GiB)" in on_h100["default_max_num_batched_tokens"]
    assert "default_max_num_seqs" not in on_h100  # written on the command line
    b200_new = _default_texts(B200, VllmVersion(0, 28, 0))["default_max_num_batched_tokens"]
    b200_old = _default_texts(B200, VllmVersion(0, 27, 0))["default_max_num_batched_tokens"]
    assert "max-num-batched-tokens=16384" in b200_new
    assert "0.28.0" in b200_new
    assert "max-num-batched-tokens=8192" in b200_old
    unknown = _default_texts(H100, None)["default_max_num_batched_tokens"]
    assert "vLLM version unknown" in unknown
