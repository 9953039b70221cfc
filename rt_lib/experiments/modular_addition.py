"""Experiment 01: modular addition on a random transformer (Zhong & Andreas, section 4.1, Fig. 3)."""

from __future__ import annotations

from dataclasses import dataclass

from rt_lib.experiments.common import GridParams, GridResult, run_task_grid
from rt_lib.experiments.registry import Experiment
from rt_lib.tasks import FiniteTask, modular_addition

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
    # The fully trained transformer reaches 100 % within 100 steps: a budget, not a stop (nothing
    # stops on the test set; every model trains its steps)
    trained_steps: int | None = 100

    def task(self) -> FiniteTask:
        return modular_addition(self.p, self.train_fraction, self.split_seed)


EXPERIMENT = Experiment(NAME, ModularAdditionParams, title="modular addition (Table 1, Fig. 3)")


def run(params: ModularAdditionParams, save_models: bool = True) -> GridResult:
    return run_task_grid(NAME, params, save_models)
