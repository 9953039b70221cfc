"""Which recorded outputs a re-record changed: every notebook against its version at a commit.

    .venv/bin/python scripts/compare_outputs.py dcf4dd3            # notebooks/ against dcf4dd3's
    .venv/bin/python scripts/compare_outputs.py HEAD --dir results  # a run's notebooks against HEAD

Compares each code cell's outputs after the rewrites nbval applies (tests/nbval_sanitize.cfg:
wall times, addresses, temporary paths, run keys), so what it lists is what nbval would see
differ; images are compared byte for byte, widget ids (new at every run) are left out.  Prints
one line per notebook and, for each output that differs, its cell and the first characters of
both texts from a little before the first difference; exits 1 when any differs.
"""

from __future__ import annotations

import argparse
import configparser
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
WIDGET = "application/vnd.jupyter.widget-view+json"


def rules() -> list[tuple[re.Pattern, str]]:
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(SANITIZE)
    return [(re.compile(cfg[s]["regex"]), cfg[s]["replace"]) for s in cfg.sections()]


def outputs(notebook: dict, subs: list[tuple[re.Pattern, str]]) -> list[tuple[int, str, str]]:
    """(cell index, kind, content) of every code cell's outputs, texts sanitized."""
    found = []
    for i, cell in enumerate(notebook["cells"]):
        for out in cell.get("outputs", []) if cell["cell_type"] == "code" else []:
            items = [("text", out["text"])] if "text" in out else []
            items += [(k, v) for k, v in out.get("data", {}).items() if k != WIDGET]
            if out.get("output_type") == "error":
                items.append(("error", out.get("ename", "")))
            for kind, value in items:
                text = "".join(value) if isinstance(value, list) else str(value)
                if not kind.startswith("image/"):
                    for pattern, replace in subs:
                        text = pattern.sub(replace, text)
                found.append((i, kind, text))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rev", help="the commit whose notebooks/ are the reference")
    parser.add_argument("--dir", type=Path, default=ROOT / "notebooks",
                        help="the notebooks to compare (default: notebooks/); a results folder "
                             "is searched for <name>/<name>.ipynb")
    args = parser.parse_args()
    subs, changed = rules(), 0
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
        a, b = outputs(json.loads(old.stdout), subs), outputs(json.loads(new.read_text()), subs)
        differ = [(x, y) for x, y in zip(a, b) if x != y]
        if len(a) != len(b):
            differ.append(((None, f"{len(a)} outputs", ""), (None, f"{len(b)} outputs", "")))
        changed += bool(differ)
        print(f"{path.stem}: {'the same outputs' if not differ else f'{len(differ)} differ'}")
        for (cell, kind, before), (_, _, after) in differ:
            if kind.startswith("image/"):
                print(f"  cell {cell}: {kind} differs")
            else:  # around the first character that differs
                at = next((i for i, (x, y) in enumerate(zip(before, after)) if x != y),
                          min(len(before), len(after)))
                start = max(at - 60, 0)
                print(f"  cell {cell}: {kind}, from character {at}\n"
                      f"    was: {before[start:at + 100]!r}\n    now: {after[start:at + 100]!r}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
