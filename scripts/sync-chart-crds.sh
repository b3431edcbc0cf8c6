#!/usr/bin/env bash
# Copy the CRDs (crds/*.yaml, not crds/examples/) byte for byte into the chart's crds/ folder,
# which Helm installs before any template. `--check` only reports drift (exit 1), for CI.
# tests/chart/ asserts the two folders hold the same bytes.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
src="$repo_root/crds"
dst="$repo_root/charts/latency-tuner/crds"

if [[ "${1:-}" == "--check" ]]; then
  diff -r --exclude=examples "$src" "$dst"
  exit
fi

mkdir -p "$dst"
# Drop copies whose source is gone, so a renamed CRD does not linger in the chart.
for copy in "$dst"/*.yaml; do
  [[ -e "$copy" ]] || continue
  [[ -e "$src/$(basename "$copy")" ]] || rm -v "$copy"
done
cp -v "$src"/*.yaml "$dst"/
