"""The `latency-tuner` command: every subcommand's entry point, and the dispatcher to them.

Each subcommand is a module here (``crd``, ``sim``, ``bench``, ``diagnose``, ``report``,
``demo``, ``benchmark``) or, for ``run`` and ``realengine``, a module beside the code it drives;
each exposes
``main(argv: list[str]) -> int`` and does only argument parsing and printing around a library
call. This package may import anything of ours; nothing else imports it. The dispatcher only
routes and imports a subcommand's module when it runs, so that ``latency-tuner sim`` never
imports kopf and ``latency-tuner crd`` never imports the simulator.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from latency_tuner import __version__

# name -> (module exposing main(argv) -> int, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "crd": ("latency_tuner.cli.crd", "print the LatencyTarget CRD generated from the models"),
    "sim": ("latency_tuner.cli.sim", "run a vLLM stand-in (no GPU); `sim predict` estimates"),
    "bench": ("latency_tuner.cli.bench", "measure TTFT/ITL of an OpenAI-compatible endpoint"),
    "diagnose": ("latency_tuner.cli.diagnose", "diagnose a vLLM Deployment from its metrics"),
    "run": ("latency_tuner.handlers.cli", "run the operator"),
    "report": ("latency_tuner.cli.report", "report of a LatencyTarget: trials, cost, Markdown/PNG"),
    "demo": ("latency_tuner.cli.demo", "run the whole loop locally: no cluster, no GPU"),
    "benchmark": ("latency_tuner.cli.benchmark", "convergence and scale benchmarks"),
    "realengine": ("latency_tuner.realengine.cli", "real vLLM on CPU: venv, tiny model, serve"),
}


def _usage() -> str:
    width = max(len(name) for name in SUBCOMMANDS)
    lines = [f"latency-tuner {__version__}", "", "usage: latency-tuner COMMAND [ARGS...]", ""]
    lines += [f"  {name.ljust(width)}  {text}" for name, (_, text) in SUBCOMMANDS.items()]
    lines += ["", "Run `latency-tuner COMMAND --help` for a command's options."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        print(_usage())
        return 0
    if args[0] in {"--version", "version"}:
        print(__version__)
        return 0
    name, rest = args[0], args[1:]
    if name not in SUBCOMMANDS:
        print(f"latency-tuner: unknown command {name!r}\n\n{_usage()}", file=sys.stderr)
        return 2
    module_name, _ = SUBCOMMANDS[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            print(f"latency-tuner: `{name}` is not available in this build yet", file=sys.stderr)
            return 2
        raise
    entry: Callable[[list[str]], int] = module.main
    return entry(rest)
