"""Reading every form of vLLM command line a Deployment uses."""

import pytest

from latency_tuner.vllm.args import VllmCommandLine

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def test_the_image_entrypoint_form_takes_the_model_from_the_first_arg() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--max-num-seqs", "256"])
    assert line.model == MODEL
    assert line.get("max-num-seqs") == "256"
    assert line.launcher == "image entrypoint"


def test_vllm_serve_takes_a_positional_model() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", MODEL, "--max-num-seqs", "64"], None)
    assert line.model == MODEL
    assert line.get("max-num-seqs") == "64"
    assert line.launcher == "vllm serve"


def test_vllm_serve_accepts_the_model_as_a_flag() -> None:
    line = VllmCommandLine.parse(["vllm", "serve"], ["--model", MODEL, "-tp", "2"])
    assert line.model == MODEL
    assert line.get("tensor-parallel-size") == "2"


def test_a_vllm_binary_given_by_path_is_recognised() -> None:
    line = VllmCommandLine.parse(["/opt/venv/bin/vllm", "serve", MODEL], None)
    assert line.model == MODEL


@pytest.mark.parametrize("python", ["python", "python3", "/usr/bin/python3", "python3.12"])
def test_the_openai_api_server_module_is_recognised_under_any_python(python: str) -> None:
    line = VllmCommandLine.parse(
        [python, "-m", "vllm.entrypoints.openai.api_server"], ["--model", MODEL]
    )
    assert line.model == MODEL
    program = python.rsplit("/", 1)[-1]
    assert line.launcher == f"{program} -m vllm.entrypoints.openai.api_server"


def test_python_options_before_dash_m_are_skipped() -> None:
    line = VllmCommandLine.parse(
        ["python3", "-u", "-X", "utf8", "-m", "vllm.entrypoints.openai.api_server", "--model=m"],
        None,
    )
    assert line.model == "m"


def test_the_cli_main_module_needs_the_serve_subcommand() -> None:
    line = VllmCommandLine.parse(["python3", "-m", "vllm.entrypoints.cli.main", "serve", "m"], None)
    assert line.model == "m"


def test_env_and_tini_wrappers_are_looked_through() -> None:
    line = VllmCommandLine.parse(["tini", "--", "env", "A=1", "vllm", "serve", "m"], None)
    assert line.model == "m"


def test_a_flag_written_with_equals_is_read() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--max-num-batched-tokens=4096"])
    assert line.get("max-num-batched-tokens") == "4096"


def test_underscores_and_dashes_name_the_same_flag() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--max_num_seqs", "8"])
    assert line.get("max-num-seqs") == "8"
    assert line.get("max_num_seqs") == "8"
    assert line.get("--max-num-seqs") == "8"


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("-tp", "tensor-parallel-size"),
        ("-pp", "pipeline-parallel-size"),
        ("-dp", "data-parallel-size"),
        ("-q", "quantization"),
        ("-asc", "api-server-count"),
    ],
)
def test_short_aliases_resolve_to_their_long_names(alias: str, name: str) -> None:
    line = VllmCommandLine.parse(None, [MODEL, alias, "4"])
    assert line.get(name) == "4"
    assert line.get(alias) == "4"


def test_an_alias_written_with_equals_is_read() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "-tp=2"])
    assert line.get("tensor-parallel-size") == "2"


@pytest.mark.parametrize("tokens", [["-O3"], ["-O=3"], ["-O", "3"]])
def test_dash_o_with_a_level_is_the_optimization_level(tokens: list[str]) -> None:
    line = VllmCommandLine.parse(None, [MODEL, *tokens])
    assert line.get("optimization-level") == "3"
    assert line.get("O") == "3"


def test_dash_o_with_json_is_the_compilation_config() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "-O", '{"level": 3}'])
    assert line.get("compilation-config") == '{"level": 3}'


def test_a_json_value_is_read_whole() -> None:
    config = '{"method": "ngram", "num_speculative_tokens": 5}'
    assert (
        VllmCommandLine.parse(None, [MODEL, "--speculative-config", config]).get(
            "speculative-config"
        )
        == config
    )
    assert (
        VllmCommandLine.parse(None, [MODEL, f"--speculative-config={config}"]).get(
            "speculative-config"
        )
        == config
    )


def test_a_dotted_json_key_keeps_its_underscores() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--compilation_config.cudagraph_mode", "FULL"])
    assert line.get("compilation-config.cudagraph_mode") == "FULL"


def test_a_known_boolean_before_the_model_does_not_swallow_it() -> None:
    line = VllmCommandLine.parse(None, ["--enforce-eager", MODEL, "--max-num-seqs", "4"])
    assert line.model == MODEL
    assert line.flag_enabled("enforce-eager") is True


def test_an_unknown_flag_followed_by_a_flag_has_no_value() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--some-new-switch", "--max-num-seqs", "4"])
    assert line.get("some-new-switch") is None
    assert line.has("some-new-switch")
    assert line.get("max-num-seqs") == "4"


def test_an_unknown_flag_followed_by_a_word_takes_it_as_its_value() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--some-new-option", "x"])
    assert line.get("some-new-option") == "x"


def test_a_negative_number_is_a_value_not_a_flag() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--seed", "-1"])
    assert line.get("seed") == "-1"


def test_several_served_model_names_are_all_read() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--served-model-name", "a", "b", "--port", "80"])
    assert line.get("served-model-name") == "a b"
    assert line.served_model_name == "a"
    assert line.get("port") == "80"


def test_the_served_model_name_defaults_to_the_model() -> None:
    assert VllmCommandLine.parse(None, [MODEL]).served_model_name == MODEL


def test_everything_after_a_double_dash_is_positional() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", "--", MODEL], None)
    assert line.model == MODEL


def test_an_absent_flag_reads_as_none() -> None:
    line = VllmCommandLine.parse(None, [MODEL])
    assert line.get("max-num-seqs") is None
    assert line.flag_enabled("enable-prefix-caching") is None
    assert not line.has("max-num-seqs")


def test_the_last_occurrence_of_a_flag_wins_as_in_argparse() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--max-num-seqs", "1", "--max-num-seqs", "2"])
    assert line.get("max-num-seqs") == "2"


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (["--enable-prefix-caching"], True),
        (["--no-enable-prefix-caching"], False),
        (["--enable-prefix-caching=false"], False),
        (["--enable-prefix-caching=True"], True),
        (["--enable_prefix_caching"], True),
        (["--enable-prefix-caching", "False"], False),
        (["--no-enable-prefix-caching", "--enable-prefix-caching"], True),
    ],
)
def test_boolean_flags_read_in_every_spelling(tokens: list[str], expected: bool) -> None:
    line = VllmCommandLine.parse(None, [MODEL, *tokens])
    assert line.flag_enabled("enable-prefix-caching") is expected


def test_a_boolean_with_a_non_boolean_value_is_an_error() -> None:
    line = VllmCommandLine.parse(None, [MODEL, "--enforce-eager=maybe"])
    with pytest.raises(ValueError, match="not a boolean"):
        line.flag_enabled("enforce-eager")


def test_a_command_line_without_a_model_has_none() -> None:
    line = VllmCommandLine.parse(["vllm", "serve", "--config", "/etc/vllm.yaml"], None)
    assert line.model is None
    assert line.served_model_name is None


def test_the_flag_listing_leaves_out_the_model() -> None:
    line = VllmCommandLine.parse(None, ["--model", MODEL, "-tp", "2", "--enforce-eager"])
    assert line.flags() == (("tensor-parallel-size", "2"), ("enforce-eager", None))


def test_getting_the_model_flag_gives_the_model_in_either_form() -> None:
    assert VllmCommandLine.parse(None, [MODEL]).get("model") == MODEL
    assert VllmCommandLine.parse(["vllm", "serve"], ["--model", MODEL]).get("--model") == MODEL
