"""Experiment 01: modular addition on a random transformer (Zhong & Andreas, section 4.1, Fig. 3)."""

from __future__ import annotations

from dataclasses import dataclass

from rt_lib.experiments.common import GridParams, GridResult
from rt_lib.io import results_dir
from rt_lib.tasks import modular_addition

NAME = "01_modular_addition"


@dataclass(frozen=True)
class ModularAdditionParams(GridParams):
    """Notebook 01's parameters; the defaults are the CPU profile (configs/paper/ has the paper's)."""

    p: int = 59
    train_fraction: float = 0.95
    split_seed: int = 0
    steps: int = 800
    lr: float = 3e-3
    lstm_steps: int | None = 100
    warmup_steps: int = 100
    eval_every: int = 50
    stop_at_test_acc: float | None = 0.99

    def check_task(self) -> None:
        if not isinstance(self.p, int) or self.p < 2:
            raise ValueError(f"p must be an integer >= 2, got {self.p!r}")


def run(params: ModularAdditionParams, save_models: bool = True) -> GridResult:
    task = modular_addition(params.p, params.train_fraction, params.split_seed)
    ckpt = str(results_dir(NAME) / "models") if save_models else None
    return params.run_grid(task, ckpt)
