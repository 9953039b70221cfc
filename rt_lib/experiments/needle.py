"""Experiment 02: needle-in-a-haystack recall on a random transformer (Zhong & Andreas §4.2, Fig. 2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rt_lib.experiments.common import (GridParams, GridResult, grid_step_shapes,
                                       run_task_grid)
from rt_lib.experiments.registry import Experiment
from rt_lib.tasks import NeedleInAHaystack

NAME = "02_needle_in_a_haystack"


@dataclass(frozen=True)
class NeedleParams(GridParams):
    """Notebook 02's parameters; defaults = CPU profile (configs/paper/ has the paper's)."""

    max_keys: int = 2
    min_keys: int = 1
    n_values: int = 16
    n_markers: int = 2
    n_test: int = 200  # of about 1,060 distinct sequences: the stream keeps the rest to train on
    test_seed: int = 0
    SMOKE: ClassVar[dict[str, Any]] = GridParams.SMOKE | {"n_test": 32}
    widths: tuple[int, ...] = (16, 256)
    restarts: int = 3
    steps: int = 1000
    batch_size: int | None = 64
    lr: float = 1e-2
    trained_lr: float | None = 1e-3  # the paper's lr; the random transformer's 1e-2 stalls it
    warmup_steps: int = 100
    eval_every: int = 100

    def task(self) -> NeedleInAHaystack:
        return NeedleInAHaystack(max_keys=self.max_keys, min_keys=self.min_keys,
                                 n_values=self.n_values, n_markers=self.n_markers,
                                 n_test=self.n_test, test_seed=self.test_seed)


EXPERIMENT = Experiment(NAME, NeedleParams, title="needle-in-a-haystack recall (Table 1, Fig. 2)",
                        step_shapes=grid_step_shapes)


def run(params: NeedleParams, save_models: bool = True) -> GridResult:
    return run_task_grid(NAME, params, save_models)
