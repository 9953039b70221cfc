"""The numeric platform: what decides the last bits of every number a notebook computes.

Two machines give bit-identical notebook outputs only where their float kernels do: the same
torch, the same ATen CPU capability, the same BLAS library taking the same code path, the same
threads.  No setting makes MKL on an Intel Xeon and on an AMD EPYC agree everywhere
(docs/reliability.md, "Bits across CPUs"), and a training run grows a last-bit difference into
another seed's numbers.  So the committed notebooks carry the fingerprint of the platform they
were recorded on (``metadata.rt_platform``), and the test command compares outputs bit for bit
only where this machine's fingerprint matches it (``strict``); elsewhere it compares them
``portable``: text with numbers masked, every claim's status exactly, its numbers within the
claim's tolerance (:mod:`rt_lib.claims.portable`).

The fingerprint holds the descriptive fields (CPU, ATen capability, BLAS and its code-path
setting, torch, threads) and sha256 hashes of a few fixed kernel results at the shapes we train:
a float32 matmul, softmax, layer norm and one AdamW step.  Two platforms *match* when torch's
version, the threads and every kernel hash agree: the hashes are what decide, the CPU's name
only explains (an Intel and an AMD machine whose kernels agree would reproduce each other).

    python -m rt_lib.runtime.fingerprint            # this machine's fingerprint, against the recording's
    python -m rt_lib.runtime.fingerprint --mode     # strict or portable, the why on stderr
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import torch

from rt_lib.runtime.context import env_threads
from rt_lib.runtime.io import PROJECT_ROOT

#: The committed notebook metadata key that holds the fingerprint they were recorded under.
METADATA_KEY = "rt_platform"
#: ``RT_PLATFORM``: ``strict``, ``portable`` or ``auto`` (unset: auto, chosen by fingerprint).
MODE_ENV = "RT_PLATFORM"
MODES = ("auto", "strict", "portable")
#: The settings that change which kernel code path runs (scripts/kernel_env.sh sets them).
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA", "OPENBLAS_CORETYPE")
#: The fields that must agree for two platforms to match (the rest only describe).
DECIDING = ("torch", "threads", "kernels")


def _ask(command: list[str]) -> str:
    """What a system command prints ("" where it is missing or fails)."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _cpuinfo() -> dict[str, str]:
    """Vendor, family, model and name of the CPU as the OS's own tool says them (``lscpu`` on
    Linux, ``sysctl`` on macOS); only descriptive, the kernel hashes decide a match."""
    info = {"vendor": "", "family": "", "model": "", "name": platform.processor()}
    keys = {"Vendor ID": "vendor", "CPU family": "family", "Model": "model", "Model name": "name"}
    for line in _ask(["lscpu"]).splitlines():
        key, _, value = line.partition(":")
        if key.strip() in keys and value.strip():
            info[keys[key.strip()]] = value.strip()
    if sys.platform == "darwin":
        info["name"] = _ask(["sysctl", "-n", "machdep.cpu.brand_string"]).strip() or info["name"]
    return info


def _blas() -> str:
    """torch's BLAS as its build reports it (``mkl``, ``openblas``, ``accelerate``...) and MKL's
    version line where MKL is in."""
    config = torch.__config__.show()
    blas = next((part.split("=", 1)[1] for part in config.replace(",", "\n").split()
                 if part.startswith("BLAS_INFO=")), "unknown")
    mkl = next((line.split("Version", 1)[1].split()[0] for line in config.splitlines()
                if "Math Kernel Library Version" in line), "")
    return f"{blas} {mkl}" if mkl else blas


def _hash(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().contiguous().numpy().tobytes()).hexdigest()[:16]


def kernel_hashes() -> dict[str, str]:
    """sha256 (16 hex digits) of fixed kernel results, at the threads notebooks run with: a
    matmul at the shape of miiii's MLP over its full batch (p = 37: 1,369 rows, d_model 128,
    d_mlp 512), softmax and layer norm over it, and one AdamW step on a [128, 512] weight."""
    previous = torch.get_num_threads()
    torch.set_num_threads(env_threads())
    try:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(1369, 128, generator=g)
        w = torch.randn(128, 512, generator=g) / 128 ** 0.5
        h = x @ w
        out = {"matmul": _hash(h), "softmax": _hash(torch.softmax(h, -1)),
               "layer_norm": _hash(torch.nn.functional.layer_norm(h, (512,)))}
        p = torch.nn.Parameter(w.clone())
        opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=1.0)
        p.grad = torch.randn(128, 512, generator=g)
        opt.step()
        out["adamw"] = _hash(p)
        return out
    finally:
        torch.set_num_threads(previous)


def fingerprint() -> dict[str, Any]:
    """This process's numeric platform (see the module docstring)."""
    return {
        "cpu": {**_cpuinfo(), "machine": platform.machine()},
        "aten_capability": torch.backends.cpu.get_cpu_capability(),
        "blas": _blas(),
        "kernel_env": {k: os.environ.get(k, "") for k in KERNEL_ENV},
        "torch": torch.__version__,
        "threads": env_threads(),
        "kernels": kernel_hashes(),
    }


def describe(fp: dict[str, Any]) -> str:
    """One line: the CPU, its kernels and BLAS, torch, threads."""
    cpu = fp.get("cpu", {})
    name = cpu.get("name") or cpu.get("machine") or "unknown CPU"
    cbwr = fp.get("kernel_env", {}).get("MKL_CBWR")
    return (f"{name} ({cpu.get('vendor') or '?'}), ATen {fp.get('aten_capability')}, "
            f"{fp.get('blas')}{f', MKL_CBWR={cbwr}' if cbwr else ''}, torch {fp.get('torch')}, "
            f"{fp.get('threads')} thread(s)")


def differences(here: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
    """What keeps ``here`` from reproducing ``recorded`` bit for bit: each deciding field that
    differs (kernel hashes by kernel name); empty when they match."""
    out = []
    for key in DECIDING:
        a, b = here.get(key), recorded.get(key)
        if key == "kernels" and isinstance(a, dict) and isinstance(b, dict):
            names = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
            if names:
                out.append(f"kernel results differ: {', '.join(names)}")
        elif a != b:
            out.append(f"{key}: {a} here, {b} recorded")
    return out


def notebook_fingerprint(path: Path) -> dict[str, Any] | None:
    """The fingerprint a notebook was recorded under (None: recorded before there was one)."""
    meta = json.loads(Path(path).read_text()).get("metadata", {})
    return meta.get(METADATA_KEY)


def recorded(notebooks: Path | None = None) -> dict[str, dict[str, Any] | None]:
    """{notebook name: its recorded fingerprint} for the committed notebooks."""
    folder = notebooks or PROJECT_ROOT / "notebooks"
    return {p.stem: notebook_fingerprint(p) for p in sorted(folder.glob("[0-9][0-9]_*.ipynb"))}


def choose_mode(here: dict[str, Any], recordings: dict[str, dict[str, Any] | None],
                requested: str | None = None) -> tuple[str, str]:
    """(``strict`` or ``portable``, why): strict only where every committed notebook was recorded
    under a fingerprint that this machine's matches; ``requested`` (``$RT_PLATFORM``) forces one."""
    requested = (requested or "auto").strip().lower()
    if requested not in MODES:
        raise ValueError(f"{MODE_ENV} must be one of {', '.join(MODES)}, got {requested!r}")
    if requested != "auto":
        return requested, f"{MODE_ENV}={requested}"
    missing = sorted(n for n, fp in recordings.items() if fp is None)
    if missing:
        return "portable", (f"{len(missing)} of {len(recordings)} notebooks recorded without a "
                            f"fingerprint, e.g. {missing[0]}")
    problems: dict[str, list[str]] = {}
    for name, fp in recordings.items():
        diff = differences(here, fp)  # type: ignore[arg-type]
        if diff:
            problems.setdefault("; ".join(diff), []).append(name)
    if problems:
        why = " | ".join(f"{', '.join(names)}: {diff}" for diff, names in problems.items())
        return "portable", f"this machine does not reproduce the recording's bits ({why})"
    first = next(iter(recordings.values()), None) or {}
    return "strict", f"this machine's kernels match the recording's ({describe(first)})"


@cache
def this_platform() -> dict[str, Any]:
    return fingerprint()


def status_line(notebooks: Path | None = None) -> str:
    """The line ``--list`` and the test command print: which comparison this machine gets."""
    mode, why = choose_mode(this_platform(), recorded(notebooks), os.environ.get(MODE_ENV))
    return f"platform: {describe(this_platform())}; comparison: {mode} ({why})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rt_lib.runtime.fingerprint",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", action="store_true",
                        help="print strict or portable (what nbval compares), the why on stderr")
    parser.add_argument("--json", action="store_true", help="print the fingerprint as JSON")
    args = parser.parse_args(argv)
    try:
        mode, why = choose_mode(this_platform(), recorded(), os.environ.get(MODE_ENV))
    except ValueError as err:
        print(f"rt_lib.runtime.fingerprint: error: {err}", file=sys.stderr)
        return 2
    if args.mode:
        print(f"platform: {describe(this_platform())}", file=sys.stderr)
        print(f"comparison: {mode}: {why}", file=sys.stderr)
        print(mode)
    elif args.json:
        print(json.dumps(this_platform(), indent=1, sort_keys=True))
    else:
        print(f"platform: {describe(this_platform())}\ncomparison: {mode}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
