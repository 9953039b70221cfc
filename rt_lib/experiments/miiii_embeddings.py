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
from rt_lib.claims import Claims
from rt_lib.experiments.miiii import NAME as TRAINING
from rt_lib.experiments.miiii import MiiiiParams, MiiiiRun, smoke_train_params, training_params
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
    pos_dims: int = 37  # Pearson r also over the first pos_dims dimensions: the authors' Fig. 7 shows 37

    @classmethod
    def smoke_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The smoke test reads notebook 11's smoke runs (:func:`smoke_train_params`)."""
        return smoke_train_params(super().smoke_config(config))

    def check(self) -> None:
        if not all(0 < f <= 1 for f in self.fractions):
            raise ValueError(f"fractions must lie in (0, 1], got {self.fractions}")
        if self.n_vectors < 1:
            raise ValueError(f"n_vectors must be a positive integer, got {self.n_vectors!r}")
        d_model = self.training().d_model  # also checks variants and train_params
        if not isinstance(self.pos_dims, int) or not 3 <= self.pos_dims <= d_model:
            raise ValueError(f"pos_dims must be an integer in 3..d_model={d_model}, got {self.pos_dims!r}")

    def training(self) -> MiiiiParams:
        return training_params(self.train_params, self.variants)


EXPERIMENT = Experiment(
    NAME, EmbeddingParams, reads=(TRAINING,),
    title="miiii's embeddings: positions, SVD, Fourier (Figs. 7-13)",
    not_shown_on_cpu={
        "nanda-positions-more-alike": (
            "over the first 37 of the CPU model's 128 dimensions the gap is within init noise "
            "(T_nanda +0.49, T_miiii +0.24; 2 sigma = 0.47); over all 128 it is 1.13 (+0.43 vs "
            "-0.70), recorded as nanda-positions-more-alike-all-dims; the authors' 37 of 256 "
            "dimensions at p = 113 are the paper profile's")})


def pos_columns(pos_dims: int) -> tuple[str, str]:
    """The summary's two columns of Pearson r: over the first ``pos_dims`` dimensions, over all."""
    return f"r(W_pos), first {pos_dims} dims", "r(W_pos), all dims"


def embedding_table(runs: dict[str, MiiiiRun], p: int,
                    fractions: tuple[float, ...] = (0.5, 0.9), pos_dims: int = 37) -> pd.DataFrame:
    """Per variant: positional correlation (over the first ``pos_dims`` dimensions, as the
    authors' figure shows them, and over all), how many singular values of W_E reach each fraction
    (of their sum and of their squares), and the share of the strongest few frequencies."""
    rows = []
    first, every = pos_columns(pos_dims)
    for variant, r in runs.items():
        model = r.result.model.cpu().eval()
        emb = fourier.token_embedding(model, p)
        s = fourier.singular_values(emb)
        power = np.sort(fourier.fourier_power(emb))[::-1]
        row: dict[str, Any] = {"task": f"T_{variant}",
                               first: fourier.positional_correlation(model, pos_dims),
                               every: fourier.positional_correlation(model)}
        for squared, kind in ((False, "sum of s"), (True, "sum of s²")):
            for f, count in zip(fractions, fourier.cumulative_marks(s, fractions, squared)):
                row[f"{f:.0%} of {kind}"] = count
        row["top-3 frequencies' power share"] = float(power[:3].sum())
        row["final valid acc"] = float(r.result.history["valid_acc"].iloc[-1])
        rows.append(row)
    return pd.DataFrame(rows)


def check_claims(table: pd.DataFrame, params: EmbeddingParams, claims: Claims) -> None:
    """Record notebook 12's claims from :func:`embedding_table`'s ``table``."""
    paper = "Syrkis & Søgaard 2024"
    row = table.set_index("task")
    first, every = pos_columns(params.pos_dims)
    d_model = params.training().d_model
    # Two independent r's differ by more than 2 sigma of their difference (sqrt 2 x the noise of
    # one) with probability ~5 %: below that, the ordering could be the initialisation's.
    margin = 2 * np.sqrt(2) * fourier.correlation_noise(params.pos_dims)
    gap = row.loc["T_nanda", first] - row.loc["T_miiii", first]
    claims.check("nanda-positions-more-alike", f"{paper}, §4.1, Fig. 7",
                 "Pearson r of the two positional embeddings: T_nanda +0.95 above T_miiii -0.64",
                 f"first {params.pos_dims} dims (the authors' figure): T_nanda {row.loc['T_nanda', first]:+.2f}, "
                 f"T_miiii {row.loc['T_miiii', first]:+.2f} (gap needs > {margin:.2f}, 2 sigma of init noise); "
                 f"all {d_model} dims: {row.loc['T_nanda', every]:+.2f}, {row.loc['T_miiii', every]:+.2f}",
                 bool(gap > margin), scale="p = 113, d 256 (the paper profile)")
    margin_all = 2 * np.sqrt(2) * fourier.correlation_noise(d_model)
    gap_all = row.loc["T_nanda", every] - row.loc["T_miiii", every]
    claims.check("nanda-positions-more-alike-all-dims", f"{paper}, §4.1, Fig. 7",
                 "Pearson r of the two positional embeddings: T_nanda +0.95 above T_miiii -0.64",
                 f"all {d_model} dims: T_nanda {row.loc['T_nanda', every]:+.2f}, T_miiii "
                 f"{row.loc['T_miiii', every]:+.2f} (gap needs > {margin_all:.2f}, 2 sigma of init noise)",
                 bool(gap_all > margin_all), scale="p = 113, d 256 (the paper profile)")
    top3 = row["top-3 frequencies' power share"]
    claims.check("spectra-concentration-order", f"{paper}, §4.1, Figs. 11-13",
                 "W_E's Fourier spectrum: T_nanda sparsest, T_miiii between, T_basis flat",
                 "top-3 frequency share: " + ", ".join(f"{k} {v:.2f}" for k, v in top3.items()),
                 bool(top3["T_nanda"] > top3["T_miiii"] > top3["T_basis"]), scale="p = 113 (the paper profile)")
    n90 = f"{params.fractions[-1]:.0%} of sum of s"
    claims.check("miiii-singular-values-diffuse", f"{paper}, §4.1, Figs. 8-9",
                 "T_miiii needs more singular values of W_E than T_nanda for the same share",
                 f"singular values to {n90}: T_miiii {row.loc['T_miiii', n90]}, T_nanda {row.loc['T_nanda', n90]}",
                 bool(row.loc["T_miiii", n90] >= row.loc["T_nanda", n90]), scale="p = 113 (the paper profile)")
    claims.done()
