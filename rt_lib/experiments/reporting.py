"""Tables and claim checks shared by the experiment notebooks.

Printed numbers are rounded (accuracy to 3 decimals) so that notebook outputs compared by nbval
do not depend on the last bits of a CPU's float arithmetic; wall times print as "<n> s", which
nbval's sanitize file masks.
"""

from __future__ import annotations

import pandas as pd

from rt_lib.claims.ledger import RUN_TASK, Claim, Claims
from rt_lib.claims.verdicts import Verdict, reaches


def results_table(metrics: pd.DataFrame, metric: str = "test_acc",
                  extra: tuple[str, ...] | list[str] = ()) -> pd.DataFrame:
    """Median over restarts per (model, width): ``metric`` (median and min), the ``extra``
    metrics' medians, train accuracy when the task has a train set, trainable parameters and
    wall time (summed over restarts)."""
    grouped = metrics.groupby(["model", "width"], sort=False)
    aggs = {"restarts": ("restart", "count"), "median": (metric, "median"), "min": (metric, "min")}
    for col in extra:
        aggs[col] = (col, "median")
    if "train_acc" in metrics and metric != "train_acc":
        aggs["train_acc"] = ("train_acc", "median")
    aggs["trainable_params"] = ("trainable_params", "first")
    aggs["wall_time"] = ("wall_time_s", "sum")
    table = grouped.agg(**aggs).reset_index()
    for col in ["median", "min", *extra, "train_acc"]:
        if col in table:
            table[col] = table[col].round(3)
    table["wall_time"] = table["wall_time"].map(lambda s: f"{s:.0f} s")
    return table.rename(columns={"median": f"{metric} (median)", "min": f"{metric} (min)"})


def median_of(metrics: pd.DataFrame, model: str, width: int, metric: str) -> float:
    """Median ``metric`` over the restarts of ``model`` at ``width`` (rounded to 3 decimals)."""
    rows = metrics[(metrics["model"] == model) & (metrics["width"] == width)]
    if rows.empty:
        raise ValueError(f"no runs of {model!r} at width {width}")
    return round(float(rows[metric].median()), 3)


def per_restart(metrics: pd.DataFrame, model: str, width: int, metric: str) -> list[float]:
    """``metric`` of every restart of ``model`` at ``width``, in restart order."""
    rows = metrics[(metrics["model"] == model) & (metrics["width"] == width)]
    if rows.empty:
        raise ValueError(f"no runs of {model!r} at width {width}")
    return [float(v) for v in rows.sort_values("restart")[metric]]


def check_on_paper_task(claims: Claims, id: str, measured: str, verdict: Verdict | bool,
                        scale: str = "", reduced: str | None | object = RUN_TASK) -> Claim:
    """Record ledger claim ``id`` from ``measured`` and ``verdict``, on the task it was measured
    on: the paper's (``reduced`` None), a reduced one, whose reduction (``p = 59 of 97``) the
    claim then carries, or, left out, the run's own (``Claims.reduced``), keeping its id and its
    measured status, never counted at the paper's scale (rt_lib.claims.ledger, task sizes)."""
    return claims.check(id, measured, verdict, scale=scale, reduced=reduced)


def check_solves(claims: Claims, id: str, metrics: pd.DataFrame, metric: str, task: str,
                 threshold: float = 0.99, scale: str = "",
                 reduced: str | None | object = RUN_TASK) -> Claim:
    """Record ledger claim ``id`` "a random transformer solves ``task``" (Table 1: the median
    over restarts at the widest width): the random transformer's ``metric`` per restart, on the
    task as it ran (``reduced``: how it is smaller than the paper's; :func:`check_on_paper_task`)."""
    width = int(metrics.loc[metrics["model"] == "random transformer", "width"].max())
    values = per_restart(metrics, "random transformer", width, metric)
    measured = (f"random transformer, width {width}, {task}: {metric} per restart "
                + ", ".join(f"{v:.3f}" for v in values))
    return check_on_paper_task(claims, id, measured, reaches(values, threshold), scale, reduced)
