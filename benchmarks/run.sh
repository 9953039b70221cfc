#!/usr/bin/env bash
# The benchmark command: set up .venv (as run_all.sh does), add the authors' Hugging Face GPT-2
# (transformers, pinned; only the benchmark uses it) and print every figure of bench_all.py.
#   benchmarks/run.sh                       # every group on one thread (~15 min on 2 cores)
#   benchmarks/run.sh --groups paper --threads 2
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
source scripts/data_env.sh  # RT_TINYSTORIES for notebook 08's configurations
if ! .venv/bin/python -c "import transformers" 2>/dev/null; then
  echo "benchmarks: installing transformers==5.23.0 (the authors' GPT-2, for the side-by-side)"
  .venv/bin/python -m pip install --quiet transformers==5.23.0
fi
exec .venv/bin/python benchmarks/bench_all.py "$@"
