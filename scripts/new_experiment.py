"""Start a new experiment: its module, its notebook and its paper profile's config, ready to run.

    .venv/bin/python scripts/new_experiment.py 16 my_experiment --title "what it shows"

Writes, and refuses to overwrite:

* ``rt_lib/experiments/my_experiment.py``: the parameters (a restart grid of model kinds on an
  example task, modular addition, whose defaults are the CPU profile), ``run``, one claim of our
  own as an example, and the ``EXPERIMENT`` the runner finds;
* ``notebooks/16_my_experiment.ipynb``: the introduction, the parameters cell (written from the
  parameters class, as scripts/parameters_cells.py writes it), the calls and a closing cell;
* ``configs/paper/16_my_experiment.yaml``: the paper profile, every parameter named (required:
  tests/pipeline/test_io_runner.py), to be set to the paper's values.

It runs as it is (``./run_all.sh --only 16``; ``--profile paper --smoke`` in seconds).  Then
replace the example task, parameters and claim with the experiment's own, and record the outputs
nbval compares (``./run_all.sh --only 16 --update-notebooks``); docs/development.md has the rest
(a paper's claim in rt_lib/claims/ledger.yaml, a figure as ``plot_x(ax, ...)`` in
rt_lib/plots/figures.py with a test and its baseline).  ``--root`` writes into another checkout.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import keyword
import re
import sys
import uuid
from pathlib import Path

import yaml

from rt_lib.runtime.io import PROJECT_ROOT
from rt_lib.runtime.params import cell_fields, parameters_cell, plain

MODULE = '''"""Experiment {nn}: {title}.

Written by scripts/new_experiment.py: a restart grid of model kinds on an example task, modular
addition (docs/papers.md, random transformers: tasks), and one claim of our own.  Replace the
task, the parameters and the claim with the experiment's own, citing each one's section the same
way.
"""

from __future__ import annotations

from dataclasses import dataclass

from rt_lib.claims.ledger import Claims
from rt_lib.claims.verdicts import larger
from rt_lib.experiment import Experiment
from rt_lib.experiments.common import GridParams, GridResult, grid_step_shapes, run_task_grid
from rt_lib.experiments.reporting import per_restart
from rt_lib.tasks import FiniteTask, modular_addition

NAME = "{name}"


@dataclass(frozen=True)
class {cls}(GridParams):
    """Notebook {nn}'s parameters; the defaults are the CPU profile (configs/paper/ has the paper's)."""

    p: int = 23  # modulus of the example task, (a + b) mod p
    train_fraction: float = 0.8  # share of the p^2 pairs trained on; the rest is the test split
    split_seed: int = 0  # the one shuffle of all pairs before the split
    models: tuple[str, ...] = ("random transformer", "trained transformer")  # the kinds compared
    widths: tuple[int, ...] = (32,)  # d_model
    restarts: int = 3  # seeds per model and width: three a side for a comparison
    steps: int = 300  # optimiser steps for every model
    batch_size: int | None = None  # None: every training pair in each step
    lr: float = 1e-2  # AdamW peak lr
    warmup_steps: int = 30  # linear warm-up, then cosine to 0
    eval_every: int = 100  # steps between evaluations

    def task(self) -> FiniteTask:
        return modular_addition(self.p, self.train_fraction, self.split_seed)

    def smaller_than_paper(self) -> str | None:
        # how this run's task falls short of the paper's (``p = 23 of 113``), None on the paper's
        # own task: every claim row says which (rt_lib.claims.ledger, task sizes)
        return None


EXPERIMENT = Experiment(NAME, {cls}, title="{title}", step_shapes=grid_step_shapes)


def run(params: {cls}) -> GridResult:
    return run_task_grid(NAME, params)


def check_claims(result: GridResult, params: {cls}, claims: Claims) -> None:
    """The example claim, of our own: the fully trained transformer's test accuracy above the
    random one's on every restart.  A paper's claim is an id of rt_lib/claims/ledger.yaml,
    recorded with ``claims.check``."""
    width = max(params.widths)
    trained = per_restart(result.metrics, "trained transformer", width, "test_acc")
    random = per_restart(result.metrics, "random transformer", width, "test_acc")
    claims.ours("{slug}-trained-beats-random", "the fully trained transformer is more accurate",
                f"test accuracy at width {{width}}: trained {{trained}}, random {{random}}",
                larger(trained, random))
'''

INTRO = """# {nn} · {title}

*Written by scripts/new_experiment.py: state the paper, its section and its claim here.*

**The paper's claim.** ...

**What runs here.** A restart grid of model kinds on an example task (modular addition), and one
claim of our own; replace both with the experiment's own."""

CALLS = """from rt_lib.experiments.{name} import EXPERIMENT, check_claims, run
from rt_lib.runtime.io import save_csv

params, out, claims = EXPERIMENT.start(globals())  # checks every parameter; out: this run's folder"""

RUN = """result = run(params)
save_csv(result.metrics, out / "metrics.csv")  # one row per model, width and restart
print(result.metrics.to_string(index=False))"""

CLAIMS = """check_claims(result, params, claims)
claims.done()"""

CLOSING = """## How the scale was chosen

*Say here which settings the CPU profile runs and why (docs/scale.md holds the measurements).*"""

CONFIG = """# Paper profile of notebook {nn} ({title}): every parameter named, so that none falls back
# to the CPU profile's value unseen (tests/pipeline/test_io_runner.py). Written by
# scripts/new_experiment.py with the CPU profile's values: set the paper's.
"""


def _cell(kind: str, source: str, tags: tuple[str, ...] = ()) -> dict:
    cell = {"cell_type": kind, "id": uuid.uuid4().hex[:8], "metadata": {"tags": list(tags)},
            "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell |= {"execution_count": None, "outputs": []}
    return cell


def _params_of(path: Path, module: str, cls: str) -> tuple[type, str, dict]:
    """(the parameters class, its parameters cell, its shown defaults) of the written module,
    imported from its file (a checkout other than the installed one may hold it)."""
    spec = importlib.util.spec_from_file_location(module, path)
    loaded = importlib.util.module_from_spec(spec)
    before = sys.modules.get(module)
    sys.modules[module] = loaded  # inspect reads the comments from its source through it
    try:
        spec.loader.exec_module(loaded)
        params = getattr(loaded, cls)
        cell = parameters_cell(params, f"rt_lib/experiments/{path.name}")
        defaults = params().as_plain()
        return params, cell, {f: plain(defaults[f]) for f in cell_fields(params)}
    finally:
        if before is None:
            sys.modules.pop(module, None)
        else:
            sys.modules[module] = before


def scaffold(number: int, name: str, title: str, root: Path = PROJECT_ROOT) -> list[Path]:
    """Write the experiment's module, notebook and paper config under ``root``; returns them."""
    if not 1 <= number <= 99:
        raise ValueError(f"NN must be a notebook number from 01 to 99, got {number}")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise ValueError(f"name must be a module name in snake_case (my_experiment), got {name!r}")
    nn, notebook = f"{number:02d}", f"{number:02d}_{name}"
    taken = sorted(p.name for p in (root / "notebooks").glob(f"{nn}_*.ipynb"))
    if taken:
        raise ValueError(f"notebook number {nn} is taken: {', '.join(taken)}")
    module = root / "rt_lib" / "experiments" / f"{name}.py"
    clash = [p for p in (module, root / "rt_lib" / "tasks" / f"{name}.py") if p.exists()]
    if clash:
        raise ValueError(f"{clash[0].relative_to(root)} exists: choose another name")
    cls = "".join(part.capitalize() for part in name.split("_")) + "Params"
    fields = {"nn": nn, "name": notebook, "title": title.replace('"', "'"), "cls": cls,
              "slug": name.replace("_", "-")}
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(MODULE.format(**fields), encoding="utf-8")
    params, cell, shown = _params_of(module, f"rt_lib.experiments.{name}", cls)
    book = {"cells": [_cell("markdown", INTRO.format(**fields)),
                      _cell("code", cell, ("parameters",)),
                      _cell("code", CALLS.format(name=name)), _cell("code", RUN),
                      _cell("code", CLAIMS), _cell("markdown", CLOSING)],
            "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                        "name": "python3"},
                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
    path = root / "notebooks" / f"{notebook}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(book, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    config = root / "configs" / "paper" / f"{notebook}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(CONFIG.format(**fields) + yaml.safe_dump(shown, sort_keys=False),
                      encoding="utf-8")
    return [module, path, config]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("number", type=int, metavar="NN", help="the notebook's number, e.g. 16")
    parser.add_argument("name", help="snake_case name: the module and the notebook's")
    parser.add_argument("--title", default="a new experiment", help="one line for listings")
    parser.add_argument("--root", type=Path, default=PROJECT_ROOT, help="the checkout to write into")
    args = parser.parse_args(argv)
    try:
        written = scaffold(args.number, args.name, args.title, args.root)
    except ValueError as err:
        print(f"new_experiment.py: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path.relative_to(args.root)}")
    nn = f"{args.number:02d}"
    print(f"next: ./run_all.sh --only {nn} (a smoke run: ./run_all.sh --profile paper --smoke "
          f"--only {nn}); replace the example with the experiment; set configs/paper's values; "
          f"./run_all.sh --only {nn} --update-notebooks records the outputs nbval compares")
    return 0


if __name__ == "__main__":
    sys.exit(main())
