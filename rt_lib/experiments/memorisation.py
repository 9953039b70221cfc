"""Experiment 05: how many random labels a random transformer stores (Zhong & Andreas §5, Table 3)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rt_lib.experiments.common import GridParams, GridResult, run_task_grid
from rt_lib.experiments.registry import Experiment
from rt_lib.tasks import MemorisationTask, bits_memorised, memorisation

NAME = "05_memorisation"


@dataclass(frozen=True)
class MemorisationParams(GridParams):
    """Notebook 05's parameters; defaults = CPU profile (configs/paper/ has the paper's)."""

    n: int = 128  # labels and values of x and y: n² pairs of log2(n) bits each (paper: 512)
    label_seed: int = 0
    models: tuple[str, ...] = ("random transformer", "trained transformer")
    widths: tuple[int, ...] = (32,)  # the paper: 128 (with n = 512)
    steps: int = 800
    batch_size: int | None = 4096
    lr: float = 1e-2
    warmup_steps: int = 50
    eval_every: int = 200

    def check_task(self) -> None:
        super().check_task()  # n
        if any(k not in ("random transformer", "trained transformer") for k in self.models):
            raise ValueError(f"models={list(self.models)!r}: memorisation compares "
                             "'random transformer' and 'trained transformer'")

    def task(self) -> MemorisationTask:
        return memorisation(self.n, self.label_seed)


EXPERIMENT = Experiment(NAME, MemorisationParams, title="memorising random labels (Table 3)")


def run(params: MemorisationParams, save_models: bool = True) -> GridResult:
    return run_task_grid(NAME, params, save_models)


def memorisation_table(metrics: pd.DataFrame, task: MemorisationTask) -> pd.DataFrame:
    """Table 3: accuracy, bits memorised, trainable parameters and bits per trainable parameter
    (median over restarts)."""
    rows = []
    for (model, width), g in metrics.groupby(["model", "width"], sort=False):
        acc = float(g["train_acc"].median())
        bits = bits_memorised(acc, task)
        params = int(g["trainable_params"].iloc[0])
        rows.append({"model": model, "width": width, "restarts": len(g),
                     "accuracy": round(acc, 3), "bits memorised": round(bits),
                     "trainable params": params, "bits / param": round(bits / params, 3)})
    return pd.DataFrame(rows)
