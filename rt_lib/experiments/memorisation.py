"""Experiment 05: how many random labels a random transformer stores (Zhong & Andreas §5, Table 3)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import pandas as pd

from rt_lib.claims.ledger import Claims
from rt_lib.claims.verdicts import MIN_RUNS, NOT_SHOWN, RUNS, Verdict, beyond_noise, bool_verdict, every, larger
from rt_lib.experiment import Experiment
from rt_lib.experiments.common import GridParams, GridResult, grid_step_shapes, run_task_grid
from rt_lib.experiments.reporting import per_restart
from rt_lib.tasks import MemorisationTask, bits_memorised, bits_net_of_chance, memorisation

NAME = "05_memorisation"


@dataclass(frozen=True)
class MemorisationParams(GridParams):
    """Notebook 05's parameters; defaults = CPU profile (configs/paper/ has the paper's)."""

    # Left out of the notebook's parameters cell: the grid's knobs this notebook does not use.
    CELL_OMITS: ClassVar[frozenset[str]] = frozenset({
        "batch_restarts", "lstm_lr", "lstm_steps", "trained_steps", "trained_lr"})

    n: int = 128  # x, y and labels below n: n^2 pairs of log2(n) bits (paper: 512)
    label_seed: int = 0  # the draw of the random labels
    # "authors": [x, n + y] read at y, vocabulary 2n (hdmemorize_exp.py); "equals": [x, n + y, '=']
    # read at '=', vocabulary 2n + 1 (rt_lib/tasks/random_labels.py)
    layout: Literal["authors", "equals"] = "authors"  # authors: [x, n+y] at y, vocab 2n; equals: [x, n+y, EQ] at EQ
    models: tuple[str, ...] = ("random transformer", "trained transformer")  # the two of Table 3
    widths: tuple[int, ...] = (48,)  # d_model (paper: 128)
    steps: int = 1500  # optimiser steps (375 epochs)
    batch_size: int | None = 4096  # pairs per step; None: all pairs
    # what the authors' code ran (hdmemorize_exp.py;
    # docs/papers.md, random transformers: the authors' code beyond the text)
    lr: float = 5e-3  # AdamW peak lr of both kinds: what the authors' code ran
    weight_decay: float = 1e-4  # on matrices only; the authors' memorisation run
    warmup_steps: int = 100  # linear warm-up, then cosine to 0
    eval_every: int = 150  # steps between evaluations on all pairs
    # The smoke test: the authors' batch of 32,768 cut to 1,024, the first 1,024 labels scored
    SMOKE: ClassVar[dict[str, Any]] = GridParams.SMOKE | {"batch_size": 1024, "eval_rows": 1024}

    def check_task(self) -> None:
        super().check_task()  # n
        if any(k not in ("random transformer", "trained transformer") for k in self.models):
            raise ValueError(f"models={list(self.models)!r}: memorisation compares "
                             "'random transformer' and 'trained transformer'")

    def smaller_than_paper(self) -> str | None:
        # the paper memorises labels of n = 512 (Table 3; docs/papers.md, random transformers: tasks)
        return None if self.n >= 512 else f"n = {self.n} of 512"

    def task(self) -> MemorisationTask:
        return memorisation(self.n, self.label_seed, self.layout)


EXPERIMENT = Experiment(
    NAME, MemorisationParams, title="memorising random labels (Table 3)",
    step_shapes=grid_step_shapes,
    not_shown_on_cpu={
        "rt-t3-memorisation-bits": (
            "one restart a side in the CPU budget; on restarts 0-2 (benchmarks/baselines_scale.py, "
            "an H200) the trained model stores 1.408 net bits per parameter on each and the random "
            "one 0.285-0.292, but the random model has no plateau in reach: trained for 1,500, "
            "3,000 and 6,000 steps (restart 0, the same script on this CPU) it stores 0.287, 0.322 "
            "and 0.375, still rising by a sixth per doubling, so its capacity is not measured; the "
            "paper profile's 21,000 epochs are expected to reach it (an estimate)"),
        "rt-t3-random-memorises": (
            "one restart in the CPU budget, far above chance (notebook 05's claim line); on "
            "restarts 0-2 (benchmarks/baselines_scale.py, an H200) the random transformer "
            "stores 0.285-0.292 net bits per parameter on each, every one above chance: three "
            "restarts here would show it (an estimate)")})


def run(params: MemorisationParams, save_models: bool = True) -> GridResult:
    return run_task_grid(NAME, params, save_models)


def memorisation_table(metrics: pd.DataFrame, task: MemorisationTask) -> pd.DataFrame:
    """Table 3: accuracy, bits recalled (raw, and net of the labels a guess gets right),
    trainable parameters and bits per trainable parameter (median over restarts)."""
    rows = []
    for (model, width), g in metrics.groupby(["model", "width"], sort=False):
        acc = float(g["train_acc"].median())
        bits, net = bits_memorised(acc, task), bits_net_of_chance(acc, task)
        params = int(g["trainable_params"].iloc[0])
        rows.append({"model": model, "width": width, "restarts": len(g),
                     "accuracy": round(acc, 3), "bits memorised": round(bits),
                     "bits net of chance": round(net), "trainable params": params,
                     "bits / param": round(bits / params, 3),
                     "net bits / param": round(net / params, 3)})
    return pd.DataFrame(rows)


def check_claims(metrics: pd.DataFrame, task: MemorisationTask, claims: Claims) -> None:
    """Record Table 3's claims at the widest width: the random transformer memorises (every
    restart's accuracy on the labels above chance by more than twice the binomial standard
    error, at least three restarts), and the fully trained transformer stores more than twice
    the bits per trainable parameter (net of chance) of the random one, every restart against
    every restart (at least three a side), with the trained model fitting >= 90 % of the labels
    (else its bits are its steps', not its capacity)."""
    width = int(metrics["width"].max())
    # Table 3's accuracy column: what a random transformer recalls of labels it cannot predict
    accs = per_restart(metrics, "random transformer", width, "train_acc")
    chance, labels = 1 / task.n_labels, len(task.train[1])
    noise = math.sqrt(chance * (1 - chance) / labels)  # a guesser's accuracy, one standard error
    above = [beyond_noise(a - chance, noise, f"binomial standard error over {labels:,} labels")
             for a in accs]
    if len(accs) < MIN_RUNS:
        above.append(Verdict(NOT_SHOWN, f"{len(accs)} restart(s): fewer than {MIN_RUNS}", RUNS))
    claims.check("rt-t3-random-memorises", f"random transformer, width {width}: accuracy on the "
                 f"{labels:,} random labels per restart {', '.join(f'{a:.4f}' for a in accs)}, "
                 f"chance {chance:.4f}", every(above),
                 scale="n = 512, width 128, 10 restarts (the paper profile)")

    def per_param(model: str) -> list[float]:
        rows = metrics[(metrics["model"] == model) & (metrics["width"] == width)]
        return [bits_net_of_chance(float(a), task) / int(n)
                for a, n in zip(rows["train_acc"], rows["trainable_params"])]

    rnd, trn = per_param("random transformer"), per_param("trained transformer")
    fit = float(metrics.loc[(metrics["model"] == "trained transformer")
                            & (metrics["width"] == width), "train_acc"].min())
    verdict = every([larger(trn, [2 * r for r in rnd]),
                     bool_verdict(fit >= 0.9, f"trained fits {fit:.1%} of the labels, needs 90 %")])
    claims.check("rt-t3-memorisation-bits", f"net bits per trainable parameter at width {width}: "
                 f"random {', '.join(f'{v:.3f}' for v in rnd)}, trained "
                 f"{', '.join(f'{v:.3f}' for v in trn)} (needs trained > 2 x random)", verdict,
                 scale="n = 512, width 128, trained to the plateau (the paper profile)")
    claims.done()
