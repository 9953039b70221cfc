#!/usr/bin/env bash
# The wheels a GPU-profile job needs on an offline GPU machine that has its own python3 and torch:
#
#   scripts/gpu_bundle.sh [--python-version X.Y] [DIR]      (default DIR: .gpu_bundle/)
#
# Run it HERE (it downloads from the package index), for the GPU machine's Python (default 3.12,
# what the project's GPU machines have), on manylinux x86_64.  scripts/gpu_run.sh installs the
# bundle there into a temporary folder; carry DIR with the repository.
#
# What a GPU-profile run imports that such a machine lacks is the notebook runner: papermill, the
# Jupyter kernel and its client (ipykernel, jupyter_client, pyzmq, nbclient, nbformat, IPython)
# and ipywidgets (the explorer cells of 01, 02, 13), with what they need.  Left out: what the
# machine has (torch, numpy, pandas, matplotlib, seaborn, pyyaml, scipy, tqdm, psutil, jinja2 and
# their own dependencies: MACHINE_HAS below), and what a headless run never loads (debugpy: the
# kernel's debugger; jedi, parso: completion; widgetsnbextension, jupyterlab_widgets: the
# browser's side of widgets; the site's nbconvert: the site is built here from the imported
# evidence).  Optuna, tokenizers and submitit are imported only by notebooks outside the GPU
# profile (14, 08) and by --executor, each where it is used.  One version of each package: the
# pins of requirements.txt where it names them.  The commit the bundle was made at goes into
# DIR/COMMIT (a job's evidence names it: .git may not travel).
set -euo pipefail

usage() { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
# sha256 over rt_lib's sources and the notebooks (paths and bytes): what a job runs
sources_digest() { find rt_lib notebooks -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.ipynb' \) \
  -not -path '*/__pycache__/*' | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1; }
die() { echo "gpu_bundle: error: $*" >&2; exit 1; }

cd "$(dirname "$0")/.."
pyver=3.12
dir=.gpu_bundle
while [ $# -gt 0 ]; do
  case "$1" in
    --python-version) [ $# -ge 2 ] || die "--python-version needs a value, e.g. 3.12"; pyver=$2; shift 2 ;;
    --python-version=*) pyver=${1#*=}; shift ;;
    -h|--help) usage 0 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) dir=$1; shift ;;
  esac
done
[[ "$pyver" =~ ^3\.[0-9]+$ ]] || die "--python-version must be like 3.12, got '$pyver'"
# +dirty when tracked files differ from HEAD: the job runs this working tree, not the commit.
# Only the project's own repository names it: a copy of the project inside another repository
# (whose HEAD is not this project's) gets "unknown".
commit=unknown
if top=$(git rev-parse --show-toplevel 2>/dev/null) && [ "$(realpath "$top")" = "$(realpath .)" ] \
   && commit=$(git rev-parse HEAD 2>/dev/null); then
  [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit+dirty"
elif [ -n "${top:-}" ]; then
  echo "gpu_bundle: warning: the git repository here ($top) is not this project's: commit unknown" >&2
  commit=unknown
fi
MAX_MIB=16

# The runner's packages, pinned as requirements.txt pins them.
WANT=(papermill ipykernel ipywidgets)
# On the GPU machine already (its python3's packages), with what they pull in.
MACHINE_HAS="torch numpy pandas matplotlib seaborn pyyaml scipy tqdm psutil jinja2 markupsafe
  python-dateutil six tzdata pytz contourpy cycler fonttools kiwisolver packaging pillow pyparsing
  filelock typing-extensions sympy mpmath networkx fsspec triton setuptools"
# Never loaded by a headless run (see above).
LEFT_OUT="debugpy jedi parso widgetsnbextension jupyterlab-widgets"

norm() { tr 'A-Z_.' 'a-z--'; }
pins=()
for name in "${WANT[@]}"; do
  pin=$(grep -iE "^${name}==" requirements.txt || true)
  pins+=("${pin:-$name}")
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
PIP_CONFIG_FILE=/dev/null python3 -m pip download --quiet --dest "$tmp/all" --only-binary=:all: \
  --python-version "$pyver" --implementation cp --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform linux_x86_64 \
  "${pins[@]}"

skip=" $(echo $MACHINE_HAS $LEFT_OUT | norm) "
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
kept=0
for wheel in "$tmp"/all/*.whl; do
  name=$(basename "$wheel" | cut -d- -f1 | norm)
  case "$name" in nvidia-*) continue ;; esac
  if [[ "$skip" == *" $name "* ]]; then continue; fi
  cp "$wheel" "$dir.tmp/"
  kept=$((kept + 1))
done
echo "$commit" > "$dir.tmp/COMMIT"
# the sources the bundle was made beside: a job refuses a bundle made for other ones
sources_digest > "$dir.tmp/SOURCES"
echo "$pyver" > "$dir.tmp/PYTHON"
size=$(du -sk "$dir.tmp" | cut -f1)
if [ "$size" -gt $((MAX_MIB * 1024)) ]; then
  rm -rf "$dir.tmp"
  die "the bundle would take $((size / 1024)) MiB, over $MAX_MIB MiB"
fi
rm -rf "$dir"
mv "$dir.tmp" "$dir"
echo "gpu_bundle: $kept wheels for Python $pyver, $((size / 1024)).$(( (size % 1024) * 10 / 1024 )) MiB in $dir (commit $(cut -c1-12 "$dir/COMMIT"))"
