#!/usr/bin/env bash
# Set up (.venv + pinned dependencies) and regenerate every figure and table into results/.
#   ./run_all.sh                     CPU profile, every numbered notebook
#   ./run_all.sh --profile paper     paper-scale settings from configs/paper/ (GPU when present)
#   ./run_all.sh --only 01           one notebook;  --set key=value overrides a parameter
#   ./run_all.sh --help              all options
set -euo pipefail
# a relative RT_RESULTS is relative to where the command was typed, not to the project
if [ -n "${RT_RESULTS:-}" ]; then RT_RESULTS="$(realpath -m -- "$RT_RESULTS")"; export RT_RESULTS; fi
cd "$(dirname "$0")"
./scripts/setup.sh
source scripts/kernel_env.sh  # the same CPU kernels as the recorded notebooks
source scripts/data_env.sh  # RT_TINYSTORIES: the TinyStories text (notebook 08)
exec .venv/bin/python -m rt_lib.pipeline "$@"
