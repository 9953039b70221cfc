"""Experiment 15 (beyond both papers): the random transformer of Zhong & Andreas on miiii's tasks.

The miiii model with its attention and MLP frozen at their (He) initialisation and only W_E, W_pos
and W_U trained (``trainable="embeddings"``), on T_nanda and T_miiii: which prime remainders can a
random transformer compute?  The fully trained baseline is notebook 11's run with the same settings
(loaded, or trained if notebook 11 has not run).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from rt_lib.experiments import miiii
from rt_lib.experiments.miiii import MiiiiParams, MiiiiRun, smoke_train_params, training_params
from rt_lib.experiments.registry import Experiment
from rt_lib.params import Params, check_positive_ints

NAME = "15_random_miiii"


@dataclass(frozen=True)
class RandomMiiiiParams(Params):
    """Notebook 15's parameters."""

    variants: tuple[str, ...] = ("nanda", "miiii")
    train_params: dict = field(default_factory=dict)  # notebook 11's parameters (its config)
    # changed for the random models only (CPU: fewer epochs; the embeddings alone learn fast)
    random_overrides: dict = field(default_factory=lambda: {"epochs": 1500})
    widths: tuple[int, ...] = (128,)  # d_model of the random transformers

    @classmethod
    def smoke_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The smoke test reads notebook 11's smoke runs (:func:`smoke_train_params`)."""
        out = smoke_train_params(super().smoke_config(config))
        random = out.get("random_overrides", {"epochs": 1500})
        cut = {k: min(v, MiiiiParams.SMOKE[k]) for k, v in random.items() if k in MiiiiParams.SMOKE}
        return out | {"random_overrides": random | cut}

    def check(self) -> None:
        check_positive_ints("widths", self.widths)
        self.trained()
        for w in self.widths:
            self.random(w)

    def trained(self) -> MiiiiParams:
        return training_params(self.train_params, self.variants)

    def random(self, width: int) -> MiiiiParams:
        return training_params(self.train_params | self.random_overrides, self.variants,
                               d_model=width, trainable="embeddings")


def step_shapes(params: RandomMiiiiParams) -> list:
    """The widest random transformer on T_miiii (the trained runs are notebook 11's)."""
    shapes = [s for w in params.widths for s in miiii.step_shapes(params.random(w))]
    widest = max(params.widths)
    runs = sum((w / widest) ** 2 for w in params.widths) * len(params.variants)
    return [replace(shapes[-1], label=f"random {shapes[-1].label}", runs=runs)]


EXPERIMENT = Experiment(NAME, RandomMiiiiParams, reads=(miiii.NAME,), step_shapes=step_shapes,
                        title="the random transformer on miiii's tasks (beyond both papers)")


def run(params: RandomMiiiiParams) -> dict[str, MiiiiRun]:
    """{label: run}: "trained transformer (d=..)" and "random transformer (d=..)" per variant,
    labelled ``<model> · T_<variant>``."""
    out: dict[str, MiiiiRun] = {}
    trained = params.trained()
    for r in miiii.run(trained).values():  # notebook 11's runs: reuses them when finished
        out[f"trained (d={trained.d_model}) · T_{r.variant}"] = r
    for width in params.widths:
        for r in miiii.run(params.random(width), name=NAME).values():
            out[f"random (d={width}) · T_{r.variant}"] = r
    return out


def per_head_table(runs: dict[str, MiiiiRun], variant: str) -> pd.DataFrame:
    """Rows = heads q of one variant; one column of final validation accuracy per model."""
    table: pd.DataFrame | None = None
    for label, r in runs.items():
        if r.variant != variant:
            continue
        last = r.result.history.iloc[-1]
        col = pd.DataFrame({"q": list(r.task.qs),
                            label.split(" · ")[0]: [float(last[f"valid_acc_q{q}"]) for q in r.task.qs]})
        table = col if table is None else table.merge(col, on="q")
    if table is None:
        raise ValueError(f"no run of T_{variant} among {list(runs)}")
    return table


def solved(table: pd.DataFrame, column: str, threshold: float = 0.95) -> list[int]:
    """The heads q whose validation accuracy in ``column`` reaches ``threshold``."""
    return [int(q) for q, acc in zip(table["q"], table[column]) if acc >= threshold]


__all__ = ["NAME", "RandomMiiiiParams", "run", "per_head_table", "solved"]
