"""Experiment 02: needle-in-a-haystack recall on a random transformer (Zhong & Andreas §4.2, Fig. 2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor, nn

from rt_lib.analysis import attention_patterns, needle_head_scores
from rt_lib.claims import Claims
from rt_lib.experiments.common import (GridResult, StreamGridParams, grid_step_shapes,
                                       run_task_grid)
from rt_lib.pipeline.registry import Experiment
from rt_lib.experiments.reporting import check_solves
from rt_lib.model import build_model
from rt_lib.tasks import NeedleInAHaystack
from rt_lib.verdicts import every, larger

NAME = "02_needle_in_a_haystack"


@dataclass(frozen=True)
class NeedleParams(StreamGridParams):
    """Notebook 02's parameters; defaults = CPU profile (configs/paper/ has the paper's)."""

    # Left out of the notebook's parameters cell: the smoke test's cut of the evaluation sets,
    # set by configs only.
    CELL_OMITS: ClassVar[frozenset[str]] = frozenset({"eval_rows"})

    max_keys: int = 2  # pairs per sequence: k ~ U{min_keys..max_keys} (paper: 1..30)
    min_keys: int = 1  # fewest pairs per sequence
    n_values: int = 16  # value tokens (paper: 127)
    n_markers: int = 2  # marker tokens the keys are drawn from (paper: 30)
    n_test: int = 200  # fixed test set (paper: 4,000); the training stream never repeats it
    test_seed: int = 0  # the draw of the test set
    widths: tuple[int, ...] = (16, 256)
    steps: int = 1000  # optimiser steps (paper: 10,000)

    def task(self) -> NeedleInAHaystack:
        return NeedleInAHaystack(max_keys=self.max_keys, min_keys=self.min_keys,
                                 n_values=self.n_values, n_markers=self.n_markers,
                                 n_test=self.n_test, test_seed=self.test_seed)


EXPERIMENT = Experiment(NAME, NeedleParams, title="needle-in-a-haystack recall (Table 1, Fig. 2)",
                        step_shapes=grid_step_shapes)


def run(params: NeedleParams, save_models: bool = True) -> GridResult:
    return run_task_grid(NAME, params, save_models)


UNTRAINED_SEEDS = (100, 101, 102)  # the baseline's initialisations, apart from the restarts'


def best_head_scores(model: nn.Module, examples: Tensor) -> tuple[float, float]:
    """(the best layer-1 head's value -> marker score, the best last-layer head's query ->
    value score) of ``model`` on ``examples`` (:func:`rt_lib.analysis.needle_head_scores`)."""
    scores = needle_head_scores(attention_patterns(model, examples), examples)
    return float(scores["value_to_marker"][0].max()), float(scores["query_to_value"][-1].max())


def check_claims(result: GridResult, examples: Tensor, claims: Claims) -> None:
    """Record notebook 02's claims: Table 1's needle recall, and Figure 2's two heads, judged
    against the same scores of untrained transformers of the same shape (embeddings at their
    random init, seeds :data:`UNTRAINED_SEEDS`): for each job, the random transformer's best
    head on every restart above every untrained model's best head."""
    check_solves(claims, "rt-t1-needle", result.metrics, "test_acc", "needle-in-a-haystack",
                 scale="width 1024, 30 keys (the paper profile)")
    width = int(result.metrics.loc[result.metrics["model"] == "random transformer", "width"].max())
    trained = [best_head_scores(m, examples) for (kind, w, _), m in sorted(result.models.items())
               if kind == "random transformer" and w == width]
    cfg = next(m for (kind, w, _), m in result.models.items()
               if kind == "random transformer" and w == width).cfg
    untrained = [best_head_scores(build_model(cfg, seed), examples) for seed in UNTRAINED_SEEDS]
    jobs = ("layer 1 value -> marker", "last layer query -> value")
    verdicts = [larger([t[j] for t in trained], [u[j] for u in untrained]) for j in range(2)]
    claims.check("rt-fig2-needle-heads", f"width {width}, best head per restart vs untrained: "
                 + "; ".join(f"{job} {', '.join(f'{t[j]:.2f}' for t in trained)} vs "
                             f"{', '.join(f'{u[j]:.2f}' for u in untrained)}"
                             for j, job in enumerate(jobs)),
                 every(verdicts), scale="width 1024, 30 keys (the paper profile)")
    claims.done()
