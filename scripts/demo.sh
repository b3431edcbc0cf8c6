#!/usr/bin/env bash
# The local demo on the embedded default scenario: no cluster, no GPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
export PATH="$PWD/.tools/bin:$PATH"
exec .venv/bin/latency-tuner demo "$@"
