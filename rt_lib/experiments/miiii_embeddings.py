"""Experiment 12: what miiii's embeddings learned (Syrkis & Søgaard 2024, §4.1, Figs. 7-13).

Analyses notebook 11's runs: it asks :func:`rt_lib.experiments.miiii.run` for the same training
settings (``train_params``: the values notebook 11 was given), which loads the finished runs, or
trains them if notebook 11 has not run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rt_lib import fourier
from rt_lib.experiments.miiii import NAME as TRAINING
from rt_lib.experiments.miiii import MiiiiParams, MiiiiRun, training_params
from rt_lib.experiments.registry import Experiment
from rt_lib.params import Params

NAME = "12_miiii_embeddings"


@dataclass(frozen=True)
class EmbeddingParams(Params):
    """Notebook 12's parameters."""

    variants: tuple[str, ...] = ("nanda", "miiii", "basis")
    train_params: dict = field(default_factory=dict)  # notebook 11's parameters (its config)
    fractions: tuple[float, ...] = (0.5, 0.9)  # the marks on the singular-value curves
    n_vectors: int = 4  # top singular vectors shown

    def check(self) -> None:
        if not all(0 < f <= 1 for f in self.fractions):
            raise ValueError(f"fractions must lie in (0, 1], got {self.fractions}")
        if self.n_vectors < 1:
            raise ValueError(f"n_vectors must be a positive integer, got {self.n_vectors!r}")
        self.training()  # checks variants and train_params

    def training(self) -> MiiiiParams:
        return training_params(self.train_params, self.variants)


EXPERIMENT = Experiment(NAME, EmbeddingParams, reads=(TRAINING,),
                        title="miiii's embeddings: positions, SVD, Fourier (Figs. 7-13)")


def embedding_table(runs: dict[str, MiiiiRun], p: int,
                    fractions: tuple[float, ...] = (0.5, 0.9)) -> pd.DataFrame:
    """Per variant: positional correlation, how many singular values of W_E reach each fraction
    (of their sum and of their squares), and the share of the strongest few frequencies."""
    rows = []
    for variant, r in runs.items():
        model = r.result.model.cpu().eval()
        emb = fourier.token_embedding(model, p)
        s = fourier.singular_values(emb)
        power = np.sort(fourier.fourier_power(emb))[::-1]
        row: dict[str, Any] = {"task": f"T_{variant}",
                               "pearson(W_pos[0], W_pos[1])": fourier.positional_correlation(model)}
        for squared, kind in ((False, "sum of s"), (True, "sum of s²")):
            for f, count in zip(fractions, fourier.cumulative_marks(s, fractions, squared)):
                row[f"{f:.0%} of {kind}"] = count
        row["top-3 frequencies' power share"] = float(power[:3].sum())
        row["final valid acc"] = float(r.result.history["valid_acc"].iloc[-1])
        rows.append(row)
    return pd.DataFrame(rows)
