"""vLLM started from a shell string: find it, change it, keep the rest of the script as written."""

import pytest

from latency_tuner.vllm.args import NotVllmError, VllmCommandLine

MODEL = "meta-llama/X"


def test_a_sh_c_command_is_read() -> None:
    line = VllmCommandLine.parse(["/bin/sh", "-c", f"vllm serve {MODEL} --max-num-seqs 64"], None)
    assert line.model == MODEL
    assert line.get("max-num-seqs") == "64"
    assert line.launcher == "sh -c vllm serve"
    assert VllmCommandLine.parse(["bash", "-c", "vllm serve m"], None).launcher == (
        "bash -c vllm serve"
    )


def test_the_script_can_sit_in_args() -> None:
    line = VllmCommandLine.parse(["/bin/bash", "-c"], [f"exec vllm serve {MODEL} -tp 2"])
    assert line.get("tensor-parallel-size") == "2"
    changed = line.with_value("tp", "4")
    assert changed.render() == (["/bin/bash", "-c"], [f"exec vllm serve {MODEL} -tp 4"])


def test_the_shell_and_its_flag_can_both_sit_in_args() -> None:
    line = VllmCommandLine.parse(["bash"], ["-lc", f"vllm serve {MODEL}"])
    assert line.model == MODEL


def test_other_commands_around_vllm_are_kept_as_written() -> None:
    script = (
        f"pip install foo && VLLM_LOGGING_LEVEL=DEBUG exec vllm serve {MODEL} --max-num-seqs 64"
        " && sleep 1"
    )
    line = VllmCommandLine.parse(["/bin/sh", "-c", script], None)
    changed = line.with_value("max-num-seqs", "128").with_value("max-num-batched-tokens", "2048")
    assert changed.render() == (
        [
            "/bin/sh",
            "-c",
            f"pip install foo && VLLM_LOGGING_LEVEL=DEBUG exec vllm serve {MODEL} "
            "--max-num-seqs 128 --max-num-batched-tokens 2048 && sleep 1",
        ],
        None,
    )


def test_line_continuations_and_quoting_survive_a_change() -> None:
    script = (
        "set -e\n"
        "# start the server\n"
        "python3 -m vllm.entrypoints.openai.api_server \\\n"
        f'  --model "{MODEL}" \\\n'
        '  --speculative-config \'{"method": "ngram", "num_speculative_tokens": 5}\' \\\n'
        "  --max_num_seqs=32 \\\n"
        "  --port 8000 2>&1 | tee /tmp/vllm.log\n"
    )
    line = VllmCommandLine.parse(["bash", "-c", script], None)
    assert line.model == MODEL
    assert line.get("speculative-config") == '{"method": "ngram", "num_speculative_tokens": 5}'
    changed = (
        line.with_value("speculative-config", '{"method": "eagle"}')
        .with_value("max-num-seqs", "64")
        .without("port")
        .with_flag("enable-prefix-caching", False)
    )
    command, args = changed.render()
    assert args is None
    assert command is not None
    assert command[2] == (
        "set -e\n"
        "# start the server\n"
        "python3 -m vllm.entrypoints.openai.api_server \\\n"
        f'  --model "{MODEL}" \\\n'
        '  --speculative-config \'{"method": "eagle"}\' \\\n'
        "  --max_num_seqs=64 --no-enable-prefix-caching 2>&1 | tee /tmp/vllm.log\n"
    )


def test_a_removed_flag_in_the_middle_takes_its_line_continuation_with_it() -> None:
    script = f"vllm serve {MODEL} \\\n  --cpu-offload-gb 8 \\\n  --port 8000"
    line = VllmCommandLine.parse(["sh", "-c", script], None)
    assert line.without("cpu-offload-gb").render()[0] == [
        "sh",
        "-c",
        f"vllm serve {MODEL} \\\n  --port 8000",
    ]


def test_a_model_added_to_a_script_goes_right_after_the_launcher() -> None:
    line = VllmCommandLine.parse(["sh", "-c", "vllm serve --config /c.yaml"], None)
    assert line.with_model("m").render()[0] == ["sh", "-c", "vllm serve m --config /c.yaml"]


def test_a_flag_added_to_a_script_with_nothing_after_the_launcher_follows_it() -> None:
    line = VllmCommandLine.parse(["sh", "-c", "exec vllm serve; echo done"], None)
    assert line.with_value("max-num-seqs", "8").render()[0] == [
        "sh",
        "-c",
        "exec vllm serve --max-num-seqs 8; echo done",
    ]


def test_changed_values_with_spaces_are_quoted() -> None:
    line = VllmCommandLine.parse(["sh", "-c", f"vllm serve {MODEL} --chat-template x"], None)
    changed = line.with_value("chat-template", "{{ a b }}")
    assert changed.render()[0] == [
        "sh",
        "-c",
        f"vllm serve {MODEL} --chat-template '{{{{ a b }}}}'",
    ]
    assert changed.get("chat-template") == "{{ a b }}"


def test_variables_are_kept_literally() -> None:
    script = 'exec vllm serve "$MODEL_ID" --max-num-seqs ${MAX_SEQS:-64} --port $(echo 80)'
    line = VllmCommandLine.parse(["sh", "-c", script], None)
    assert line.model == "$MODEL_ID"
    assert line.get("max-num-seqs") == "${MAX_SEQS:-64}"
    assert line.get("port") == "$(echo 80)"
    assert line.render() == (["sh", "-c", script], None)


def test_backslash_escapes_and_backticks_are_read() -> None:
    line = VllmCommandLine.parse(["sh", "-c", r"vllm serve my\ model --x `date` --y \"q\""], None)
    assert line.model == "my model"
    assert line.get("x") == "`date`"
    assert line.get("y") == '"q"'


def test_a_double_quoted_string_keeps_escapes_it_does_not_know() -> None:
    line = VllmCommandLine.parse(["sh", "-c", 'vllm serve "a\\nb\\"c\\\ncont"'], None)
    assert line.model == 'a\\nb"ccont'


def test_redirections_are_not_arguments() -> None:
    line = VllmCommandLine.parse(
        ["sh", "-c", f"vllm serve {MODEL} >/tmp/out 2>&1 < /dev/null"], None
    )
    assert line.flags() == ()
    changed = line.with_value("port", "1")
    assert changed.render()[0] == [
        "sh",
        "-c",
        f"vllm serve {MODEL} --port 1 >/tmp/out 2>&1 < /dev/null",
    ]


def test_the_first_vllm_command_of_several_is_the_server() -> None:
    script = "vllm serve a --port 1 & vllm serve b --port 2; wait"
    assert VllmCommandLine.parse(["sh", "-c", script], None).model == "a"


def test_a_subshell_and_keywords_are_looked_through() -> None:
    script = "if true; then (exec vllm serve a); fi"
    assert VllmCommandLine.parse(["sh", "-c", script], None).model == "a"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("echo 'unclosed", "unclosed single quote"),
        ('echo "unclosed', "unclosed double quote"),
        ("echo $(unclosed", "unclosed ("),
        ("echo `unclosed", "unclosed backtick"),
    ],
)
def test_an_unreadable_script_is_reported(script: str, message: str) -> None:
    with pytest.raises(NotVllmError, match="cannot be read") as caught:
        VllmCommandLine.parse(["sh", "-c", script], None)
    assert message in str(caught.value)


def test_a_nested_shell_is_reported_as_such() -> None:
    with pytest.raises(NotVllmError, match="nested `bash -c` script"):
        VllmCommandLine.parse(["sh", "-c", "bash -c 'vllm serve m'"], None)


def test_a_script_without_vllm_names_what_it_runs() -> None:
    with pytest.raises(NotVllmError, match="text-generation-launcher"):
        VllmCommandLine.parse(["sh", "-c", "cd /app && text-generation-launcher --port 80"], None)


def test_an_empty_script_is_not_vllm() -> None:
    with pytest.raises(NotVllmError, match="empty shell script"):
        VllmCommandLine.parse(["sh", "-c", "  # nothing\n"], None)


def test_a_line_continuation_inside_a_word_joins_it() -> None:
    assert (
        VllmCommandLine.parse(["sh", "-c", "vllm serve org/mo\\\ndel"], None).model == "org/model"
    )


def test_command_substitutions_with_quotes_and_nesting_stay_one_word() -> None:
    script = 'vllm serve m --a "$(cat /x)" --b $(echo \')\' "(" $(date)) --c 1'
    line = VllmCommandLine.parse(["sh", "-c", script], None)
    assert line.get("a") == "$(cat /x)"
    assert line.get("b") == "$(echo ')' \"(\" $(date))"
    assert line.get("c") == "1"
    assert line.render() == (["sh", "-c", script], None)


def test_a_redirection_without_a_target_ends_the_command() -> None:
    line = VllmCommandLine.parse(["sh", "-c", "vllm serve m --port 1 >"], None)
    assert line.get("port") == "1"


def test_a_value_added_to_a_flag_in_the_middle_of_a_script_stays_with_it() -> None:
    line = VllmCommandLine.parse(["sh", "-c", "vllm serve m --hf-token --port 1"], None)
    assert line.with_value("hf-token", "t").render()[0] == [
        "sh",
        "-c",
        "vllm serve m --hf-token t --port 1",
    ]
