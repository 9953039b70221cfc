"""Write every notebook's parameters cell from its experiment's Params class.

    .venv/bin/python scripts/parameters_cells.py          # rewrite the cells that differ
    .venv/bin/python scripts/parameters_cells.py --check  # exit 1 naming those that differ

The Params class (rt_lib/experiments/<module>.py) is the one place of a notebook's defaults and
their comments (:func:`rt_lib.runtime.params.parameters_cell`); tests/runtime/test_params.py fails when a
committed cell is not what this writes.  Only the cell's source changes: outputs stay, so no
re-recording is needed unless a default changed (then re-record that notebook).
"""

from __future__ import annotations

import argparse
import json
import sys

from rt_lib.pipeline.registry import registry
from rt_lib.runtime.io import atomic_write_text, available_notebooks


def parameters_cell_of(notebook: dict) -> dict:
    return next(c for c in notebook["cells"]
                if "parameters" in c.get("metadata", {}).get("tags", []))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report cells that differ")
    args = parser.parse_args()
    differ = []
    for name, path in available_notebooks().items():
        if name not in registry():
            continue
        notebook = json.loads(path.read_text())
        cell = parameters_cell_of(notebook)
        want = registry()[name].parameters_cell()
        if "".join(cell["source"]) == want:
            continue
        differ.append(name)
        if not args.check:
            cell["source"] = want.splitlines(keepends=True)
            atomic_write_text(path, json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    verb = "differ from their Params classes" if args.check else "rewritten from their Params classes"
    print(f"{len(differ)} parameters cell(s) {verb}" + (f": {', '.join(differ)}" if differ else ""))
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
