#!/usr/bin/env bash
# One GPU job: a chunk of the GPU profile on an offline machine, packed into a few files.
#
#   scripts/gpu_run.sh [--smoke] [--minutes M] [--resume TGZ] NN[,NN...]
#
#   NN,...       the chunk's notebooks (./run_all.sh --list --profile gpu prints the chunks)
#   --smoke      the GPU profile's smoke test, on the CPU (to try this script anywhere)
#   --minutes M  stop cleanly before M minutes (default 8: with install and packing, one chunk in
#                one 10-minute command), mid-run checkpoints kept
#   --resume T   go on from the checkpoints of a job its deadline cut (its checkpoints.tgz.*)
#
# From the repository root, with whatever python3 is on PATH (it must have torch): installs
# .gpu_bundle/*.whl (scripts/gpu_bundle.sh, made online) into a temporary folder, no venv, no
# network; says which GPU torch sees; runs the chunk (python3 -m rt_lib.pipeline --profile gpu);
# keeps its evidence with its provenance (the commit from .gpu_bundle/COMMIT: .git may not
# travel); and leaves at most 8 files in $OUT (else gpu_out/): gpu_run.log, evidence.tgz
# (import it with python -m rt_lib.site.evidence import) and checkpoints.tgz.NN (parts of at
# most 15 MiB: the run's results folder, for --resume; a finished run's without its model files
# when those would not come back; RT_GPU_FILES: how many files do).  The run itself goes to gpu_results/ (the
# same path in every job, so that a resumed run finds the paths it started with), removed at the
# end once packed.
set -euo pipefail

usage() { sed -n '4,9p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
die() { echo "gpu_run: error: $*" >&2; exit 2; }

cd "$(dirname "$0")/.."
smoke=0
minutes=8
resume=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1; shift ;;
    --minutes) [ $# -ge 2 ] || die "--minutes needs a number"; minutes=$2; shift 2 ;;
    --resume) [ $# -ge 2 ] || die "--resume needs the first part of a checkpoints tarball"; resume=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$only" ] || die "one list of notebooks, comma-separated (got '$only' and '$1')"; only=$1; shift ;;
  esac
done
[ -n "$only" ] || die "which notebooks? e.g. scripts/gpu_run.sh 11,13 (see ./run_all.sh --list --profile gpu)"
[[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || die "--minutes must be a number of minutes, got '$minutes'"
files=${RT_GPU_FILES:-8}  # how many files come back from a job: 8 on the project's GPU machines
[[ "$files" =~ ^[0-9]+$ ]] && [ "$files" -ge 3 ] || die "RT_GPU_FILES must be 3 or more (the log, the evidence, a part), got '$files'"
bundle=${RT_GPU_BUNDLE:-.gpu_bundle}  # another folder of wheels: the tests make one for this Python
[ -d "$bundle" ] || die "no $bundle/: make it online with scripts/gpu_bundle.sh --python-version X.Y and carry it"
# a bundle made for another Python, or beside other sources, is refused before anything installs
want_py=$(cat "$bundle/PYTHON" 2>/dev/null || echo "?")
have_py=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
[ "$want_py" = "$have_py" ] || die "$bundle/ was made for Python $want_py, this python3 is $have_py: remake it with scripts/gpu_bundle.sh --python-version $have_py"
if [ -f "$bundle/SOURCES" ]; then
  here=$(find rt_lib notebooks -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.ipynb' \) \
    -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)
  [ "$here" = "$(cat "$bundle/SOURCES")" ] || die "$bundle/ was made beside other sources than these (an older commit, commit $(cut -c1-12 "$bundle/COMMIT" 2>/dev/null)): remake it with scripts/gpu_bundle.sh here, so that the evidence names the commit that ran"
fi

out=${OUT:-gpu_out}
mkdir -p "$out"
exec > >(tee -a "$out/gpu_run.log") 2>&1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "gpu_run: $(date -u +%Y-%m-%dT%H:%M:%SZ), notebooks $only, $minutes minutes$( [ $smoke = 1 ] && echo ', smoke test on the CPU')"
python3 -m pip install --quiet --no-index --no-deps --disable-pip-version-check \
  --target "$work/site" "$bundle"/*.whl
export PYTHONPATH="$work/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$work/site/bin:$PATH"
export RT_SOURCE_COMMIT
RT_SOURCE_COMMIT=$(cat "$bundle/COMMIT" 2>/dev/null || echo unknown)
# the same folder in every job: a run resumed in the next job finds the paths it was started with
export RT_RESULTS="$PWD/gpu_results"
export TQDM_DISABLE=1
export JUPYTER_RUNTIME_DIR="$work/runtime"  # kernel connection files: nothing left behind
profile=gpu
if [ $smoke = 1 ]; then
  export CUDA_VISIBLE_DEVICES=""  # the smoke test runs on the CPU, wherever it is run
  profile=gpu-smoke
fi
python3 - <<'EOF'
import sys, torch
if torch.cuda.is_available():
    print(f"gpu_run: torch {torch.__version__}, CUDA {torch.version.cuda}: {torch.cuda.get_device_name(0)}")
else:
    print(f"gpu_run: torch {torch.__version__} sees no GPU: this job runs on the CPU")
print(f"gpu_run: Python {sys.version.split()[0]}")
EOF
echo "gpu_run: source commit $RT_SOURCE_COMMIT ($bundle/COMMIT)"

rm -rf "$RT_RESULTS"
mkdir -p "$RT_RESULTS"
if [ -n "$resume" ]; then
  parts=("${resume%.[0-9][0-9]}".[0-9][0-9])
  [ -f "${parts[0]}" ] || die "--resume $resume: no such checkpoints tarball (its parts end .00, .01, ...)"
  cat "${parts[@]}" | tar -xzf - -C "$RT_RESULTS"
  echo "gpu_run: resumed from ${#parts[@]} part(s) of $resume"
fi

flags=(--profile gpu --only "$only" --no-site --jobs 1)
[ $smoke = 1 ] && flags+=(--smoke --no-footprints)
seconds=$(python3 -c "print(int(float('$minutes') * 60))")
set +e
# SIGTERM at the deadline: the runner stops its notebooks as on Ctrl-C, checkpoints kept
timeout --signal=TERM --kill-after=60 "$seconds" python3 -m rt_lib.pipeline "${flags[@]}"
rc=$?
set -e

# (an if, not `$( [ $smoke = 1 ] && echo ...)`: under set -e that assignment fails without --smoke)
if [ $smoke = 1 ]; then command="scripts/gpu_run.sh --smoke $only"; else command="scripts/gpu_run.sh $only"; fi
if [ $rc = 0 ]; then
  python3 -m rt_lib.site.evidence keep --profile "$profile" --evidence-dir "$work/evidence" \
    --command "$command"
  tar -czf "$out/evidence.tgz" -C "$work/evidence" .
  echo "gpu_run: evidence packed: $out/evidence.tgz (python -m rt_lib.site.evidence import it)"
elif [ $rc = 124 ]; then
  echo "gpu_run: cut by the deadline ($minutes minutes): go on with --resume $out/checkpoints.tgz.00"
else
  echo "gpu_run: the run failed (exit $rc): its log is above, its results in checkpoints.tgz.*"
fi
if [ $rc != 0 ]; then
  # what the unfinished runs measured, in the log: it comes back even when their parts do not
  echo "gpu_run: where the runs stand (their checkpoints):"
  python3 -m rt_lib.jobs.resume "$RT_RESULTS" | sed 's/^/  /' || true
fi
rm -f "$out"/checkpoints.tgz.*
# What comes back from a job: $files files (the log and the evidence among them), 16 MiB each.
# A finished run needs no resuming: when its results do not fit the parts left, its model files
# (*.pt, its checkpoints and snapshots) stay behind and its tables come back.  A run cut short
# needs all of it to resume.
room=$(( files - $(ls "$out" | wc -l) ))
tar -czf "$work/results.tgz" -C "$RT_RESULTS" .
bytes=$(wc -c < "$work/results.tgz" | tr -d " ")
if [ $rc = 0 ] && [ "$bytes" -gt $(( room * 15 * 1048576 )) ]; then
  tar -czf "$work/results.tgz" --exclude='*.pt' --exclude='*.pt.sha256' -C "$RT_RESULTS" .
  echo "gpu_run: the finished run's results take $(( bytes / 1048576 )) MiB packed, more than the" \
    "$room part(s) of 15 MiB left to come back: packed without its model files (*.pt); the" \
    "evidence holds its notebooks, claims and figures"
fi
split -b 15M -d -a 2 "$work/results.tgz" "$out/checkpoints.tgz."
rm -rf "$RT_RESULTS"  # all that is needed of it is in the tarball
n=$(ls "$out"/checkpoints.tgz.* | wc -l)
if [ "$n" -gt "$room" ]; then
  echo "gpu_run: warning: the checkpoints take $n parts of 15 MiB, $room come back from a job" \
    "($files files in all): run fewer notebooks per job to resume from them"
fi
echo "gpu_run: $(ls "$out" | wc -l) file(s) in $out: $(cd "$out" && ls | tr '\n' ' ')"
exit $rc
