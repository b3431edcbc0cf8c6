#!/usr/bin/env bash
# The whole test suite, as CI runs it: set-up, static checks, then every test tier.
# Extra arguments go to pytest (e.g. `scripts/test.sh tests/unit -x`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
B=.venv/bin
# One command per line: under `set -e`, a failure inside an `a && b` list does not stop the script.
echo "== ruff"
$B/ruff check .
$B/ruff format --check .
echo "== mypy (strict)"
$B/mypy
echo "== import-linter"
$B/lint-imports
echo "== pytest"
export PATH="$PWD/.tools/bin:$PATH"
# Three workers: most integration and e2e time is spent waiting on measurement windows.
exec $B/pytest -n "${PYTEST_WORKERS:-3}" "$@"
