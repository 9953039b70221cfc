"""Experiment 01: modular addition on a random transformer (Zhong & Andreas, section 4.1, Fig. 3)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from rt_lib.experiments.common import (GridResult, check_kinds, check_positive_ints,
                                       train_grid)
from rt_lib.io import results_dir
from rt_lib.tasks import modular_addition
from rt_lib.train import TrainConfig

NAME = "01_modular_addition"


@dataclass(frozen=True)
class ModularAdditionParams:
    """Notebook 01's parameters; the defaults are the CPU profile (configs/paper/ has the paper's)."""

    p: int = 59
    train_fraction: float = 0.95
    split_seed: int = 0
    models: tuple[str, ...] = ("random transformer", "trained transformer", "trained LSTM")
    widths: tuple[int, ...] = (256,)
    n_layers: int = 2
    n_heads: int = 4
    restarts: int = 1
    steps: int = 800
    batch_size: int | None = None
    lr: float = 3e-3
    lstm_lr: float = 5e-3
    lstm_steps: int | None = 100
    weight_decay: float = 1e-3
    warmup_steps: int = 100
    eval_every: int = 50
    stop_at_test_acc: float | None = 0.99
    seed: int = 0
    threads: int | None = 2
    bf16: bool = False
    device: str = "auto"

    def __post_init__(self) -> None:
        # Normalise lists from papermill/YAML to tuples, then validate before any work is done.
        object.__setattr__(self, "models", tuple(self.models))
        object.__setattr__(self, "widths", tuple(self.widths))
        if not isinstance(self.p, int) or self.p < 2:
            raise ValueError(f"p must be an integer >= 2, got {self.p!r}")
        check_kinds(self.models)
        check_positive_ints("widths", self.widths)
        check_positive_ints("restarts", [self.restarts])
        for w in self.widths:
            if w % self.n_heads:
                raise ValueError(f"widths: width {w} is not divisible by n_heads={self.n_heads}")
        # Building both training configs validates steps, lr, batch_size, ... with their messages.
        replace(self.train_config(), **self.lstm_overrides())

    def lstm_overrides(self) -> dict:
        """The paper's LSTM lr (SPEC A); fewer steps in the CPU profile, where it is slowest."""
        extra = {"lr": self.lstm_lr}
        if self.lstm_steps is not None:
            extra["steps"] = self.lstm_steps
        return extra

    def train_config(self) -> TrainConfig:
        return TrainConfig(steps=self.steps, batch_size=self.batch_size, lr=self.lr,
                           weight_decay=self.weight_decay, warmup_steps=self.warmup_steps,
                           eval_every=self.eval_every, seed=self.seed, threads=self.threads,
                           bf16=self.bf16, device=self.device,
                           **self.stop_rule())

    def stop_rule(self) -> dict:
        if self.stop_at_test_acc is None:
            return {}
        return {"stop_metric": "test_acc", "stop_value": self.stop_at_test_acc}


def run(params: ModularAdditionParams, save_models: bool = True) -> GridResult:
    task = modular_addition(params.p, params.train_fraction, params.split_seed)
    ckpt = str(results_dir(NAME) / "models") if save_models else None
    return train_grid(task, params.models, params.widths, params.restarts, params.train_config(),
                      n_layers=params.n_layers, n_heads=params.n_heads,
                      arch_overrides={"lstm": params.lstm_overrides()},
                      seed=params.seed, checkpoint_dir=ckpt)
