"""Every operator setting reads the same from its flag and from its LT_* environment variable,
the flag wins, and a bad value is refused with a message that names where it came from."""

from __future__ import annotations

from typing import Any

import pytest

from latency_tuner.settings import OperatorSettings, SettingsError, parse_settings, parser

URL = "http://prometheus.monitoring:9090"
NEEDS_URL = {"LT_PROMETHEUS_URL": URL}  # prometheus mode (the default) needs a URL

# flag, environment variable, value as written, attribute, value parsed
SETTINGS: list[tuple[str, str, str, str, Any]] = [
    ("--prometheus-url", "LT_PROMETHEUS_URL", "https://prom:9091", "prometheus_url",
     "https://prom:9091"),
    ("--prometheus-bearer-token", "LT_PROMETHEUS_BEARER_TOKEN", "s3cret",
     "prometheus_bearer_token", "s3cret"),
    ("--prometheus-bearer-token-file", "LT_PROMETHEUS_BEARER_TOKEN_FILE", "/var/run/token",
     "prometheus_bearer_token_file", "/var/run/token"),
    ("--prometheus-ca-file", "LT_PROMETHEUS_CA_FILE", "/etc/ca.pem", "prometheus_ca_file",
     "/etc/ca.pem"),
    ("--prometheus-timeout", "LT_PROMETHEUS_TIMEOUT", "1m30s", "prometheus_timeout_seconds",
     90.0),
    ("--prometheus-max-targets-per-query", "LT_PROMETHEUS_MAX_TARGETS_PER_QUERY", "200",
     "prometheus_max_targets_per_query", 200),
    ("--allow-per-resource-prometheus-url", "LT_ALLOW_PER_RESOURCE_PROMETHEUS_URL", "true",
     "allow_per_resource_prometheus_url", True),
    ("--metrics-source", "LT_METRICS_SOURCE", "scrape", "metrics_source", "scrape"),
    ("--namespaces", "LT_NAMESPACES", "team-a, team-b,", "namespaces", ("team-a", "team-b")),
    ("--interval", "LT_INTERVAL", "500ms", "interval_seconds", 0.5),
    ("--log-level", "LT_LOG_LEVEL", "WARNING", "log_level", "warning"),
    ("--log-format", "LT_LOG_FORMAT", "json", "log_format", "json"),
    ("--standalone", "LT_STANDALONE", "false", "standalone", False),
    ("--peering-name", "LT_PEERING_NAME", "tuners", "peering_name", "tuners"),
    ("--metrics-port", "LT_METRICS_PORT", "9100", "metrics_port", 9100),
    ("--probe-port", "LT_PROBE_PORT", "0", "probe_port", 0),
    ("--kubeconfig", "LT_KUBECONFIG", "/home/me/.kube/config", "kubeconfig",
     "/home/me/.kube/config"),
    ("--verbose", "LT_VERBOSE", "yes", "verbose", True),
    ("--shards", "LT_SHARDS", "3", "shards", 3),
    ("--shard-mode", "LT_SHARD_MODE", "label", "shard_mode", "label"),
    ("--shard-lease", "LT_SHARD_LEASE", "5m", "shard_lease_seconds", 300.0),
    ("--pod-name", "LT_POD_NAME", "tuner-7", "pod_name", "tuner-7"),
]  # fmt: skip


IDS = [row[0] for row in SETTINGS]


@pytest.mark.parametrize(("flag", "env", "text", "attr", "value"), SETTINGS, ids=IDS)
def test_a_setting_given_as_a_flag_is_read(
    flag: str, env: str, text: str, attr: str, value: Any
) -> None:
    assert getattr(parse_settings([flag, text], NEEDS_URL), attr) == value
    assert getattr(parse_settings([f"{flag}={text}"], NEEDS_URL), attr) == value


@pytest.mark.parametrize(("flag", "env", "text", "attr", "value"), SETTINGS, ids=IDS)
def test_a_setting_given_as_an_environment_variable_is_read(
    flag: str, env: str, text: str, attr: str, value: Any
) -> None:
    assert getattr(parse_settings([], {**NEEDS_URL, env: text}), attr) == value


@pytest.mark.parametrize(("flag", "env", "text", "attr", "value"), SETTINGS, ids=IDS)
def test_a_flag_wins_over_the_environment(
    flag: str, env: str, text: str, attr: str, value: Any
) -> None:
    default = getattr(OperatorSettings(), attr)
    from_env = parse_settings([], {**NEEDS_URL, env: text})
    both = parse_settings([flag, text], {**NEEDS_URL, env: _other(text)})
    assert getattr(both, attr) == value
    assert getattr(from_env, attr) == value
    assert value != default or attr == "probe_port"  # the row shows a change from the default


def _other(text: str) -> str:
    """A different valid value of the same kind, for the environment to lose with."""
    alternatives = {
        "true": "false", "false": "true", "yes": "no", "scrape": "prometheus", "json": "plain",
        "WARNING": "debug", "1m30s": "5s", "500ms": "1h", "9100": "9200", "0": "8081",
    }  # fmt: skip
    return alternatives.get(text, text + "-from-env")


def test_a_boolean_flag_alone_means_true() -> None:
    settings = parse_settings(["--allow-per-resource-prometheus-url", "--verbose"], NEEDS_URL)
    assert settings.allow_per_resource_prometheus_url
    assert settings.verbose


def test_without_flags_or_environment_the_defaults_hold() -> None:
    settings = parse_settings([], NEEDS_URL)
    assert settings == OperatorSettings(prometheus_url=URL)
    assert settings.namespaces == ()  # cluster-wide
    assert settings.interval_seconds == 30.0
    assert settings.standalone


def test_an_empty_namespaces_variable_means_the_whole_cluster() -> None:
    assert parse_settings([], {**NEEDS_URL, "LT_NAMESPACES": ""}).namespaces == ()


def test_an_empty_environment_variable_is_unset() -> None:
    settings = parse_settings([], {**NEEDS_URL, "LT_INTERVAL": "", "LT_METRICS_PORT": ""})
    assert (settings.interval_seconds, settings.metrics_port) == (30.0, 8080)


@pytest.mark.parametrize(
    ("where", "value", "named", "says"),
    [
        ("prometheus-timeout", "10", "prometheus-timeout", "with a unit"),
        ("interval", "soon", "interval", "not a duration"),
        ("interval", "0s", "interval", "longer than zero"),
        ("allow-per-resource-prometheus-url", "maybe", "allow-per-resource", "not a boolean"),
        ("standalone", "2", "standalone", "not a boolean"),
        ("metrics-source", "statsd", "metrics-source", "not one of prometheus, scrape"),
        ("log-format", "xml", "log-format", "not one of plain, json"),
        ("log-level", "loud", "log-level", "not one of debug, info, warning, error"),
        ("metrics-port", "http", "metrics-port", "not a whole number"),
        ("probe-port", "70000", "probe-port", "not a port number"),
    ],
)
def test_a_bad_value_is_refused_naming_the_flag_or_the_variable_it_came_from(
    where: str, value: str, named: str, says: str
) -> None:
    env_name = "LT_" + where.upper().replace("-", "_")
    with pytest.raises(SettingsError) as from_flag:
        parse_settings([f"--{where}", value], NEEDS_URL)
    assert str(from_flag.value).startswith(f"--{named}")
    assert says in str(from_flag.value)
    with pytest.raises(SettingsError) as from_env:
        parse_settings([], {**NEEDS_URL, env_name: value})
    assert str(from_env.value).startswith(env_name)
    assert says in str(from_env.value)


def test_prometheus_mode_without_a_prometheus_url_is_an_error() -> None:
    with pytest.raises(SettingsError) as error:
        parse_settings([], {})
    assert "--prometheus-url" in str(error.value)
    assert "LT_PROMETHEUS_URL" in str(error.value)
    with pytest.raises(SettingsError):
        parse_settings(["--metrics-source", "prometheus"], {"LT_PROMETHEUS_URL": ""})


def test_scrape_mode_needs_no_prometheus_url() -> None:
    settings = parse_settings(["--metrics-source", "scrape"], {})
    assert settings.metrics_source == "scrape"
    assert settings.prometheus_url is None


def test_the_bearer_token_is_kept_out_of_the_settings_repr() -> None:
    settings = parse_settings(["--prometheus-bearer-token", "s3cret"], NEEDS_URL)
    assert "s3cret" not in repr(settings)


def test_an_unknown_flag_stops_with_usage() -> None:
    with pytest.raises(SystemExit):
        parse_settings(["--prometheus-address", URL], NEEDS_URL)


def test_run_help_shows_each_settings_default_and_its_variable() -> None:
    text = " ".join(parser().format_help().split())
    assert "[LT_INTERVAL] (default: 30s)" in text
    assert "[LT_METRICS_PORT] (default: 8080)" in text
    assert "[LT_STANDALONE] (default: true)" in text
    assert "[LT_METRICS_SOURCE] (default: prometheus)" in text
    assert "[LT_PROMETHEUS_URL] (default" not in text  # no default, none shown
