#!/usr/bin/env bash
# The one command of a GPU lending (issue 59, item 5): the next chunk of the GPU profile, then,
# in the seconds left, the two measurements that decide what the GPU configs use.
#
#   scripts/gpu_session.sh [--smoke] [--minutes M] [--resume TGZ] [--budget S] NN[,NN...]
#
#   NN,...       the chunk (./run_all.sh --list --profile gpu: the first without evidence)
#   --minutes M  the chunk stops cleanly before M minutes (default 8; scripts/gpu_run.sh)
#   --resume T   the chunk goes on from a cut job's checkpoints.tgz.00 (scripts/gpu_run.sh)
#   --budget S   seconds the whole command may take (default 590: the device tool's 600 less a
#                margin); what is left after the chunk goes to the measurements
#   --smoke      on the CPU: the chunk's smoke test and the measurements at a tiny size (a rehearsal)
#
# Everything lands in $OUT (else gpu_out/), at most 8 files: scripts/gpu_run.sh's log, evidence
# and checkpoint parts (RT_GPU_FILES=6 of them), then
#   profile_miiii.txt  benchmarks/profile_miiii.py device=cuda: where miiii's epoch goes, under
#                      both readouts of its loss, deterministic and TF32 on and off
#   restarts_cuda.txt  benchmarks/bench_all.py --groups restarts --device cuda: 10 restarts
#                      stacked against one by one (whether the GPU configs set batch_restarts)
# Each measurement runs under `timeout` for the seconds left and flushes line by line, so a cut
# one still returns what it measured; one with under 20 seconds left says so in its file.
# Exits with scripts/gpu_run.sh's status.  Then: give the machine back, import evidence.tgz
# (python -m rt_lib.site.evidence import), and put the two files' figures in docs/measurements.md.
set -uo pipefail

usage() { sed -n '5,12p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
die() { echo "gpu_session: error: $*" >&2; exit 2; }

cd "$(dirname "$0")/.."
start=$(date +%s)
smoke=0
minutes=8
budget=590
resume=()
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1; shift ;;
    --minutes) [ $# -ge 2 ] || die "--minutes needs a number"; minutes=$2; shift 2 ;;
    --resume) [ $# -ge 2 ] || die "--resume needs the first part of a checkpoints tarball"; resume=(--resume "$2"); shift 2 ;;
    --budget) [ $# -ge 2 ] || die "--budget needs a number of seconds"; budget=$2; shift 2 ;;
    -h|--help) usage 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) [ -z "$only" ] || die "one chunk, comma-separated (got '$only' and '$1')"; only=$1; shift ;;
  esac
done
[ -n "$only" ] || die "which chunk? e.g. scripts/gpu_session.sh 04 (see ./run_all.sh --list --profile gpu)"
[[ "$budget" =~ ^[0-9]+$ ]] || die "--budget must be whole seconds, got '$budget'"
out=${OUT:-gpu_out}
mkdir -p "$out"
# the measurements' own tables (bench_all.csv) go to a scratch folder, not the checkout's results/
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

smoke_flag=()
[ $smoke = 1 ] && smoke_flag=(--smoke)
# two of the 8 files that come back are the measurements'
RT_GPU_FILES=6 OUT="$out" scripts/gpu_run.sh "${smoke_flag[@]}" --minutes "$minutes" "${resume[@]}" "$only"
status=$?

if [ $smoke = 1 ]; then
  device=cpu
  profile_args=(p=11 epochs=2 rows=5)
  restarts_args=(--only "cpu 01" --seconds 1)
else
  device=cuda
  profile_args=()
  restarts_args=()
fi

# measure NAME FILE CMD...: CMD under timeout for the seconds left, its output into FILE
measure() {
  local name=$1 file=$2
  shift 2
  local left=$(( budget - ($(date +%s) - start) - 5 ))
  if [ "$left" -lt 20 ]; then
    echo "gpu_session: $name not run: ${left}s left of the ${budget}s budget" | tee "$out/$file"
    return
  fi
  echo "gpu_session: $name, at most ${left}s -> $out/$file"
  RT_RESULTS="$scratch" PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" timeout "$left" "$@" \
    > "$out/$file" 2>&1
  local rc=$?
  [ $rc = 124 ] && echo "gpu_session: $name cut at ${left}s (what it printed is kept)" | tee -a "$out/$file"
  [ $rc != 0 ] && [ $rc != 124 ] && echo "gpu_session: $name failed (exit $rc), see $out/$file"
  return 0
}

measure "the miiii epoch's profile" profile_miiii.txt \
  python3 benchmarks/profile_miiii.py device=$device "${profile_args[@]}"
measure "stacked restarts" restarts_cuda.txt \
  python3 benchmarks/bench_all.py --groups restarts --device $device "${restarts_args[@]}"
echo "gpu_session: $(( $(date +%s) - start ))s of ${budget}s; the chunk exited $status"
exit $status
