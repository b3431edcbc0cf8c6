from __future__ import annotations

from latency_tuner.simulator.scheduler import Request, Scheduler, SchedulerOutput


def scheduler(**overrides: int | bool | float) -> Scheduler:
    knobs: dict[str, int | bool | float] = dict(
        num_gpu_blocks=1000,
        max_num_seqs=16,
        max_num_batched_tokens=64,
        max_model_len=4096,
        chunked_prefill=True,
        prefix_caching=True,
    )
    knobs.update(overrides)
    return Scheduler(**knobs)  # type: ignore[arg-type]


def add(s: Scheduler, rid: str, prompt: int, max_tokens: int = 100, base: int = 0) -> Request:
    req = Request(rid, [base + i for i in range(prompt)], max_tokens, 0.0)
    s.add_request(req)
    return req


def step(s: Scheduler, now: float = 0.0) -> SchedulerOutput:
    out = s.schedule(now)
    s.update_from_output(out, now + 0.01)
    return out


def test_running_decodes_are_scheduled_before_a_new_prefill_chunk() -> None:
    s = scheduler(max_num_batched_tokens=64)
    add(s, "a", 10, base=0)
    add(s, "b", 10, base=100)
    step(s)  # both prefilled, first tokens out
    add(s, "c", 500, base=1000)
    out = s.schedule(1.0)
    assert [(x.request.request_id, x.num_tokens) for x in out.scheduled] == [
        ("a", 1),
        ("b", 1),
        ("c", 62),
    ]


def test_no_step_exceeds_the_token_budget_and_long_prompts_are_chunked() -> None:
    s = scheduler(max_num_batched_tokens=100)
    for i in range(6):
        add(s, f"r{i}", 250, max_tokens=5, base=1000 * i)
    steps = 0
    while s.has_unfinished:
        out = step(s, steps * 0.01)
        assert 0 < out.total_tokens <= 100
        assert all(x.num_tokens <= 100 for x in out.scheduled)
        steps += 1
    assert steps >= 6 * 250 // 100


def test_at_most_max_num_seqs_requests_run_at_once() -> None:
    s = scheduler(max_num_seqs=2, max_num_batched_tokens=1000)
    for i in range(5):
        add(s, f"r{i}", 20, max_tokens=3, base=100 * i)
    seen = 0
    while s.has_unfinished:
        out = step(s)
        assert s.num_running <= 2
        assert len(out.scheduled) <= 2
        seen = max(seen, len(out.scheduled))
    assert seen == 2


def test_without_chunked_prefill_a_prompt_is_scheduled_whole_or_not_at_all() -> None:
    s = scheduler(chunked_prefill=False, max_num_batched_tokens=300)
    add(s, "a", 10, base=0)
    step(s)
    add(s, "big", 299, base=500)
    out = s.schedule(1.0)
    # 1 token for the decode leaves 299: the whole prompt goes in this one step.
    assert [(x.request.request_id, x.num_tokens) for x in out.scheduled] == [("a", 1), ("big", 299)]
    s.update_from_output(out, 1.1)
    add(s, "too-big", 300, base=5000)
    out = s.schedule(2.0)
    # Two decodes take 2 tokens: 300 no longer fits, and it is not split.
    assert [x.request.request_id for x in out.scheduled] == ["a", "big"]


def test_without_chunked_prefill_a_shorter_prompt_may_pass_one_that_does_not_fit() -> None:
    s = scheduler(chunked_prefill=False, max_num_batched_tokens=300)
    add(s, "a", 10, base=0)
    step(s)
    add(s, "long", 300, base=500)
    add(s, "short", 50, base=5000)
    out = s.schedule(1.0)
    assert [x.request.request_id for x in out.scheduled] == ["a", "short"]
    assert [r.request_id for r in s.waiting] == ["long"]


def test_with_chunked_prefill_the_same_prompt_is_split_across_steps() -> None:
    s = scheduler(chunked_prefill=True, max_num_batched_tokens=300)
    add(s, "a", 10, base=0)
    step(s)
    add(s, "big", 700, base=500)
    chunks = []
    for t in range(3):
        out = step(s, float(t))
        chunks += [x.num_tokens for x in out.scheduled if x.request.request_id == "big"]
    assert chunks == [299, 299, 102]


def test_the_newest_running_request_is_preempted_when_blocks_run_out() -> None:
    # 1 null + 8 usable blocks of 16 tokens = 128 token slots.
    s = scheduler(num_gpu_blocks=9, max_num_batched_tokens=512, prefix_caching=False)
    old = add(s, "old", 40, max_tokens=60, base=0)
    new = add(s, "new", 40, max_tokens=60, base=1000)
    t = 0.0
    while s.has_unfinished:
        step(s, t)
        t += 0.01
        assert t < 100
    assert s.num_preemptions >= 1
    assert new.num_preemptions >= 1
    assert old.num_preemptions == 0
    assert old.num_output_tokens == new.num_output_tokens == 60


def test_a_preempted_request_recomputes_its_prompt_and_output_so_far() -> None:
    s = scheduler(num_gpu_blocks=6, max_num_batched_tokens=512, prefix_caching=False)
    add(s, "old", 30, max_tokens=40, base=0)
    new = add(s, "new", 30, max_tokens=40, base=1000)
    recomputed = []
    t = 0.0
    while s.has_unfinished:
        out = s.schedule(t)
        recomputed += [
            x.num_tokens for x in out.scheduled if x.request is new and new.num_preemptions
        ]
        s.update_from_output(out, t + 0.01)
        t += 0.01
    assert max(recomputed) > 30  # prompt + tokens generated before the preemption


def test_prefix_cache_hits_for_a_shared_prefix_only_when_enabled() -> None:
    for enabled, expected in ((True, 64), (False, 0)):
        s = scheduler(prefix_caching=enabled, max_num_batched_tokens=1000)
        add(s, "a", 100, max_tokens=2, base=0)
        step(s)
        b = Request("b", [*range(70), *range(5000, 5030)], 2, 0.0)
        s.add_request(b)
        step(s)
        assert b.num_cached_tokens == expected
        assert s.kv.stats.hits == expected


def test_speculative_decoding_emits_more_tokens_per_step_at_batch_one() -> None:
    def tokens_per_step(k: int, rate: float) -> float:
        s = scheduler(max_num_batched_tokens=512, num_spec_tokens=k, acceptance_rate=rate, seed=1)
        req = add(s, "a", 20, max_tokens=2000)
        steps = 0
        while s.has_unfinished:
            step(s)
            steps += 1
        assert req.num_output_tokens == 2000
        return 2000 / steps

    expected = (1 - 0.7**4) / (1 - 0.7)  # E = (1 - a^(k+1)) / (1 - a)
    assert tokens_per_step(0, 0.0) == 1.0
    assert abs(tokens_per_step(3, 0.7) - expected) < 0.15


def test_an_aborted_request_frees_its_blocks_and_leaves_the_queues() -> None:
    s = scheduler()
    add(s, "a", 50)
    step(s)
    assert s.kv.usage > 0
    s.abort("a")
    assert not s.has_unfinished
    assert s.kv.usage == 0.0
