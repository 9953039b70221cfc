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
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

from rt_lib.experiments.common import from_namespace
from rt_lib.grokfast import Grokfast
from rt_lib.io import atomic_save_torch, results_dir
from rt_lib.model import build_model, miiii_config
from rt_lib.seeding import derive
from rt_lib.tasks.miiii import VARIANTS, MultiPrimeTask, miiii_task
from rt_lib.tasks.primes import is_prime
from rt_lib.train import TrainConfig, TrainResult, log_spaced_steps, train

NAME = "11_miiii_training"
#: The sources that decide what a run computes (model, task, loop, filter, seeds): their hash is
#: part of every run's key, so a stored run made by other code is retrained, never reused.
TRAINING_SOURCES = ("model.py", "train.py", "grokfast.py", "seeding.py", "tasks/base.py",
                    "tasks/miiii.py", "tasks/primes.py")


@cache
def training_code_digest() -> str:
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for rel in TRAINING_SOURCES:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class MiiiiParams:
    """Notebook 11's parameters; defaults = CPU profile (configs/paper/ has the paper's)."""

    p: int = 37  # prime; one head per prime below it: 2, 3, ..., 31 (11 heads); the paper: 113
    variants: tuple[str, ...] = ("miiii", "nanda", "masked", "basis")  # tasks trained (T_<name>)
    lambda_zero: bool = True  # also T_miiii without grokfast
    split: str = "code"  # code: train_fraction / rest validation; paper: 30 % / n_valid / test
    train_fraction: float | None = 0.8  # share of the p^2 numbers trained on
    n_valid: int = 1000  # validation size of the paper split
    combine: str = "sum"  # heads" losses summed (paper) or averaged (code: mean)
    d_model: int = 128
    n_heads: int = 4
    dropout: float = 0.2  # without dropout only q in {2, 3} generalise (SPEC B)
    dropout_at: str = "gpt2"  # "residual": the miiii code's placement (the paper profile; faster:
    # embeddings undropped, so keys/values come from per-token tables); "gpt2": embeddings,
    # attention and sublayer outputs, where the CPU recipe was found (with "residual" at p = 37
    # only q = 2, 3 generalised in 10,000 epochs and T_nanda not in 1,500)
    lr: float = 0.003  # AdamW, constant
    weight_decay: float = 1.0
    beta2: float = 0.98  # AdamW betas (0.9, 0.98)
    grokfast_lambda: float = 2.0  # grokfast amplification
    grokfast_alpha: float = 0.98  # grokfast EMA decay
    grokfast_init: str = "grad"  # EMA starts at the first gradient (Lee et al.); zero: the miiii code
    epochs: int = 10000  # full-batch epochs of T_miiii with grokfast
    baseline_epochs: int | None = 1500  # epochs of the other runs (None: epochs)
    eval_points: int = 60  # log-spaced evaluations
    n_snapshots: int = 12  # log-spaced weight snapshots for notebooks 12-13
    generalised_at: float = 0.95  # validation accuracy counted as generalised
    trainable: str = "all"  # "embeddings": the random transformer of Zhong & Andreas (notebook 15)
    seed: int = 0
    threads: int | None = None  # torch threads; None: $RT_THREADS or 1 (seeding.set_threads)
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
        miiii_config(self.p, d_model=self.d_model, n_heads=self.n_heads, dropout=self.dropout,
                     trainable=self.trainable, dropout_at=self.dropout_at)  # checks all three
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"epochs must be a positive integer, got {self.epochs!r}")
        if self.baseline_epochs is not None and (
                not isinstance(self.baseline_epochs, int) or self.baseline_epochs < 1):
            raise ValueError(f"baseline_epochs must be a positive integer or None, got {self.baseline_epochs!r}")
        if self.n_snapshots < 1 or self.eval_points < 2:
            raise ValueError("n_snapshots must be >= 1 and eval_points >= 2")
        for v in self.variants:  # builds each task once: checks split, fraction, combine
            self.task(v)
        self.train_config(self.grokfast_lambda, None)  # checks lr, epochs, ...
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
                           dropout=self.dropout, out_sizes=task.qs, trainable=self.trainable,
                           dropout_at=self.dropout_at)
        return build_model(cfg, derive(self.seed, "init") % 2**31)

    def epochs_for(self, variant: str, lamb: float) -> int:
        """T_miiii with grokfast gets ``epochs``; the baselines ``baseline_epochs`` if set."""
        main = variant == "miiii" and lamb == self.grokfast_lambda
        return self.epochs if main or self.baseline_epochs is None else self.baseline_epochs

    def train_config(self, lamb: float, folder: Path | None, epochs: int | None = None) -> TrainConfig:
        """Full batch, constant lr, no clipping; with a ``folder``: log-spaced weight snapshots and
        a resumable checkpoint there (``None``: nothing saved, as in a search trial)."""
        epochs = epochs if epochs is not None else self.epochs
        keep: dict[str, Any] = {}
        if folder is not None:
            snaps = log_spaced_steps(epochs, self.n_snapshots) if self.n_snapshots > 1 else [epochs]
            keep = dict(snapshot_steps=tuple(snaps), snapshot_dir=str(folder / "snapshots"),
                        checkpoint_path=str(folder / "last.pt"),
                        checkpoint_every=max(epochs // 10, 1), resume=True)
        return TrainConfig(
            steps=epochs, batch_size=None, lr=self.lr, weight_decay=self.weight_decay,
            betas=(0.9, self.beta2), warmup_steps=0, schedule="constant", grad_clip=None,
            eval_log_points=self.eval_points, seed=self.seed, threads=self.threads,
            device=self.device, **keep)

    def grokfast(self, lamb: float) -> Grokfast | None:
        return Grokfast(self.grokfast_alpha, lamb, self.grokfast_init) if lamb > 0 else None

    def run_key(self, variant: str, lamb: float) -> str:
        """Folder name of one run: the variant, lambda and a hash of every setting and of the
        training code (:data:`TRAINING_SOURCES`)."""
        settings = asdict(self) | {"code": training_code_digest(), "variants": None,
                                   "lambda_zero": None, "threads": None, "generalised_at": None,
                                   "baseline_epochs": None, "variant": variant,
                                   "grokfast_lambda": lamb, "epochs": self.epochs_for(variant, lamb)}
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


def run(params: MiiiiParams, name: str = NAME) -> list[MiiiiRun]:
    """Train (or resume, or reuse) every run; weights and snapshots under results/<name>/runs.

    A run whose folder holds a finished checkpoint is loaded, not retrained: notebooks 12, 13 and
    15 reuse notebook 11's runs by asking for the same settings."""
    out = []
    for variant, lamb in runs_to_do(params):
        task = params.task(variant)
        folder = results_dir(name) / "runs" / params.run_key(variant, lamb)
        config = params.train_config(lamb, folder, params.epochs_for(variant, lamb))
        result = train(params.model(task), task, config,
                       grad_hook=params.grokfast(lamb), desc=f"T_{variant} λ={lamb:g}")
        result.model.cpu()  # the analyses run on CPU, also after a GPU paper run
        if not (folder / "run.pt").exists():  # reused runs stay untouched (results manifest)
            atomic_save_torch({"params": params, "variant": variant, "lamb": lamb,
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
