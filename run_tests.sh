#!/usr/bin/env bash
# Set up (.venv + pinned dependencies) and run every test: the rt_lib unit tests and nbval
# regression runs of every committed notebook.  Notebooks are compared bit for bit (after
# tests/nbval_sanitize.cfg) where this machine's numeric platform matches the one they were recorded
# on, else portable (rt_lib/claims/portable.py: numbers masked, every claim's status exactly, its numbers
# within the claim's tolerance); RT_PLATFORM=strict|portable forces one.  The line before the
# tests start, and the summary of the first pytest run below, say which and why.
# Extra arguments go to pytest, e.g. ./run_tests.sh -k model
# Tests run on RT_TEST_JOBS pytest-xdist workers (default: usable cores / RT_THREADS, at most 4),
# each with one torch thread; conftest.py keeps each notebook on one worker and hands out a
# notebook only once those whose results it reads have finished.  RT_TEST_JOBS=0 runs everything
# in this process.  The 20 slowest tests are listed at the end (where the time goes: the budget
# is 65 minutes).  A cell may take up to RT_CELL_TIMEOUT seconds, 30 minutes unless set (the
# training cells of 11, 04 and 01 are the longest: docs/measurements.md has their times); a
# slower machine, or MKL's COMPATIBLE path (1.8-3.3x per step: docs/reliability.md), needs more.
# The paper-profile smoke run end to end (tests/pipeline/test_smoke.py) runs too; RT_TEST_SMOKE=0 skips it.
# The notebooks load their training runs from the run store (rt_lib/runtime/store.py, $RT_CACHE,
# default ~/.cache/rt-companion/runs) where it holds them, and store what they train: the first
# and last lines say how many were loaded and trained.  ./run_tests.sh --no-cache (or
# RT_CACHE=off) trains every run from nothing, the check that needs no store.
set -euo pipefail
# a relative RT_RESULTS is relative to where the command was typed, not to the project
if [ -n "${RT_RESULTS:-}" ]; then RT_RESULTS="$(realpath -m -- "$RT_RESULTS")"; export RT_RESULTS; fi
cd "$(dirname "$0")"
if [ "${1:-}" = "--no-cache" ]; then
  export RT_CACHE=off
  shift
fi
export RT_CACHE_SESSION="tests-$$-$(date +%s)"  # this command's loads and trainings, counted apart
./scripts/setup.sh
./scripts/setup_browser.sh  # Debian's chromium for the JupyterLab widget test, where it can
./scripts/slurm_local.sh install  # Debian's Slurm for tests/jobs/test_slurm.py's one-node cluster, where it can
.venv/bin/python -c "import torch; print('CPU kernels of this machine:', torch.backends.cpu.get_cpu_capability())"
source scripts/kernel_env.sh  # the same CPU kernels as the recorded notebooks
source scripts/data_env.sh  # RT_TINYSTORIES: the TinyStories text (notebook 08)
.venv/bin/python -m rt_lib.runtime.fingerprint  # this machine's platform, and which comparison it gets
export TQDM_DISABLE=1  # progress bars would land in the compared stderr outputs
.venv/bin/python -m rt_lib.runtime.store  # where the store is and what it holds before the tests
# nbval writes through the notebooks' own code: keep its results apart from ./results.
export RT_RESULTS="${RT_RESULTS:-$(mktemp -d)/results}"
jobs="${RT_TEST_JOBS:-$(.venv/bin/python -c 'from rt_lib.runtime.seeding import default_jobs; print(default_jobs())')}"
[ "$jobs" = 1 ] && jobs=0  # one worker: no need for xdist's extra process
pytest=(.venv/bin/python -m pytest --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
        --nbval-cell-timeout "${RT_CELL_TIMEOUT:-1800}" -p no:cacheprovider --durations 20)
if [ $# -gt 0 ]; then  # the caller picks the tests
  exec "${pytest[@]}" tests notebooks --nbval -n "$jobs" --dist loadscope --no-loadscope-reorder "$@"
fi
# Lint and import order first (pyproject.toml [tool.ruff]): seconds, and a red line names the file.
status=0
echo "ruff check (lint and import order):"
.venv/bin/ruff check --no-cache . || status=$?
# Everything but the browser tests side by side, then the browser tests alone: starved of CPU
# beside a training notebook, JupyterLab at times loses its kernel or asks for one.
"${pytest[@]}" tests notebooks --nbval --ignore tests/site/test_browser.py \
  -n "$jobs" --dist loadscope --no-loadscope-reorder || status=$(( status ? status : $? ))
"${pytest[@]}" tests/site/test_browser.py || status=$(( status ? status : $? ))
.venv/bin/python -m rt_lib.runtime.store --session "$RT_CACHE_SESSION"  # loaded and trained here
exit "$status"
