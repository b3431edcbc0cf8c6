"""A flag real vLLM refuses ends its start with the reason in hand: what a rollout of such a
change would meet (the pod exits; its log names the flag)."""

from __future__ import annotations

from pathlib import Path

import pytest

from latency_tuner.realengine.server import VllmServer, VllmStartFailed

pytestmark = pytest.mark.realengine


def test_an_argument_vllm_does_not_know_fails_the_start_and_the_log_names_it(
    vllm_py: Path, tiny_model: Path
) -> None:
    server = VllmServer(vllm_py, tiny_model, ["-O0", "--max-num-seqz", "4"], start_timeout=240)
    assert "--max-num-seqz" in server.command()
    with pytest.raises(VllmStartFailed) as failed:
        server.start()
    # (the "4" is taken as the positional model_tag, which 0.32's api_server parser also has)
    assert "error: unrecognized arguments: --max-num-seqz" in failed.value.log_tail
    assert server.startup_seconds is None
