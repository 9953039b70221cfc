"""Experiment 09: subspace selection (Zhong & Andreas §5, Tables 4, 5, 7; SPEC A.7).

How much of the variance of the hidden states lies along their top-10 principal components,
and how much along their top-10 coordinates ("neurons"), in random and fully trained
transformers, for modular addition, needle-in-a-haystack, memorisation and language.  The paper's
reading: a random transformer's computation happens in a low-dimensional subspace of its
residual stream that the trained embeddings select.

Models come from the checkpoints notebooks 01, 02, 05 and 08 save under ``results/`` (the
widest width, restart 0); where none exists, a small one is trained here with that notebook's
own settings at a smaller width and step count.  One function, :func:`~rt_lib.analysis.
explained_variance`, computes the statistic for every model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from rt_lib.analysis import explained_variance, hidden_states
from rt_lib.experiments.common import GridParams, load_checkpoint, train_grid
from rt_lib.experiments.memorisation import MemorisationParams
from rt_lib.experiments.modular_addition import ModularAdditionParams
from rt_lib.experiments.needle import NeedleParams
from rt_lib.experiments.registry import Experiment
from rt_lib.experiments.tinystories import TinyStoriesParams
from rt_lib.io import load_torch, results_dir, results_root
from rt_lib.params import Params, check_positive_ints
from rt_lib.seeding import derive, set_threads
from rt_lib.tasks.base import IGNORE, Task

NAME = "09_subspace"

#: task -> (notebook that trains its models, its parameters, the paper's table)
SOURCES: dict[str, tuple[str, type[GridParams], str]] = {
    "modular addition": ("01_modular_addition", ModularAdditionParams, "Table 4"),
    "needle-in-a-haystack": ("02_needle_in_a_haystack", NeedleParams, "Table 4"),
    "memorisation": ("05_memorisation", MemorisationParams, "Table 5"),
    "language": ("08_tinystories", TinyStoriesParams, "Table 7"),
}
KINDS = ("random transformer", "trained transformer")


@dataclass(frozen=True)
class SubspaceParams(Params):
    """Notebook 09's parameters; defaults = CPU profile."""

    tasks: tuple[str, ...] = tuple(SOURCES)
    models: tuple[str, ...] = KINDS
    k: int = 10  # top-k PCs vs top-k neurons (the paper: 10)
    max_states: int = 4000  # hidden-state vectors per layer, sampled with the seed
    fallback_width: int = 128  # models trained here when a notebook left no checkpoint
    fallback_steps: int = 300
    seed: int = 0
    threads: int | None = None  # None: $RT_THREADS or 1 (seeding.set_threads)

    def check(self) -> None:
        unknown = [t for t in self.tasks if t not in SOURCES]
        if unknown or not self.tasks:
            raise ValueError(f"tasks={list(self.tasks)!r}: each must be one of {list(SOURCES)}")
        bad = [m for m in self.models if m not in KINDS]
        if bad or not self.models:
            raise ValueError(f"models={list(self.models)!r}: each must be one of {list(KINDS)}")
        check_positive_ints("k", [self.k])
        check_positive_ints("max_states", [self.max_states])
        check_positive_ints("fallback_width", [self.fallback_width])
        check_positive_ints("fallback_steps", [self.fallback_steps])


EXPERIMENT = Experiment(NAME, SubspaceParams, reads=tuple(nb for nb, *_ in SOURCES.values()),
                        title="hidden-state variance on PCs and neurons (Tables 4, 5, 7)")


def find_checkpoint(notebook: str, kind: str) -> Path | None:
    """The widest restart-0 checkpoint of ``kind`` that ``notebook`` saved with the parameters
    that rebuild its task; None if there is none."""
    folder = results_dir(notebook, create=False) / "models"
    best: tuple[int, Path] | None = None
    for path in folder.glob(f"{kind.replace(' ', '_')}_d*_r0.pt"):
        width = int(path.stem.rsplit("_d", 1)[1].split("_")[0])
        if best is None or width > best[0]:
            best = (width, path)
    if best is None:
        return None
    state = load_torch(best[1])
    return best[1] if "params" in state else None  # older checkpoints cannot rebuild the task


def load_or_train(task_name: str, kind: str, params: SubspaceParams) -> tuple[nn.Module, Task, str]:
    """(model, its task, where it came from) for one task and model kind."""
    notebook, params_cls, _ = SOURCES[task_name]
    path = find_checkpoint(notebook, kind)
    if path is not None:
        state = load_torch(path)
        return load_checkpoint(str(path)), state["params"].task(), str(path.relative_to(results_root()))
    small = replace(params_cls(), models=(kind,), widths=(params.fallback_width,), restarts=1,
                    steps=params.fallback_steps, trained_steps=None, seed=params.seed,
                    threads=params.threads)
    task = small.task()
    grid = train_grid(task, small)
    model = grid.models[(kind, params.fallback_width, 0)].eval()
    return model, task, f"trained here: width {params.fallback_width}, {params.fallback_steps} steps"


def probe_inputs(task: Task) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Inputs whose hidden states are measured: the held-out set (the training set for
    memorisation, which has no other), and the scored positions (None = the last)."""
    sets = task.eval_sets()
    name = next(n for n in ("test", "valid", "train") if n in sets)
    tokens, targets = sets[name]
    positions = None if task.last_only else targets != IGNORE
    return tokens, positions


def subspace_rows(model: nn.Module, task: Task, k: int, max_states: int,
                  seed: int) -> list[dict[str, Any]]:
    """One row per layer: the explained-variance shares of the residual stream after it."""
    tokens, positions = probe_inputs(task)
    rows = []
    for layer, states in hidden_states(model, tokens, positions).items():
        if len(states) > max_states:
            gen = torch.Generator().manual_seed(derive(seed, "states"))
            states = states[torch.randperm(len(states), generator=gen)[:max_states]]
        ev = explained_variance(states, k)
        rows.append({"layer": layer, "pcs": ev["pcs"], "neurons": ev["neurons"],
                     "d_model": states.shape[1], "n_states": len(states)})
    return rows


def subspace_table(params: SubspaceParams) -> pd.DataFrame:
    """Every (task, model kind, layer): top-k PC and top-k neuron shares of the variance."""
    set_threads(params.threads)
    rows = []
    for task_name in params.tasks:
        for kind in params.models:
            model, task, source = load_or_train(task_name, kind, params)
            for row in subspace_rows(model, task, params.k, params.max_states, params.seed):
                rows.append({"task": task_name, "paper": SOURCES[task_name][2], "model": kind,
                             "width": model.cfg.d_model, **row, "source": source})
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """The paper's layout: per task, random vs trained, PCs vs neurons, at the last layer."""
    last = table.groupby(["task", "model"], sort=False).tail(1)
    wide = last.pivot_table(index=["task", "width"], columns="model", values=["pcs", "neurons"],
                            sort=False)
    kinds = list(dict.fromkeys(last["model"]))
    wide = wide[[(stat, kind) for kind in kinds for stat in ("pcs", "neurons")]]
    wide.columns = [f"{kind}: top-k {'PCs' if stat == 'pcs' else 'neurons'}"
                    for stat, kind in wide.columns]
    return wide.round(3).reset_index()
