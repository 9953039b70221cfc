#!/usr/bin/env bash
# Set up .venv on a GPU machine WITHOUT internet access that has its own PyTorch (a CUDA build in
# its system python3), from a wheelhouse made on a connected machine by scripts/make_wheelhouse.sh:
#
#   scripts/setup_offline.sh DIR          (PYTHON=/path/to/python3 picks another base python)
#
# What it does, and why:
# - .venv is created with --system-site-packages from the machine's python3, so the machine's own
#   torch (built for its CUDA driver) is imported from there.  torch is never installed: the
#   wheelhouse has none, and requirements.txt's torch==2.13.0 is a CPU build that would replace it.
# - Everything else is installed from DIR only: --no-index, PIP_NO_INDEX=1, and no pip
#   configuration files (PIP_CONFIG_FILE=/dev/null: a configured index, find-links URL or
#   constraint file would reach for the network or contradict the wheelhouse's closed set).
# - Pins that differ from the machine's own packages: the wheelhouse wins for everything but torch.
#   Its versions are installed into .venv and shadow the system's (pandas, matplotlib, pyyaml, ...;
#   the system's copies are left untouched): the notebooks get the versions they are tested with.
#   numpy too: numpy==2.4.6 shadows the system numpy, and there is no exception to make, because
#   pandas 3.1.1 (pinned) needs numpy >= 2.0.2.  A torch built against NumPy 1.x (official Linux
#   wheels before 2.3, some old distribution builds) cannot exchange arrays with NumPy 2 and
#   cannot be rebuilt offline; rather than quietly downgrade numpy and pandas away from the pins,
#   the check below (torch.from_numpy and .numpy() in .venv) fails and says to use a newer torch.
# - Once every check passes, it writes the stamp scripts/setup.sh keeps (.venv/.rt-companion-
#   installed, the hash of requirements.txt and pyproject.toml; and .venv/.rt-companion-offline), so
#   that ./run_all.sh, which calls setup.sh first, finds the set-up done and does not run
#   `pip install -r requirements.txt` (network, CPU torch).  A failed run removes the stamp.  After
#   a change to requirements.txt or pyproject.toml, make a new wheelhouse and rerun this script.
# - rt_lib is installed editable (--no-deps -e ., built with setuptools from DIR), as setup.sh does;
#   --no-deps because pyproject.toml names torch==2.13.0, which the machine's torch need not be.
# - At the end it prints torch's version, whether CUDA is usable and the GPU's name, and fails if
#   torch is missing, or a CPU build on a machine with nvidia-smi, or cannot see a GPU nvidia-smi
#   lists (a driver older than torch's CUDA, mostly).  Rerunning it is safe and quick.
set -euo pipefail

die() { echo "setup_offline: error: $*" >&2; exit 1; }
say() { echo "setup_offline: $*"; }

[ $# -eq 1 ] && [ "$1" != "-h" ] && [ "$1" != "--help" ] || { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ -d "$1" ] || die "no folder $1 (the wheelhouse made by scripts/make_wheelhouse.sh)"
wh=$(cd "$1" && pwd)
req=$wh/requirements-offline.txt
[ -f "$req" ] || die "$wh has no requirements-offline.txt: not a wheelhouse from scripts/make_wheelhouse.sh"
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
t0=$SECONDS

# Never the network: --no-index below, and the same through the environment for the pip that
# `pip install -e .` starts to build rt_lib.  find-links is only ever DIR.
export PIP_NO_INDEX=1 PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
unset PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS PIP_CONSTRAINT PIP_REQUIREMENT
pip_offline=(--no-index --find-links "$wh")

# --- the machine's python and its torch, before anything is created ---------------------------
command -v "$PYTHON" >/dev/null || die "no '$PYTHON' on this machine: set PYTHON=/path/to/the/python3 that has torch"
want_py=$(sed -n 's/^# target-python: *//p' "$req")
want_plat=$(sed -n 's/^# target-platform: *//p' "$req")
have_py=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
[ -z "$want_py" ] || [ "$want_py" = "$have_py" ] ||
  die "the wheelhouse is for Python $want_py, $PYTHON is $have_py: on the connected machine run" \
      "scripts/make_wheelhouse.sh --python-version $have_py"
if [[ "$want_plat" =~ ^manylinux_2_([0-9]+)_ ]]; then
  # wheels for a newer glibc than the machine's fail at import time with an obscure symbol error
  glibc=$("$PYTHON" -c 'import platform; print(platform.libc_ver()[1] or "0.0")')
  [ "$(cut -d. -f1 <<< "$glibc")" -gt 2 ] || [ "$(cut -d. -f2 <<< "$glibc")" -ge "${BASH_REMATCH[1]}" ] ||
    die "the wheelhouse is for glibc >= 2.${BASH_REMATCH[1]} ($want_plat), this machine has $glibc: on the" \
        "connected machine run scripts/make_wheelhouse.sh --platform manylinux_${glibc/./_}_$(uname -m)"
fi

# Python's answers are read from lines tagged "@@ ": a warning printed on import is not an answer.
tagged() { sed -n 's/^@@ //p' <<< "$1" | tail -n 1; }
torch_info=$("$PYTHON" -c 'import torch; print("@@", torch.__version__, torch.version.cuda or "-", getattr(torch.version, "hip", None) or "-", torch.__file__)' 2>&1) ||
  die "$PYTHON cannot import torch.  This set-up uses the machine's own PyTorch (the build for its CUDA)" \
      "and never installs one: install it into that python first, or point PYTHON= at the python" \
      "that has it.  The error: $(echo "$torch_info" | tail -n 1)"
read -r torch_ver torch_cuda torch_hip torch_file <<< "$(tagged "$torch_info")"
say "base: $PYTHON (Python $have_py), torch $torch_ver (CUDA $torch_cuda, ROCm $torch_hip) from $torch_file"
if [ "$torch_cuda" = "-" ] && [ "$torch_hip" = "-" ] && command -v nvidia-smi >/dev/null; then
  die "torch $torch_ver in $PYTHON is a CPU build, but this machine has nvidia-smi: the notebooks would" \
      "train on the CPU.  Install the PyTorch build for this machine's CUDA driver into $PYTHON (or set" \
      "PYTHON= to the python that has it), then rerun."
fi

# --- .venv, sharing the machine's site-packages ------------------------------------------------
if [ -e .venv ]; then
  # a .venv from scripts/setup.sh (or copied from elsewhere) would not see the machine's torch
  grep -Eqs '^include-system-site-packages *= *true' .venv/pyvenv.cfg ||
    die ".venv exists but was not made with --system-site-packages (scripts/setup.sh's, or copied" \
        "from elsewhere), so it cannot see this machine's torch: move it away (mv .venv .venv.old) and rerun"
  [ "$(.venv/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$have_py" ] ||
    die ".venv is not from $PYTHON (Python $have_py): move it away (mv .venv .venv.old) and rerun"
  say "reusing .venv (made with --system-site-packages)"
else
  say "creating .venv from $PYTHON with --system-site-packages"
  # a half-made .venv (no pip) would be "reused" by the next run: remove it (it did not exist before)
  "$PYTHON" -m venv --system-site-packages .venv || {
    rm -rf .venv
    die "$PYTHON could not create a venv (above; on Debian/Ubuntu the python3-venv package is missing)"
  }
fi

# --- the wheelhouse's packages, then rt_lib ----------------------------------------------------
# Until every check below passes, this .venv must not look set up to scripts/setup.sh / run_all.sh.
rm -f .venv/.rt-companion-installed .venv/.rt-companion-offline
say "installing requirements-offline.txt from $wh (no index)"
# --no-warn-conflicts: pip would report, on every rerun, that rt-companion (pyproject.toml) wants
# torch==2.13.0 where the machine has its own; what matters is checked below, in .venv itself.
.venv/bin/python -m pip install --quiet --no-warn-conflicts "${pip_offline[@]}" -r "$req" ||
  die "pip could not install from $wh alone (above): a wheel is missing for this machine; make the" \
      "wheelhouse again for Python $have_py and this platform"
.venv/bin/python -m pip install --quiet "${pip_offline[@]}" --no-deps -e . ||
  die "installing rt_lib (pip install -e .) failed (above); the wheelhouse must hold setuptools"

# --- checks in .venv, as ./run_all.sh will run -------------------------------------------------
venv_dir=$(cd .venv && pwd -P)
check=$(.venv/bin/python - "$venv_dir" <<'EOF' 2>&1
import os, sys
import numpy, torch
venv = sys.argv[1]
where = os.path.realpath(torch.__file__)
if where.startswith(venv + os.sep):
    sys.exit(f"torch was imported from .venv ({where}), not from the machine's python")
# A torch compiled against NumPy 1.x imports under NumPy 2 but cannot exchange arrays with it.
try:
    ok = float(torch.from_numpy(numpy.arange(3.0)).sum()) == 3.0 and float(torch.arange(3.0).numpy().sum()) == 3.0
except Exception:  # RuntimeError: Numpy is not available
    ok = False
if not ok:
    sys.exit(f"NUMPY_ABI torch {torch.__version__} cannot exchange arrays with numpy {numpy.__version__}")
import rt_lib, papermill, optuna, submitit, tokenizers  # noqa: F401,E401  what the base python lacks
print("@@ torch", torch.__version__, "from", torch.__file__, "| numpy", numpy.__version__, "| rt_lib from", os.path.dirname(rt_lib.__file__))
EOF
) || {
  if [[ "$check" == *NUMPY_ABI* ]]; then
    die "torch $torch_ver was built against NumPy 1.x and cannot use numpy $(.venv/bin/python -c 'import numpy; print(numpy.__version__)' 2>/dev/null)," \
        "which the project's pins need (pandas 3.1.1 needs numpy >= 2.0.2).  Install a torch built against" \
        "NumPy 2 (official Linux wheels 2.3 and later) into $PYTHON.  Details: $(echo "$check" | tail -n 1)"
  fi
  die "the check in .venv failed: $check"
}
say "in .venv: $(tagged "$check")"

gpu=$(.venv/bin/python -c '
import torch
ok = torch.cuda.is_available()
print("@@", ok, torch.cuda.get_device_name(0) if ok else "-")' 2>&1) || die "torch.cuda failed: $gpu"
read -r cuda_ok gpu_name <<< "$(tagged "$gpu")"
say "torch.__version__ = $torch_ver"
say "torch.cuda.is_available() = $cuda_ok"
say "GPU: $gpu_name"
if [ "$cuda_ok" != "True" ] && command -v nvidia-smi >/dev/null; then
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
    die "nvidia-smi lists a GPU but torch $torch_ver (CUDA $torch_cuda) cannot use it: the driver" \
        "($driver) is likely older than this torch's CUDA needs, or CUDA_VISIBLE_DEVICES hides it" \
        "(='${CUDA_VISIBLE_DEVICES-unset}')"
  fi
  say "warning: nvidia-smi is here but lists no GPU (a login node?): the notebooks would run on the CPU"
elif [ "$cuda_ok" != "True" ]; then
  say "note: no GPU visible and no nvidia-smi on this machine: the notebooks would run on the CPU"
fi

# The stamp scripts/setup.sh compares (same hash, same file), so run_all.sh does not reinstall.
cat requirements.txt pyproject.toml | sha256sum | cut -d' ' -f1 > .venv/.rt-companion-installed
# Says this .venv is the offline kind, for anyone (or any script) deciding whether to touch it.
echo "wheelhouse $wh, torch $torch_ver from $PYTHON, $(date -u +%Y-%m-%dT%H:%MZ)" > .venv/.rt-companion-offline
say "done in $((SECONDS - t0)) s; next:"
echo "    ./run_all.sh --profile gpu"
