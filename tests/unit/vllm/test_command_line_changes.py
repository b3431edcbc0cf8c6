"""Changing one flag of a vLLM command line and rendering it back in its original shape."""

import pytest

from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_replacing_a_value_keeps_every_other_token() -> None:
    args = [MODEL, "--max-num-seqs", "256", "--port", "8000"]
    line = VllmCommandLine.parse(None, args).with_value("max-num-seqs", "64")
    assert line.render() == (None, [MODEL, "--max-num-seqs", "64", "--port", "8000"])


def test_a_flag_written_with_equals_keeps_its_spelling() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--max_num_batched_tokens=8192"])
    assert line.with_value("max-num-batched-tokens", "2048").render() == (
        None,
        [MODEL, "--max_num_batched_tokens=2048"],
    )


def test_an_underscore_flag_keeps_its_underscores_when_its_value_changes() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--max_num_seqs", "8"])
    assert line.with_value("max-num-seqs", "16").render() == (None, [MODEL, "--max_num_seqs", "16"])


def test_an_alias_keeps_its_form_when_its_value_changes() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "-tp", "1", "-O3"])
    changed = line.with_value("tensor-parallel-size", "2").with_value("optimization-level", "0")
    assert changed.render() == (None, [MODEL, "-tp", "2", "-O0"])


def test_a_new_flag_is_appended_to_args_after_everything_else() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", MODEL], ["--port", "8000"])
    assert line.with_value("max-num-batched-tokens", "2048").render() == (
        ["vllm", "serve", MODEL],
        ["--port", "8000", "--max-num-batched-tokens", "2048"],
    )


def test_a_new_flag_goes_to_the_command_when_there_are_no_args() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", MODEL], None)
    assert line.with_value("max-num-seqs", "8").render() == (
        ["vllm", "serve", MODEL, "--max-num-seqs", "8"],
        None,
    )


def test_a_new_flag_goes_to_empty_args_when_args_exist() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", MODEL], [])
    assert line.with_value("max-num-seqs", "8").render() == (
        ["vllm", "serve", MODEL],
        ["--max-num-seqs", "8"],
    )


def test_a_value_that_looks_like_a_flag_is_written_with_equals() -> None:
    line = VllmCommandLine.parse(None, [MODEL])
    changed = line.with_value("chat-template-content-format", "-x")
    assert changed.render() == (None, [MODEL, "--chat-template-content-format=-x"])
    assert changed.get("chat-template-content-format") == "-x"


def test_setting_a_value_on_a_bare_flag_adds_the_value_after_it() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--hf-token", "--port", "1"])
    assert line.with_value("hf-token", "abc").render() == (
        None,
        [MODEL, "--hf-token", "abc", "--port", "1"],
    )


def test_setting_a_flag_like_value_on_a_bare_flag_uses_equals() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--seed"])
    assert line.with_value("seed", "-x").render() == (None, [MODEL, "--seed=-x"])


def test_replacing_a_multi_value_flag_leaves_one_value() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--served-model-name", "a", "b", "--port", "1"])
    assert line.with_value("served-model-name", "c").render() == (
        None,
        [MODEL, "--served-model-name", "c", "--port", "1"],
    )


@pytest.mark.parametrize(
    ("before", "enabled", "after"),
    [
        (["--enable-chunked-prefill"], False, ["--no-enable-chunked-prefill"]),
        (["--no-enable-chunked-prefill"], True, ["--enable-chunked-prefill"]),
        (["--enable-chunked-prefill=false"], True, ["--enable-chunked-prefill"]),
        (["--enable-chunked-prefill", "True"], False, ["--no-enable-chunked-prefill"]),
        ([], False, ["--no-enable-chunked-prefill"]),
        (["--enable-chunked-prefill"], True, ["--enable-chunked-prefill"]),
    ],
)
def test_with_flag_writes_the_plain_or_no_form(
    before: list[str], enabled: bool, after: list[str]
) -> None:
    line = VllmCommandLine.parse(None, [MODEL, *before, "--port", "1"])
    changed = line.with_flag("enable-chunked-prefill", enabled)
    expected = after if before else []
    tail = [] if before else after
    assert changed.render() == (None, [MODEL, *expected, "--port", "1", *tail])
    assert changed.flag_enabled("enable-chunked-prefill") is enabled


def test_without_removes_the_flag_and_its_value() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--cpu-offload-gb", "10", "--port", "1"])
    assert line.without("cpu-offload-gb").render() == (None, [MODEL, "--port", "1"])


def test_without_removes_every_occurrence_and_the_no_form() -> None:
    args = [MODEL, "--enable-prefix-caching", "--no-enable-prefix-caching", "--port", "1"]
    line = VllmCommandLine.parse(None, args).without("enable-prefix-caching")
    assert line.render() == (None, [MODEL, "--port", "1"])
    assert line.flag_enabled("enable-prefix-caching") is None


def test_without_an_absent_flag_changes_nothing() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--port", "1"])
    assert line.without("cpu-offload-gb").render() == (None, [MODEL, "--port", "1"])


def test_the_model_cannot_be_removed() -> None:
    with pytest.raises(ValueError, match="model"):
        VllmCommandLine.parse(None, [MODEL]).without("model")


def test_changes_return_new_objects_and_leave_the_original_alone() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--max-num-seqs", "1"])
    line.with_value("max-num-seqs", "2")
    assert line.get("max-num-seqs") == "1"


def test_with_model_rewrites_the_positional_model_in_place() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--port", "1"])
    changed = line.with_value("model", "org/awq-model")
    assert changed.render() == (None, ["org/awq-model", "--port", "1"])
    assert changed.model == "org/awq-model"


def test_with_model_rewrites_the_model_flag_in_its_form() -> None:
    line = VllmCommandLine.parse(
        ["python3", "-m", "vllm.entrypoints.openai.api_server"], ["--model=/mnt/models"]
    )
    assert line.with_model("/mnt/other").render()[1] == ["--model=/mnt/other"]


def test_with_model_adds_a_positional_model_first_when_there_is_none() -> None:
    line = VllmCommandLine.parse(["vllm", "serve"], ["--config", "c.yaml"])
    assert line.with_model("m").render() == (["vllm", "serve"], ["m", "--config", "c.yaml"])


def test_with_model_adds_the_model_flag_for_the_old_api_server() -> None:
    line = VllmCommandLine.parse(["python3", "-m", "vllm.entrypoints.openai.api_server"], [])
    assert line.with_model("m").render()[1] == ["--model", "m"]


def test_new_tokens_stay_next_to_the_flag_they_follow_after_a_removal() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", "--hf-token"], ["--port", "1"])
    changed = line.with_value("hf-token", "t").without("port")
    assert changed.render() == (["vllm", "serve", "--hf-token", "t"], [])


def test_a_value_set_on_a_bare_boolean_is_written_with_equals() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--enforce-eager"])
    assert line.with_value("enforce-eager", "false").render() == (
        None,
        [MODEL, "--enforce-eager=false"],
    )


def test_a_value_set_on_a_flag_added_in_the_same_change_stays_at_the_end() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", MODEL], ["--port", "1"])
    changed = line.with_flag("hf-token", True).with_value("hf-token", "t")
    assert changed.render() == (["vllm", "serve", MODEL], ["--port", "1", "--hf-token", "t"])


def test_equal_command_lines_compare_equal() -> None:
    args = [MODEL, "--max-num-seqs", "1"]
    assert VllmCommandLine.parse(None, args) == VllmCommandLine.parse(None, list(args))


def test_a_value_set_on_the_last_flag_stays_before_flags_appended_after_it() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", MODEL, "--hf-token"], [])
    changed = line.with_value("hf-token", "t").with_value("max-num-seqs", "8")
    assert changed.render() == (
        ["vllm", "serve", MODEL, "--hf-token", "t"],
        ["--max-num-seqs", "8"],
    )
