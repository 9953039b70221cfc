"""Experiments 12 and 13: what the miiii model learned (Syrkis & Søgaard 2024, section 4).

Both notebooks analyse notebook 11's runs.  They ask :func:`rt_lib.experiments.miiii.run` for the
same training settings (``train_params``: the values notebook 11 was given), which loads the
finished runs and their log-spaced weight snapshots, or trains them if notebook 11 has not run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from rt_lib import fourier
from rt_lib.experiments.common import from_namespace
from rt_lib.experiments.miiii import MiiiiParams, MiiiiRun, run
from rt_lib.io import load_torch
from rt_lib.model import build_model

NAME_EMBEDDINGS = "12_miiii_embeddings"
NAME_NEURONS = "13_miiii_neurons"


def training_params(train_params: dict[str, Any], variants: tuple[str, ...],
                    **overrides: Any) -> MiiiiParams:
    """Notebook 11's settings (defaults + ``train_params``) for the given variants only."""
    if not isinstance(train_params, dict):
        raise ValueError(f"train_params must be a dict of notebook 11's parameters, got {train_params!r}")
    unknown = set(train_params) - set(MiiiiParams.__dataclass_fields__)
    if unknown:
        raise ValueError(f"train_params has unknown keys {sorted(unknown)}; "
                         f"allowed: {sorted(MiiiiParams.__dataclass_fields__)}")
    try:
        return MiiiiParams(**(train_params | {"variants": tuple(variants), "lambda_zero": False}
                              | overrides))
    except (ValueError, TypeError) as err:
        raise ValueError(f"train_params (notebook 11's parameters): {err}") from None


def load_runs(params: MiiiiParams) -> dict[str, MiiiiRun]:
    """{variant: run} of the grokfast runs (lambda as set), loaded or trained."""
    return {r.variant: r for r in run(params)}


def snapshot_models(r: MiiiiRun) -> dict[int, nn.Module]:
    """{epoch: model} for every weight snapshot of a run, in epoch order (eval mode, CPU)."""
    cfg = r.result.model.cfg
    out = {}
    paths = sorted(Path(r.folder, "snapshots").glob("step_*.pt"),
                   key=lambda f: int(f.stem.split("_")[1]))
    if not paths:
        raise FileNotFoundError(f"no weight snapshots in {r.folder / 'snapshots'}")
    for path in paths:
        state = load_torch(path)
        model = build_model(cfg, 0)
        model.load_state_dict(state["state_dict"])
        out[int(state["step"])] = model.eval()
    return out


@dataclass(frozen=True)
class EmbeddingParams:
    """Notebook 12's parameters."""

    variants: tuple[str, ...] = ("nanda", "miiii", "basis")
    train_params: dict = field(default_factory=dict)  # notebook 11's parameters (its config)
    fractions: tuple[float, ...] = (0.5, 0.9)  # the marks on the singular-value curves
    n_vectors: int = 4  # top singular vectors shown

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", tuple(self.variants))
        object.__setattr__(self, "fractions", tuple(self.fractions))
        if not all(0 < f <= 1 for f in self.fractions):
            raise ValueError(f"fractions must lie in (0, 1], got {self.fractions}")
        if not isinstance(self.n_vectors, int) or self.n_vectors < 1:
            raise ValueError(f"n_vectors must be a positive integer, got {self.n_vectors!r}")
        self.training()  # checks variants and train_params

    @classmethod
    def from_namespace(cls, namespace: dict[str, Any]) -> EmbeddingParams:
        return from_namespace(cls, namespace)

    def training(self) -> MiiiiParams:
        return training_params(self.train_params, self.variants)


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


@dataclass(frozen=True)
class NeuronParams:
    """Notebook 13's parameters."""

    variant: str = "miiii"
    train_params: dict = field(default_factory=dict)  # notebook 11's parameters (its config)
    k_std: float = 1.0  # active = power above mean + k std (code: 1; paper text: 2)
    n_neurons: int = 6  # neurons shown in the static figure
    n_top: int = 3  # top frequencies listed per neuron

    def __post_init__(self) -> None:
        if not isinstance(self.k_std, (int, float)) or self.k_std < 0:
            raise ValueError(f"k_std must be a non-negative number, got {self.k_std!r}")
        for name in ("n_neurons", "n_top"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.training()

    @classmethod
    def from_namespace(cls, namespace: dict[str, Any]) -> NeuronParams:
        return from_namespace(cls, namespace)

    def training(self) -> MiiiiParams:
        return training_params(self.train_params, (self.variant,))


def neuron_grids(models: dict[int, nn.Module], p: int) -> dict[int, np.ndarray]:
    """{epoch: activations [p, p, d_mlp]} over the input grid for every snapshot."""
    return {epoch: fourier.neuron_grid(m, p) for epoch, m in models.items()}


def active_frequency_table(grids: dict[int, np.ndarray], k_values: tuple[float, ...]) -> pd.DataFrame:
    """Per snapshot: the number of active frequency pairs of the MLP (power summed over neurons)
    for each threshold mean + k std, and the share of that power combining both digits."""
    rows = []
    for epoch, grid in grids.items():
        power = fourier.spectrum_2d(grid)
        row: dict[str, Any] = {"epoch": epoch}
        for k in k_values:
            row[f"active (k = {k:g})"] = len(fourier.active_frequencies(power, k))
        row["interaction share"] = fourier.interaction_share(power)
        rows.append(row)
    return pd.DataFrame(rows)


def strongest_neurons(grid: np.ndarray, n: int) -> list[int]:
    """The ``n`` neurons with the largest activation variance over the grid (the live ones)."""
    return [int(i) for i in np.argsort(grid.reshape(-1, grid.shape[-1]).var(0))[::-1][:n]]


def readout_strength(model: nn.Module) -> np.ndarray:
    """[d_mlp, n_tasks]: norm of each neuron's write (W_out row) through each head's W_U; how much
    a neuron can move task q's logits."""
    w_out = model.blocks[-1].mlp.W_out.detach().cpu()  # [m, d]
    w_u = model.W_U.detach().cpu()  # [n_tasks, d, q]
    return torch.einsum("md,ndq->mnq", w_out, w_u).norm(dim=-1).double().numpy()


__all__ = ["NAME_EMBEDDINGS", "NAME_NEURONS", "training_params", "load_runs", "snapshot_models",
           "EmbeddingParams", "embedding_table", "NeuronParams", "neuron_grids",
           "active_frequency_table", "strongest_neurons", "readout_strength"]
