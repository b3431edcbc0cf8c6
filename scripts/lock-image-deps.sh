#!/usr/bin/env bash
# Regenerate requirements.lock: the exact versions, with their sha256 hashes as PyPI publishes
# them, of every package the image installs (the runtime dependencies in pyproject.toml, not
# the sandbox/bench/dev extras). The Dockerfile installs it with `pip --require-hashes`, so an
# image build never resolves a range and never accepts a file whose hash changed.
#
#   scripts/lock-image-deps.sh            # rewrite requirements.lock
#   scripts/lock-image-deps.sh --upgrade  # the same, moving every pin to the newest release
#
# pip-tools runs in a throwaway venv against https://pypi.org/simple only (this machine's pip
# configuration adds local mirrors and constraints; they must not leak into the lock).
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3.11}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_CONSTRAINT= PIP_EXTRA_INDEX_URL=
export PIP_INDEX_URL=https://pypi.org/simple
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet "pip-tools>=7.4"
"$tmp/venv/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras \
  --no-emit-index-url --resolver=backtracking --index-url "$PIP_INDEX_URL" \
  --output-file requirements.lock "$@" pyproject.toml
# pip-compile writes the command it was run with, including the temp path; name this script.
sed -i "s|#    pip-compile .*|#    scripts/lock-image-deps.sh|" requirements.lock
