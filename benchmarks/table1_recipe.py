"""Recipe search for Table 1 at CPU scale: one model kind on one task notebook's task,
trained through the notebook's own code (its Params and ``train_grid``), every restart reported.

    .venv/bin/python benchmarks/table1_recipe.py 02 "trained transformer" widths=[128] lr=0.001 steps=1000 restarts=3

The first argument names the task notebook (01-05), the second the model kind; every further
``key=value`` is a field of that notebook's Params (the same names as ``./run_all.sh --set``).
Prints one line per restart: test accuracy (and exact match where the task has it), final train
loss, steps and wall time, then the median.  Nothing is selected here on the test set: a recipe is
chosen by its train loss (a fresh-sample stream is its own validation set), the test accuracy is
only reported.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import fields

import yaml

from rt_lib.experiments.common import train_grid
from rt_lib.experiments.modular_addition import circle_table
from rt_lib.pipeline.registry import registry


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit(__doc__)
    notebook, kind, *settings = argv
    experiment = next(e for name, e in registry().items() if name.startswith(notebook))
    names = {f.name for f in fields(experiment.params)}
    overrides: dict = {"models": [kind], "threads": 1}
    for kv in settings:
        key, value = kv.split("=", 1)
        if key not in names:
            raise SystemExit(f"{key!r} is not a parameter of {experiment.name}")
        # YAML reads numbers, lists and null as the runner's --set does ("widths=[16,128]").
        overrides[key] = yaml.safe_load(value)
    params = experiment.params(**overrides)
    start = time.perf_counter()
    result = train_grid(params.task(), params)
    seconds = time.perf_counter() - start
    m = result.metrics
    acc = "test_acc" if "test_acc" in m else "train_acc"  # memorisation (05) has only the train set
    print(f"{experiment.name} {kind} {' '.join(settings)}: {seconds:.0f} s")
    for (_, row), history in zip(m.iterrows(), result.histories.values()):
        extra = f" exact {row['test_exact']:.3f}" if "test_exact" in m else ""
        # the training loss at each tenth of the run: where it still fell when the steps ran out
        tenths = history["train_loss"].iloc[max(len(history) // 10, 1) - 1 :: max(len(history) // 10, 1)]
        curve = " ".join(f"{v:.2f}" for v in tenths)
        print(f"  width {row['width']} restart {row['restart']}: {acc} {row[acc]:.3f}{extra}"
              f" train_loss {row['train_loss']:.4f} steps {row['steps']} {row['budget']}"
              f" (train loss by tenths: {curve})")
    if experiment.name.startswith("01"):  # Figure 3: the circle on PCs 1 and 3, and the best pair
        for row in circle_table(result).itertuples():
            print(f"  width {row.width} restart {row.restart}: circularity PCs {row.pcs} "
                  f"{row.circularity:.2f} (k={row.frequency})")
    for width, g in m.groupby("width"):
        print(f"  width {width} median {acc} {statistics.median(g[acc]):.3f} "
              f"min {g[acc].min():.3f} max {g[acc].max():.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
