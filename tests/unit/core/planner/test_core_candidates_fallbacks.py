"""What the planner falls back on when a bottleneck's first knobs are unavailable: prefix
caching for any TTFT breach with long prompts, other ways to shorten a stalled step against
prefill interference, and a batch budget sized from the prompt length rather than one rung (for
a missed target, and for margin on a met one)."""

from __future__ import annotations

from tests.unit.core.builders import (
    H100,
    command_line,
    interference,
    knobs,
    kv_pressure,
    objectives,
    queueing,
)

from latency_tuner.core.candidates import rank
from latency_tuner.core.config_view import view
from latency_tuner.core.diagnosis import diagnose, margins
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import Change, KnobClass, KnobName
from latency_tuner.core.planner import Exhausted, plan

ITL = objectives(itl="50ms")
TTFT = objectives(ttft="500ms")
NO_PREFIX = command_line("--no-enable-prefix-caching")
FP8 = {"variants": [{"name": "fp8", "model": "org/model-FP8"}]}


def test_kv_pressure_with_long_prompts_and_prefix_caching_off_turns_prefix_caching_on_first() -> (
    None
):
    window = kv_pressure(prompt_tokens_mean=3000.0)
    spec = knobs()
    d = diagnose(window, TTFT, NO_PREFIX, H100, spec)
    assert d.bottleneck is Bottleneck.KV_CACHE_PRESSURE
    change = plan(d, window, NO_PREFIX, spec, H100)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.PREFIX_CACHING, "true")
    assert "long prompts (3000 tokens)" in change.reason


def test_queueing_with_long_prompts_and_prefix_caching_off_turns_prefix_caching_on_first() -> None:
    window = queueing(prompt_tokens_mean=2000.0)
    spec = knobs()
    d = diagnose(window, TTFT, NO_PREFIX, H100, spec)
    assert d.bottleneck is Bottleneck.QUEUEING
    change = plan(d, window, NO_PREFIX, spec, H100)
    assert isinstance(change, Change)
    assert change.knob is KnobName.PREFIX_CACHING


def test_short_prompts_leave_kv_pressure_to_its_own_knobs() -> None:
    window = kv_pressure()  # 500-token prompts
    spec = knobs()
    d = diagnose(window, TTFT, NO_PREFIX, H100, spec)
    change = plan(d, window, NO_PREFIX, spec, H100)
    assert isinstance(change, Change)
    assert change.knob is not KnobName.PREFIX_CACHING


def test_interference_without_budget_or_chunking_knobs_tries_a_quantized_variant() -> None:
    # Chunked prefill is on (vLLM's default) and the budget is not the operator's to change.
    spec = knobs(max_num_batched_tokens=None, quantization=FP8, tensor_parallel={"maxSize": 4})
    window = interference()
    d = diagnose(window, ITL, command_line(), H100, spec)
    assert d.bottleneck is Bottleneck.PREFILL_INTERFERENCE
    change = plan(d, window, command_line(), spec, H100)
    assert isinstance(change, Change)
    assert (change.knob, change.knob_class) == (KnobName.QUANTIZATION, KnobClass.LOSSY)
    assert d.knobs == (KnobName.QUANTIZATION, KnobName.TENSOR_PARALLEL)


def test_interference_at_the_lowest_budget_tries_a_larger_one_as_a_last_safe_resort() -> None:
    cl = command_line("--max-num-batched-tokens", "2048")
    spec = knobs(max_num_batched_tokens={"min": 2048, "max": 16384})
    window = interference()
    d = diagnose(window, ITL, cl, H100, spec)
    change = plan(d, window, cl, spec, H100)
    assert isinstance(change, Change)
    # 4000-token prompts: 4096 holds one in a single chunk (one stalled step, not two).
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "4096")
    assert "maxNumBatchedTokens is at its lower bound" in " ".join(d.blocked)
    longer = interference(prompt_tokens_mean=8000.0)
    d = diagnose(longer, ITL, cl, H100, spec)
    change = plan(d, longer, cl, spec, H100)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "8192")
    assert "prefills a mean prompt in one step" in change.reason


def test_a_budget_above_the_prompt_length_jumps_to_a_rung_sized_from_the_itl_target() -> None:
    # 2500-token prompts, ITL p99 1.9x over: 16384 and 8192 both prefill a prompt in one step;
    # chunks of 2500 / 1.9 = 1316 tokens would meet it -> the 1024 rung.
    cl = command_line("--max-num-batched-tokens", "16384")
    spec = knobs(max_num_batched_tokens={"min": 1024, "max": 16384})
    window = interference(prompt_tokens_mean=2500.0, itl={50: 0.03, 90: 0.06, 99: 0.095})
    goal = objectives(itl="50ms", percentile=99)
    d = diagnose(window, goal, cl, H100, spec)
    change = plan(d, window, cl, spec, H100)
    assert isinstance(change, Change)
    assert (change.knob, change.to_value) == (KnobName.MAX_NUM_BATCHED_TOKENS, "1024")


def test_a_small_miss_with_a_budget_below_the_prompt_steps_one_rung() -> None:
    cl = command_line("--max-num-batched-tokens", "2048")
    window = interference(itl={50: 0.025, 90: 0.055, 99: 0.15})  # 10% over at p90
    spec = knobs()
    d = diagnose(window, ITL, cl, H100, spec)
    change = plan(d, window, cl, spec, H100)
    assert isinstance(change, Change)
    # Either way one rung: the calibrated model expects neither 1024 (prefill steps then pass
    # 10% of the tokens, +1% at p90) nor 4096 (the uncached half of a prompt fits 2048
    # already) to lower the p90 reading, so the knob's priors decide between them.
    assert change.knob is KnobName.MAX_NUM_BATCHED_TOKENS
    assert change.to_value in {"1024", "4096"}


def test_without_chunking_the_budget_is_not_offered_against_interference_either_way() -> None:
    cl = command_line("--no-enable-chunked-prefill", "--max-num-batched-tokens", "8192")
    spec = knobs(chunked_prefill=False)
    window = interference()
    d = diagnose(window, ITL, cl, H100, spec)
    result = plan(d, window, cl, spec, H100)
    assert isinstance(result, Exhausted)


def _margin_budgets(prompt_tokens: float, budget: str) -> list[str | None]:
    """The lower batch budgets offered for margin on a met ITL target with prefill interference."""
    cl = command_line("--max-num-batched-tokens", budget)
    spec = knobs(max_num_batched_tokens={"min": 512, "max": 16384})
    window = interference(prompt_tokens_mean=prompt_tokens, itl={50: 0.008, 90: 0.03, 99: 0.045})
    goal = objectives(itl="50ms", percentile=99)
    causes = margins(window, goal, cl, H100)
    assert [c.bottleneck for c in causes] == [Bottleneck.PREFILL_INTERFERENCE]
    ranking = rank(
        causes, (), cl=cl, view=view(cl, H100, None), knobs=spec, hardware=H100, observation=window
    )
    budgets = ranking.candidates
    return [
        c.to_value for c in budgets if c.knob is KnobName.MAX_NUM_BATCHED_TOKENS and c.direction < 0
    ]


def test_for_margin_a_budget_above_the_prompt_goes_to_the_first_rung_that_shrinks_a_chunk() -> None:
    # 1,200-token prompts: 4096 and 2048 still prefill a prompt in one 1,200-token chunk, so
    # one rung down from 8192 would change nothing; 1024 is the first budget that shrinks it
    # (the calibrated model then says whether that is worth a rollout).
    assert _margin_budgets(1200.0, "8192") == ["1024"]
    # Below the prompt length every rung shrinks a chunk: one rung down.
    assert _margin_budgets(4000.0, "2048") == ["1024"]
