"""Claims on another numeric platform, emulated here: the CPU profile under other kernel paths.

    source scripts/data_env.sh  # RT_TINYSTORIES, as ./run_all.sh sets it
    .venv/bin/python benchmarks/platform_claims.py                       # avx512: every notebook
    .venv/bin/python benchmarks/platform_claims.py --path aten-default --only 13
    .venv/bin/python benchmarks/platform_claims.py --path avx512 --no-run  # read a run made before

A reader's CPU rounds differently from the recording machine's (another MKL code path, other
ATen kernels); training grows that into another seed's numbers.  This runs the CPU profile with
one of :data:`PATHS` instead of scripts/kernel_env.sh's (each path named by what it changes),
into ``benchmarks/results/platform/<path>/`` (never results/), then prints, per notebook and claim,
the committed recording's status beside this path's, and the portable comparison the test command
would make there (rt_lib/claims/portable.py).  Every status must match: a claim that flips with the
rounding is a claim without a margin.  Prints; asserts nothing; exits 1 when a status differs.

The paths: ``avx512`` (ATen's AVX-512 kernels, what an AVX-512 CPU runs without the project's
pin: costs nothing), ``aten-default`` (ATen's scalar kernels: matmul and softmax change too;
about 1.4x per step), ``mkl-compatible`` (MKL's COMPATIBLE code path: 1.8-3.3x per step).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from rt_lib.claims.portable import (
    claim_lines,
    claim_problems,
    claim_statuses,
    notebook_differences,
    numbers,
    stream_texts,
    tolerance_of,
)
from rt_lib.runtime.fingerprint import differences, fingerprint, recorded

ROOT = Path(__file__).resolve().parents[1]
#: scripts/kernel_env.sh's settings: the recording's kernel path, which each path changes.
RECORDED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2",
            "OPENBLAS_CORETYPE": "Haswell"}
PATHS = {
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
    "aten-default": {"ATEN_CPU_CAPABILITY": "default"},
    "mkl-compatible": {"MKL_CBWR": "COMPATIBLE"},
}


def path_env(name: str) -> dict[str, str]:
    return {**os.environ, **RECORDED, **PATHS[name], "RT_THREADS": "1", "TQDM_DISABLE": "1"}


def platform_of(name: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "rt_lib.runtime.fingerprint", "--json"],
                         env=path_env(name), capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def deviations(ref: dict, new: dict) -> dict[str, tuple[float, float]]:
    """{claim id: (largest absolute, largest relative difference)} of its numbers, recorded
    against this run (claims whose count of numbers differs are left out)."""
    def lines(nb: dict) -> dict[str, str]:
        return {cid: rest for text in stream_texts(nb).values()
                for cid, (_, rest) in claim_lines(text).items()}
    a, b, out = lines(ref), lines(new), {}
    for cid in a.keys() & b.keys():
        x, y = numbers(a[cid]), numbers(b[cid])
        if len(x) == len(y):
            diffs = [(abs(u - v), abs(u - v) / max(abs(u), abs(v)) if max(abs(u), abs(v)) else 0.0)
                     for u, v in zip(x, y)]
            out[cid] = (max((d[0] for d in diffs), default=0.0),
                        max((d[1] for d in diffs), default=0.0))
    return out


def _text_of(nb: dict) -> str:
    return "".join(stream_texts(nb).values())


def _as_notebook(table: Path, path: Path) -> Path:
    """A one-cell notebook printing the claim lines of a run's ``claims.csv``, as its notebook
    printed them (rt_lib.claims.ledger.Claim's str)."""
    import dataclasses

    import pandas as pd

    from rt_lib.claims.ledger import Claim

    rows = pd.read_csv(table, keep_default_na=False)
    names = {f.name for f in dataclasses.fields(Claim)}
    lines = [str(Claim(**{k: (v in (True, "True")) if k == "own" else str(v)
                          for k, v in row.items() if k in names})) for row in rows.to_dict("records")]
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "\n".join(lines) + "\n"}]}]}))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--path", choices=sorted(PATHS), default="avx512")
    parser.add_argument("--only", help="notebooks, as ./run_all.sh --only takes them")
    parser.add_argument("--no-run", action="store_true", help="compare a run made before")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--results", type=Path, metavar="DIR",
                        help="with --no-run: the results root of a run made otherwise, e.g. the "
                             "test command's ($RT_RESULTS of RT_PLATFORM=portable ./run_tests.sh "
                             "notebooks under the path's settings): claims read from claims.csv")
    args = parser.parse_args()
    results = args.results or ROOT / "benchmarks" / "results" / "platform" / args.path
    env = path_env(args.path) | {"RT_RESULTS": str(results)}
    here = platform_of(args.path)
    recordings = recorded()
    first = next((f for f in recordings.values() if f), None)
    diff = differences(here, first) if first else ["no recorded fingerprint"]
    print(f"path {args.path}: {' '.join(f'{k}={v}' for k, v in PATHS[args.path].items())}; "
          f"against the recording: {'; '.join(diff) or 'the same kernels (not another platform)'}",
          flush=True)
    if not args.no_run:
        command = [sys.executable, "-m", "rt_lib.pipeline", "--force", "--jobs", str(args.jobs)]
        command += ["--only", args.only] if args.only else []
        start = time.perf_counter()
        run = subprocess.run(command, cwd=ROOT, env=env)
        print(f"run: exit {run.returncode}, {time.perf_counter() - start:.0f} s", flush=True)
    flipped, compared = 0, 0
    print(f"\n{'notebook':<26} {'claim':<34} {'recorded':<12} {args.path:<12} "
          f"{'largest diff':<18} {'tolerance':<22} portable comparison")
    for book in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        executed = results / book.stem / book.name
        table = results / book.stem / "claims.csv"
        if not executed.is_file() and table.is_file():  # a run that kept no notebook (nbval's)
            executed = _as_notebook(table, results / f".{book.stem}.claims.ipynb")
        if not executed.is_file():
            failed = executed.with_name(f"{book.stem}.failed.ipynb")
            if failed.is_file() or not args.only:
                print(f"{book.stem:<26} {'(did not run through)' if failed.is_file() else '(not run)'}")
                flipped += failed.is_file()
            continue
        ref, new = json.loads(book.read_text()), json.loads(executed.read_text())
        if executed.name.endswith(".claims.ipynb"):  # claims only: nbval compared the rest
            text = "".join(stream_texts(ref).values())
            problems = [(None, "claim", x, "") for x in claim_problems(text, _text_of(new))]
            executed.unlink()
        else:
            problems = notebook_differences(ref, new, portable=True)
        a, b = claim_statuses(ref), claim_statuses(new)
        moved = deviations(ref, new)
        verdict = "passes" if not problems else f"{len(problems)} differ"
        for cid in sorted(a.keys() | b.keys()):
            compared += 1
            same = a.get(cid) == b.get(cid)
            flipped += not same
            diff = (f"abs {moved[cid][0]:.3g} rel {moved[cid][1]:.2f}" if cid in moved
                    else "numbers differ")
            print(f"{book.stem:<26} {cid:<34} {a.get(cid, '-'):<12} {b.get(cid, '-'):<12} "
                  f"{diff:<18} {str(tolerance_of(cid)):<22} {'' if same else 'FLIPPED '}{verdict}")
        for cell, kind, before, after in problems:
            print(f"    cell {cell} {kind}: {before[:160]!r}" + (f" / now {after[:160]!r}" if after else ""))
    print(f"\n{compared} claim statuses compared, {flipped} differ from the recording "
          f"(path {args.path}; this machine: {fingerprint()['cpu'].get('name')})")
    return 1 if flipped else 0


if __name__ == "__main__":
    sys.exit(main())
