#!/usr/bin/env bash
# Create .venv (if absent) and install the pinned dependencies and rt_lib (editable).
# Idempotent and quick when nothing changed: a stamp records the hash of what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version 2>&1)"
  "$PYTHON" -m venv .venv
fi
if [ -f .venv/.rt-companion-offline ]; then
  # installed from a wheelhouse with the machine's own torch (scripts/setup_offline.sh): pip here
  # would need the network, or with it replace that torch by the pinned CPU build
  exit 0
fi
# requirements.lock: every package at the recording's version, resolved on Linux x86-64 for
# Python 3.11 (the project's machines); elsewhere the direct pins of requirements.txt.
lock=requirements.lock
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ] ||
   [ "$(.venv/bin/python -c 'import sys; print(sys.version_info[:2] == (3, 11))')" != True ]; then
  lock=requirements.txt
fi
stamp=.venv/.rt-companion-installed
want=$(cat "$lock" requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing the pinned dependencies ($lock) and rt_lib"
  [ "$lock" = requirements.txt ] && echo "setup: requirements.lock is resolved for Linux x86-64 and Python 3.11; here the direct pins of requirements.txt"
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -r "$lock"
  .venv/bin/python -m pip install --quiet --no-deps -e .
  .venv/bin/python -c "import torch, rt_lib; print('setup: torch', torch.__version__, '| rt_lib', rt_lib.__version__)"
  echo "$want" > "$stamp"
fi
