#!/usr/bin/env bash
# Download everything the project needs, except torch, into a folder of wheels (a "wheelhouse")
# that scripts/setup_offline.sh installs on a machine without internet access.  Run it HERE, on a
# machine that can reach the package index, for the TARGET machine's Python version and platform:
#
#   scripts/make_wheelhouse.sh [--python-version 3.X] [--platform manylinux_2_28_x86_64] [DIR]
#
#   DIR               where the wheels go (default: wheelhouse/ in the repository, git-ignored)
#   --python-version  the target's `python3 --version`, major.minor (default: that of $PYTHON here)
#   --platform        the target's wheel platform (default manylinux_2_28_x86_64: glibc >= 2.28,
#                     which any machine running a current PyTorch wheel already has)
#   PYTHON=...        the python whose pip downloads (default python3); best the target's version
#
# Why torch is left out: the GPU machine already has a PyTorch built for its CUDA driver (the
# pip/conda build that matches it, or one its administrators installed).  requirements.txt pins
# torch==2.13.0, which installs as a CPU build; put into the wheelhouse it would replace the GPU
# build and the notebooks would silently train on the CPU.  So torch and the packages that only
# torch needs (nvidia-*, triton: its CUDA runtime) are excluded, and setup_offline.sh uses the
# machine's own torch through a venv made with --system-site-packages.
#
# The wheelhouse holds: every other pin of requirements.txt and all their dependencies as binary
# wheels for the target (--only-binary: nothing is compiled, on either machine); setuptools, which
# `pip install -e .` needs to build rt_lib offline (pyproject.toml's build-system requires); the
# project's own wheel (rt_companion-*.whl, for installing rt_lib without the repository, e.g. in a
# container); and requirements-offline.txt: requirements.txt's pins minus torch, with the target
# recorded in its header (setup_offline.sh checks the machine against it).
set -euo pipefail

usage() { sed -n '6,13p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
die() { echo "make_wheelhouse: error: $*" >&2; exit 1; }

PYTHON=${PYTHON:-python3}
pyver=""
platform="manylinux_2_28_x86_64"
dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --python-version) [ $# -ge 2 ] || die "--python-version needs a value, e.g. 3.11"; pyver=$2; shift 2 ;;
    --python-version=*) pyver=${1#*=}; shift ;;
    --platform) [ $# -ge 2 ] || die "--platform needs a value, e.g. manylinux_2_28_x86_64"; platform=$2; shift 2 ;;
    --platform=*) platform=${1#*=}; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "make_wheelhouse: unknown option $1" >&2; usage 2 ;;
    *) [ -z "$dir" ] || die "one DIR only (got '$dir' and '$1')"; dir=$1; shift ;;
  esac
done

repo=$(cd "$(dirname "$0")/.." && pwd)
# DIR as given is relative to where the command was typed, not to the repository
dir=${dir:-$repo/wheelhouse}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

command -v "$PYTHON" >/dev/null || die "no '$PYTHON' here: set PYTHON=/path/to/python3"
host_ver=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
pyver=${pyver:-$host_ver}
[[ "$pyver" =~ ^3\.[0-9]+$ ]] || die "--python-version must look like 3.11 (got '$pyver')"
if [ "$pyver" != "$host_ver" ]; then
  # pip evaluates the dependencies' environment markers (python_version < "3.12", ...) against the
  # python running it, not the target; a mismatch can leave out a backport the target needs (the
  # offline install then fails naming it), so say so now.
  echo "make_wheelhouse: warning: downloading for Python $pyver with Python $host_ver's pip;" \
       "dependency markers follow $host_ver (PYTHON=python$pyver avoids this)" >&2
fi
"$PYTHON" -m pip --version >/dev/null 2>&1 || die "'$PYTHON' has no pip"

# pip accepts a wheel only if one of its platform tags is listed exactly, and names no older glibc
# for a newer one: --platform manylinux_2_28_x86_64 alone would refuse the many wheels tagged
# manylinux2014 (glibc 2.17), and manylinux2014 alone refuses numpy 2.4 (tagged manylinux_2_28
# only).  So list every manylinux tag up to the target's glibc, legacy aliases included.
platform_args=()
if [[ "$platform" =~ ^manylinux_2_([0-9]+)_(.+)$ ]] || [[ "$platform" =~ ^manylinux(2014|2010|1)_(.+)$ ]]; then
  arch=${BASH_REMATCH[2]}
  case "${BASH_REMATCH[1]}" in 2014) glibc_minor=17 ;; 2010) glibc_minor=12 ;; 1) glibc_minor=5 ;; *) glibc_minor=${BASH_REMATCH[1]} ;; esac
  for ((m = glibc_minor; m >= 5; m--)); do platform_args+=(--platform "manylinux_2_${m}_${arch}"); done
  [ "$glibc_minor" -ge 17 ] && platform_args+=(--platform "manylinux2014_${arch}")
  [ "$glibc_minor" -ge 12 ] && platform_args+=(--platform "manylinux2010_${arch}")
  platform_args+=(--platform "manylinux1_${arch}")
else
  platform_args=(--platform "$platform")  # macosx_*, win_amd64, ...: pip expands or takes as is
fi

# A wheelhouse is a closed set: a wheel left over from an earlier run (an older pin's dependency)
# could be picked offline instead of the one this run resolved.  Empty a previous wheelhouse; never
# a folder that is something else.
if [ -n "$(ls -A "$dir")" ]; then
  [ -f "$dir/requirements-offline.txt" ] ||
    die "$dir is not empty and not a wheelhouse (no requirements-offline.txt): name an empty or new folder"
  echo "make_wheelhouse: replacing the earlier wheelhouse in $dir"
  rm -f "$dir"/*.whl "$dir/requirements-offline.txt"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# requirements.txt minus torch (any spelling of a torch line: torch==, torch>=, torch; marker, ...)
torch_line='^[[:space:]]*torch[[:space:]]*([=<>!~;[@]|$)'
grep -Ev "$torch_line" "$repo/requirements.txt" > "$work/requirements-offline.txt"
grep -Eq "$torch_line" "$repo/requirements.txt" || echo "make_wheelhouse: note: requirements.txt names no torch line" >&2
# the build-system requires of pyproject.toml (setuptools>=68), one per line
build_reqs=$(sed -n 's/^requires[[:space:]]*=[[:space:]]*\[\(.*\)\][[:space:]]*$/\1/p' "$repo/pyproject.toml" |
             tr ',' '\n' | tr -d "\"' " | sed '/^$/d')
[ -n "$build_reqs" ] || die "found no [build-system] requires in pyproject.toml"

t0=$SECONDS
echo "make_wheelhouse: downloading for CPython $pyver on $platform into $dir"
# shellcheck disable=SC2086  # build_reqs: one requirement per word, none with spaces
"$PYTHON" -m pip download --quiet --dest "$dir" --only-binary=:all: \
  --implementation cp --python-version "$pyver" "${platform_args[@]}" \
  -r "$work/requirements-offline.txt" $build_reqs ||
  die "pip download failed (above): a pin with no wheel for CPython $pyver on $platform, or no index reachable"

# The exclusion must hold even if a dependency someday pulls torch in: this wheelhouse installed
# offline would then replace the machine's GPU torch.
if ls "$dir" | grep -Eiq '^(torch|triton|nvidia[_-])'; then
  ls "$dir" | grep -Ei '^(torch|triton|nvidia[_-])' >&2
  die "a dependency pulled in torch or its CUDA packages (above); they must not be in the wheelhouse"
fi

# The project's own wheel, built from a copy of the working tree's package files so that nothing
# (build/, *.egg-info) is written into the repository.
mkdir "$work/src"
tar -C "$repo" --exclude=__pycache__ --exclude=.ipynb_checkpoints -cf - pyproject.toml README.md rt_lib |
  tar -xf - -C "$work/src"
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$dir" "$work/src" || die "building the rt_companion wheel failed (above)"

{
  echo "# Written by scripts/make_wheelhouse.sh on $(date -u +%Y-%m-%dT%H:%MZ) from $(cd "$repo" && git rev-parse --short HEAD 2>/dev/null || echo '?')."
  echo "# requirements.txt's pins minus torch: the machine's own torch (built for its CUDA) is used."
  echo "# Install offline with: scripts/setup_offline.sh /path/to/$(basename "$dir")"
  echo "# target-python: $pyver"
  echo "# target-platform: $platform"
  cat "$work/requirements-offline.txt"
} > "$dir/requirements-offline.txt"

n=$(ls "$dir"/*.whl | wc -l)
echo "make_wheelhouse: $n wheels, $(du -sh "$dir" | cut -f1) in $dir ($((SECONDS - t0)) s)"
echo "make_wheelhouse: next: copy $dir and the repository to the GPU machine, then there run"
echo "    scripts/setup_offline.sh <the copied folder>"
