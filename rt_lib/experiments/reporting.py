"""Tables and claim checks shared by the experiment notebooks.

Printed numbers are rounded (accuracy to 3 decimals) so that notebook outputs compared by nbval
do not depend on the last bits of a CPU's float arithmetic; wall times print as "<n> s", which
nbval's sanitize file masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rt_lib.claims.ledger import Claim, Claims
from rt_lib.claims.verdicts import BUDGET, NOT_SHOWN, Verdict, reaches


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


@dataclass(frozen=True)
class ReducedTask:
    """A run on a smaller task than the paper's: its measurement is a claim of our own (a
    stand-in never counts as the paper's claim), and the paper's claim is not shown for want of
    the budget its task needs."""

    smaller: str  # how the task is smaller: "<this task> against the paper's <task>"
    id: str  # the claim of our own the measurement becomes
    statement: str  # what that claim says
    naming: str = "the reduced task is"  # how the paper's claim names it

    @classmethod
    def unless_paper(cls, smaller: str | None, id: str, statement: str,
                     naming: str = "the reduced task is") -> "ReducedTask | None":
        """The reduced task ``smaller`` describes (a module's ``how_smaller``), or None when
        the run is on the paper's task (``smaller`` None): what ``reduced=`` takes."""
        return None if smaller is None else cls(smaller, id, statement, naming)


def check_on_paper_task(claims: Claims, id: str, measured: str, verdict: Verdict | bool,
                        scale: str = "", reduced: ReducedTask | None = None) -> Claim:
    """Record ledger claim ``id`` from ``measured`` and ``verdict`` when the run is on the
    paper's task (``reduced`` None); on a smaller one, record them as ``reduced``'s claim of our
    own and ``id`` as not shown (budget), naming that claim and its status.  Returns the claim
    the measurement went to."""
    if reduced is None:
        return claims.check(id, measured, verdict, scale=scale)
    shown = claims.ours(reduced.id, reduced.statement, measured, verdict, scale=scale)
    claims.check(id, f"not on the paper's task: {reduced.smaller}; {reduced.naming} "
                 f"{reduced.id} (ours): {shown.status}", Verdict(NOT_SHOWN, "", BUDGET),
                 scale=scale)
    return shown


def check_solves(claims: Claims, id: str, metrics: pd.DataFrame, metric: str, task: str,
                 threshold: float = 0.99, scale: str = "",
                 reduced: ReducedTask | None = None) -> Claim:
    """Record ledger claim ``id`` "a random transformer solves ``task``" (Table 1: the median
    over restarts at the widest width): the random transformer's ``metric`` per restart; on a
    smaller task than the paper's, ``reduced``'s claim of our own (:func:`check_on_paper_task`)."""
    width = int(metrics.loc[metrics["model"] == "random transformer", "width"].max())
    values = per_restart(metrics, "random transformer", width, metric)
    measured = (f"random transformer, width {width}, {task}: {metric} per restart "
                + ", ".join(f"{v:.3f}" for v in values))
    return check_on_paper_task(claims, id, measured, reaches(values, threshold), scale, reduced)
