"""Experiment 07: Table 1 from the saved restarts of notebooks 01-04 (nothing is trained here).

Zhong & Andreas report the median test accuracy over 10 restarts per task, model and width
(16 and 1024).  Each task notebook writes one metrics row per restart to
``results/<notebook>/metrics.csv``; this module gathers them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rt_lib.claims import Claims
from rt_lib.experiments.registry import Experiment
from rt_lib.io import results_dir
from rt_lib.params import Params, check_positive_ints

NAME = "07_table1"

#: task -> (notebook whose metrics.csv holds its restarts, test metric of Table 1)
SOURCES = {
    "modular addition": ("01_modular_addition", "test_acc"),
    "needle": ("02_needle_in_a_haystack", "test_acc"),
    "decimal addition": ("03_decimal_addition", "test_acc"),  # every output digit scored
    "parentheses": ("04_parentheses", "test_acc"),
}

PAPER_CLAIM = ("Random transformers reliably solve all four tasks at width 1024 (median of 10 restarts) "
               "and beat fully trained LSTMs; at width 16 they fail where trained transformers may not.")


@dataclass(frozen=True)
class Table1Params(Params):
    """Notebook 07's parameters."""

    widths: tuple[int, ...] | None = None  # None: every width the task notebooks ran

    def check(self) -> None:
        if self.widths is not None:
            check_positive_ints("widths", self.widths)


EXPERIMENT = Experiment(NAME, Table1Params, reads=tuple(nb for nb, _ in SOURCES.values()),
                        title="Table 1 from the restarts of 01-04")


def load_metrics() -> pd.DataFrame:
    """Every restart of 01-04 with ``task`` and ``accuracy`` columns; a clear error naming the
    notebooks to run first when some are missing."""
    frames, missing = [], []
    for task, (notebook, metric) in SOURCES.items():
        path = results_dir(notebook, create=False) / "metrics.csv"
        if not path.exists():
            missing.append(notebook)
            continue
        df = pd.read_csv(path)
        frames.append(df.assign(task=task, accuracy=df[metric]))
    if missing:
        only = " ".join(f"--only {m[:2]}" for m in missing)
        raise FileNotFoundError(
            f"Table 1 needs the restarts of {', '.join(missing)} (no metrics.csv under "
            f"{results_dir(missing[0], create=False).parent}); run ./run_all.sh {only} first "
            "(same profile)")
    return pd.concat(frames, ignore_index=True)


def table1(metrics: pd.DataFrame, widths: tuple[int, ...] | None = None) -> pd.DataFrame:
    """Long form: a row per (task, model, width) with median, min and max test accuracy."""
    if widths is not None:
        metrics = metrics[metrics["width"].isin(widths)]
    g = metrics.groupby(["task", "model", "width"], sort=False)["accuracy"]
    table = g.agg(restarts="count", median="median", min="min", max="max").reset_index()
    for col in ("median", "min", "max"):
        table[col] = table[col].round(3)
    return table


def wide_table1(table: pd.DataFrame) -> pd.DataFrame:
    """The paper's layout: a row per (model, width), a column per task, "median [min, max]"."""
    cell = table.assign(cell=[f"{m:.3f} [{lo:.2f}, {hi:.2f}]" if n > 1 else f"{m:.3f}"
                              for m, lo, hi, n in zip(table["median"], table["min"], table["max"],
                                                      table["restarts"])])
    wide = cell.pivot(index=["model", "width"], columns="task", values="cell")
    return wide[[t for t in SOURCES if t in wide.columns]].reset_index().fillna("-")


def check_claims(table: pd.DataFrame, claims: Claims, threshold: float = 0.9) -> None:
    """The reduced-scale claims of the CPU profile: at the largest width run per task, the random
    transformer reaches ``threshold`` on needle, decimal addition and parentheses, and beats the
    fully trained LSTM of the same width on at least two of them."""
    source = "Zhong & Andreas 2024, Table 1"
    beats, compared = 0, 0
    for task in ("needle", "decimal addition", "parentheses"):
        rows = table[table["task"] == task]
        if rows.empty:
            continue
        width = rows["width"].max()
        at = rows[rows["width"] == width].set_index("model")["median"]
        rnd = float(at.get("random transformer", float("nan")))
        claims.check(f"random-solves-{task.replace(' ', '-')}", source,
                     f"random transformer (width 1024) solves {task} (median of 10 restarts)",
                     f"median {rnd:.3f} at width {width} (needs >= {threshold})",
                     rnd >= threshold, scale="width 1024, the paper profile")
        if "trained LSTM" in at:
            compared += 1
            beats += rnd > float(at["trained LSTM"])
            print(f"{task}: random {rnd:.3f} vs trained LSTM {float(at['trained LSTM']):.3f}")
    if compared:
        claims.check("random-beats-lstm", source,
                     "random transformers beat fully trained LSTMs",
                     f"random transformer ahead on {beats} of {compared} tasks (needs >= 2)",
                     beats >= 2, scale="width 1024, the paper profile")
    claims.done()
