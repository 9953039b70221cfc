"""Experiment 11: training miiii and its baselines (Syrkis & Søgaard 2024; SPEC B).

One 1-layer transformer (the miiii configuration) per task variant, full batch, AdamW with betas
(0.9, 0.98), the ln(q)-weighted loss and grokfast.  Each run keeps weight snapshots at
log-spaced epochs (for the analysis notebooks 12-13) and a resumable checkpoint, in a folder
named by a hash of its settings, so a re-run with the same settings resumes or reuses it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from rt_lib.experiments.common import from_namespace
from rt_lib.grokfast import Grokfast
from rt_lib.io import results_dir
from rt_lib.model import build_model, miiii_config
from rt_lib.seeding import derive
from rt_lib.tasks.miiii import VARIANTS, MultiPrimeTask, miiii_task
from rt_lib.tasks.primes import is_prime
from rt_lib.train import TrainConfig, TrainResult, log_spaced_steps, train

NAME = "11_miiii_training"


@dataclass(frozen=True)
class MiiiiParams:
    """Notebook 11's parameters; defaults = CPU profile (configs/paper/ has the paper's)."""

    p: int = 17
    variants: tuple[str, ...] = ("miiii", "nanda", "masked", "basis")
    lambda_zero: bool = True  # also train T_miiii without grokfast (the paper: no convergence)
    split: str = "code"  # "code": train_fraction / rest validation; "paper": 30 % / n_valid / test
    train_fraction: float | None = 0.8
    n_valid: int = 1000
    combine: str = "sum"  # heads' losses: "sum" (paper) or "mean" (code)
    d_model: int = 128
    n_heads: int = 4
    dropout: float = 0.1
    lr: float = 3e-3
    weight_decay: float = 1.0
    beta2: float = 0.98  # AdamW betas (0.9, 0.98) (SPEC B)
    grokfast_lambda: float = 2.0
    grokfast_alpha: float = 0.98
    grokfast_init: str = "grad"  # "grad": Lee et al.'s reference; "zero": the miiii code
    epochs: int = 5000
    eval_points: int = 60  # log-spaced evaluations
    n_snapshots: int = 12  # log-spaced weight snapshots kept for notebooks 12-13
    generalised_at: float = 0.99  # validation accuracy that counts a head as generalised
    seed: int = 0
    threads: int | None = 1
    device: str = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", tuple(self.variants))
        if not isinstance(self.p, int) or not is_prime(self.p):
            raise ValueError(f"p must be a prime, got {self.p!r}")
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or not self.variants:
            raise ValueError(f"variants={list(self.variants)!r}: each must be one of {list(VARIANTS)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.n_snapshots < 1 or self.eval_points < 2:
            raise ValueError("n_snapshots must be >= 1 and eval_points >= 2")
        for v in self.variants:  # builds each task once: checks split, fraction, combine
            self.task(v)
        self.train_config(self.grokfast_lambda, Path("."))  # checks lr, epochs, ...
        Grokfast(self.grokfast_alpha, self.grokfast_lambda, self.grokfast_init)

    @classmethod
    def from_namespace(cls, namespace: dict[str, Any]) -> MiiiiParams:
        return from_namespace(cls, namespace)

    def task(self, variant: str) -> MultiPrimeTask:
        return miiii_task(self.p, variant, split=self.split, train_fraction=self.train_fraction,
                          n_valid=self.n_valid, combine=self.combine,
                          split_seed=self.seed, shuffle_seed=self.seed)

    def model(self, task: MultiPrimeTask) -> nn.Module:
        cfg = miiii_config(self.p, d_model=self.d_model, n_heads=self.n_heads,
                           dropout=self.dropout, out_sizes=task.qs)
        return build_model(cfg, derive(self.seed, "init") % 2**31)

    def train_config(self, lamb: float, folder: Path) -> TrainConfig:
        snaps = log_spaced_steps(self.epochs, self.n_snapshots) if self.n_snapshots > 1 else [self.epochs]
        return TrainConfig(
            steps=self.epochs, batch_size=None, lr=self.lr, weight_decay=self.weight_decay,
            betas=(0.9, self.beta2), warmup_steps=0, schedule="constant", grad_clip=None,
            eval_log_points=self.eval_points, seed=self.seed, threads=self.threads,
            device=self.device, snapshot_steps=tuple(snaps), snapshot_dir=str(folder / "snapshots"),
            checkpoint_path=str(folder / "last.pt"), checkpoint_every=max(self.epochs // 10, 1),
            resume=True)

    def run_key(self, variant: str, lamb: float) -> str:
        """Folder name of one run: the variant, lambda and a hash of every setting."""
        settings = asdict(self) | {"variants": None, "lambda_zero": None, "threads": None,
                                   "variant": variant, "grokfast_lambda": lamb}
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
        return f"{variant}_lambda{lamb:g}_{digest}"


@dataclass
class MiiiiRun:
    variant: str
    lamb: float
    task: MultiPrimeTask
    result: TrainResult
    folder: Path

    @property
    def label(self) -> str:
        return f"T_{self.variant}" + (" (λ = 0)" if self.lamb == 0 else "")


def runs_to_do(params: MiiiiParams) -> list[tuple[str, float]]:
    todo = [(v, params.grokfast_lambda) for v in params.variants]
    if params.lambda_zero and "miiii" in params.variants and params.grokfast_lambda != 0:
        todo.append(("miiii", 0.0))
    return todo


def run(params: MiiiiParams) -> list[MiiiiRun]:
    """Train (or resume, or reuse) every run; weights and snapshots under results/11_.../runs."""
    out = []
    for variant, lamb in runs_to_do(params):
        task = params.task(variant)
        folder = results_dir(NAME) / "runs" / params.run_key(variant, lamb)
        hook = Grokfast(params.grokfast_alpha, lamb, params.grokfast_init) if lamb > 0 else None
        result = train(params.model(task), task, params.train_config(lamb, folder),
                       grad_hook=hook, desc=f"T_{variant} λ={lamb:g}")
        torch.save({"params": params, "variant": variant, "lamb": lamb,
                    "config": result.model.cfg}, folder / "run.pt")
        out.append(MiiiiRun(variant, lamb, task, result, folder))
    return out


def generalisation_table(run: MiiiiRun, threshold: float) -> pd.DataFrame:
    """Per head q: the first logged epoch at which train and validation accuracy reach
    ``threshold`` and stay there (None if never), and the final validation accuracy."""
    h = run.result.history
    rows = []
    for q in run.task.qs:
        row: dict[str, Any] = {"q": q}
        for split in ("train", "valid"):
            acc = h[f"{split}_acc_q{q}"].to_numpy()
            ok = acc >= threshold
            # the first epoch after which it never drops below again
            idx = next((i for i in range(len(ok)) if ok[i:].all()), None)
            row[f"{split} epoch"] = int(h["step"].iloc[idx]) if idx is not None else None
        row["final valid acc"] = round(float(h[f"valid_acc_q{q}"].iloc[-1]), 3)
        row["loss weight"] = round(float(run.task.loss_weights[run.task.qs.index(q)]), 3)
        rows.append(row)
    return pd.DataFrame(rows)


__all__ = ["NAME", "MiiiiParams", "MiiiiRun", "run", "runs_to_do", "generalisation_table"]
