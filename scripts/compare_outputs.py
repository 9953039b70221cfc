"""Which recorded outputs a re-record changed: every notebook against its version at a commit.

    .venv/bin/python scripts/compare_outputs.py dcf4dd3            # notebooks/ against dcf4dd3's
    .venv/bin/python scripts/compare_outputs.py HEAD --dir results  # a run's notebooks against HEAD
    .venv/bin/python scripts/compare_outputs.py HEAD --dir DIR --portable  # as on another platform

Compares each code cell's outputs after the rewrites nbval applies (tests/nbval_sanitize.cfg:
wall times, addresses, temporary paths, run keys), so what it lists is what nbval would see
differ; images are compared byte for byte, widget ids (new at every run) are left out.  Prints
one line per notebook and, for each output that differs, its cell and the first characters of
both texts from a little before the first difference; exits 1 when any differs.  With
``--portable``, the comparison the test command makes on another numeric platform
(rt_lib/claims/portable.py): numbers masked too (tests/nbval_sanitize_portable.cfg), images left out, and
every claim line's status and numbers checked against the recording's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from rt_lib.claims.portable import notebook_differences

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the commit whose notebooks/ are the reference")
    parser.add_argument("--dir", type=Path, default=ROOT / "notebooks",
                        help="the notebooks to compare (default: notebooks/); a results folder "
                             "is searched for <name>/<name>.ipynb")
    parser.add_argument("--portable", action="store_true",
                        help="compare as on another numeric platform: numbers masked, images "
                             "left out, claims by status and tolerance (rt_lib/claims/portable.py)")
    args = parser.parse_args()
    changed = 0
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        new = args.dir / path.name
        if not new.is_file():
            new = args.dir / path.stem / path.name
        if not new.is_file():
            print(f"{path.stem}: not in {args.dir}")
            continue
        old = subprocess.run(["git", "show", f"{args.rev}:notebooks/{path.name}"], cwd=ROOT,
                             capture_output=True, text=True)
        if old.returncode:
            print(f"{path.stem}: not at {args.rev}")
            continue
        differ = notebook_differences(json.loads(old.stdout), json.loads(new.read_text()),
                                      args.portable)
        changed += bool(differ)
        print(f"{path.stem}: {'the same outputs' if not differ else f'{len(differ)} differ'}")
        for cell, kind, before, after in differ:
            if kind.startswith("image/"):
                print(f"  cell {cell}: {kind} differs")
            elif kind == "claim":
                print(f"  cell {cell}: {before}")
            else:  # around the first character that differs
                at = next((i for i, (x, y) in enumerate(zip(before, after)) if x != y),
                          min(len(before), len(after)))
                start = max(at - 60, 0)
                print(f"  cell {cell}: {kind}, from character {at}\n"
                      f"    was: {before[start:at + 100]!r}\n    now: {after[start:at + 100]!r}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
