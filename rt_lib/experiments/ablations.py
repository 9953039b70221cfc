"""Experiment 06: which embedding matrices must train (Zhong & Andreas Table 2; SPEC A).

A random transformer trains three matrices: token embedding W_E, position embedding W_pos and
unembedding W_U.  Table 2 trains fewer: W_U alone; W_E and W_pos alone; W_E and W_U with W_pos
frozen at its random init or replaced by fixed sinusoids.  Each task runs with the settings of
its own notebook (02-04, 01) in a chosen profile, so the ablation is the only change.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from rt_lib.experiments import decimal_addition, modular_addition, needle, parentheses
from rt_lib.experiments.common import MODEL_KINDS, GridParams, GridResult
from rt_lib.experiments.registry import DEFAULT_PROFILE, Experiment, available_profiles
from rt_lib.params import Params, check_positive_ints

NAME = "06_embedding_ablations"

#: task -> (its notebook's module, parameter class, task constructor)
TASKS = {
    "modular addition": (modular_addition, modular_addition.ModularAdditionParams),
    "needle": (needle, needle.NeedleParams),
    "decimal addition": (decimal_addition, decimal_addition.DecimalParams),
    "parentheses": (parentheses, parentheses.ParenthesesParams),
}

VARIANTS = (
    "random transformer",  # W_E, W_pos, W_U all train: the reference row
    "random: unembedding only",
    "random: embeddings only",
    "random: W_E + W_U, random W_pos",
    "random: W_E + W_U, sinusoidal W_pos",
)


def task_params(task: str, profile: str, **changes) -> GridParams:
    """The parameters of ``task``'s own notebook in ``profile`` ("cpu" = its defaults,
    otherwise configs/<profile>/<notebook>.yaml), with ``changes`` applied."""
    module, cls = TASKS[task]
    if profile not in available_profiles():
        raise ValueError(f"task_profile={profile!r} is not a profile; profiles: "
                         f"{', '.join(available_profiles())}")
    try:
        settings = module.EXPERIMENT.profile_config(profile)
    except FileNotFoundError as err:
        raise ValueError(f"task_profile={profile!r}: {err}") from None
    return cls(**{**settings, **changes})


@dataclass(frozen=True)
class AblationParams(Params):
    """Notebook 06's parameters; defaults = CPU profile."""

    tasks: tuple[str, ...] = ("decimal addition",)
    variants: tuple[str, ...] = VARIANTS
    task_profile: str = DEFAULT_PROFILE
    # None: each task's own widths.  The CPU profile: 512, where the random transformer adds (the
    # width notebook 03 cannot afford for three restarts of three models)
    widths: tuple[int, ...] | None = (512,)
    steps: int | None = 250  # None: each task's own steps (CPU: 250, 3-digit addition at width 512)
    restarts: int = 1
    seed: int = 0
    threads: int | None = None  # None: $RT_THREADS or 1 (seeding.set_threads)

    def check(self) -> None:
        unknown = [t for t in self.tasks if t not in TASKS]
        if unknown or not self.tasks:
            raise ValueError(f"tasks={list(self.tasks)!r}: each must be one of {list(TASKS)}")
        bad = [v for v in self.variants if v not in MODEL_KINDS]  # any kind may be compared
        if bad or not self.variants:
            raise ValueError(f"variants={list(self.variants)!r}: each must be one of "
                             f"{list(MODEL_KINDS)}")
        if self.widths is not None:
            check_positive_ints("widths", self.widths)
        check_positive_ints("restarts", [self.restarts])
        for task in self.tasks:  # each task's settings validate themselves now, not mid-run
            self.params_for(task)

    def params_for(self, task: str) -> GridParams:
        changes = {"models": self.variants, "restarts": self.restarts, "seed": self.seed,
                   "threads": self.threads}
        if self.widths is not None:
            changes["widths"] = self.widths
        if self.steps is not None:
            changes["steps"] = self.steps
        return task_params(task, self.task_profile, **changes)


EXPERIMENT = Experiment(NAME, AblationParams, title="which embeddings must train (Table 2)")


def run(params: AblationParams) -> GridResult:
    """Metrics with one row per (task, variant, width, restart) and a ``task`` column."""
    frames = []
    for task in params.tasks:
        module, _ = TASKS[task]
        grid = module.run(params.params_for(task), save_models=False)
        frames.append(grid.metrics.assign(task=task))
    return GridResult(metrics=pd.concat(frames, ignore_index=True))


def ablation_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """Table 2: median test accuracy, a row per variant and a column per task."""
    table = metrics.pivot_table(index="model", columns="task", values="test_acc",
                                aggfunc="median", sort=False)
    return table.round(3).reset_index().rename(columns={"model": "trained matrices"})
