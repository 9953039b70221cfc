"""What every random-transformer experiment shares: named model kinds and one restart grid.

A notebook names its model kinds ("random transformer", "trained transformer", "trained LSTM",
"random LSTM"), widths and restarts; :func:`train_grid` trains each combination through the one
training loop and returns a metrics table with a row per run (seeded and recorded).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd
import torch
from torch import nn

from rt_lib.io import atomic_save_torch
from rt_lib.model import LSTMConfig, TransformerConfig, build_model, count_params
from rt_lib.seeding import derive
from rt_lib.tasks.base import Task
from rt_lib.train import TrainConfig, train

#: kind -> (architecture, trainable).  "random" = only embeddings and unembedding train (SPEC A).
MODEL_KINDS: dict[str, tuple[str, str]] = {
    "random transformer": ("transformer", "embeddings"),
    "trained transformer": ("transformer", "all"),
    "trained LSTM": ("lstm", "all"),
    "random LSTM": ("lstm", "embeddings"),
}


def check_kinds(kinds: Sequence[str]) -> None:
    unknown = [k for k in kinds if k not in MODEL_KINDS]
    if unknown or not kinds:
        raise ValueError(f"models={list(kinds)!r}: each must be one of {list(MODEL_KINDS)}")


def check_positive_ints(name: str, values: Sequence[int]) -> None:
    if not values or any(not isinstance(v, int) or v < 1 for v in values):
        raise ValueError(f"{name}={list(values)!r} must be a non-empty list of positive integers")


def model_config(kind: str, task: Task, width: int, n_layers: int, n_heads: int,
                 **transformer_overrides) -> TransformerConfig | LSTMConfig:
    arch, trainable = MODEL_KINDS[kind]
    if arch == "lstm":
        return LSTMConfig(d_vocab=task.d_vocab, d_model=width, n_layers=2,
                          d_vocab_out=task.d_vocab_out, trainable=trainable)
    return TransformerConfig(d_vocab=task.d_vocab, n_ctx=task.n_ctx, d_model=width,
                             n_layers=n_layers, n_heads=n_heads, d_vocab_out=task.d_vocab_out,
                             trainable=trainable, **transformer_overrides)


@dataclass
class GridResult:
    metrics: pd.DataFrame  # one row per (model, width, restart)
    histories: dict[tuple[str, int, int], pd.DataFrame] = field(default_factory=dict)
    models: dict[tuple[str, int, int], nn.Module] = field(default_factory=dict)


def train_grid(task: Task, kinds: Sequence[str], widths: Sequence[int], restarts: int,
               train_cfg: TrainConfig, n_layers: int = 2, n_heads: int = 4,
               arch_overrides: Mapping[str, Mapping[str, Any]] | None = None, seed: int = 0,
               checkpoint_dir: str | None = None) -> GridResult:
    """Train every model kind at every width ``restarts`` times; seeds derive from ``seed``.

    ``arch_overrides`` changes training settings per architecture, e.g.
    ``{"lstm": {"lr": 5e-3}}`` (the paper tuned the LSTM's learning rate separately, SPEC A).
    """
    rows, result = [], GridResult(metrics=pd.DataFrame())
    for width in widths:
        for kind in kinds:
            for restart in range(restarts):
                run_seed = derive(seed, f"restart{restart}") % 2**31
                cfg = model_config(kind, task, width, n_layers, n_heads)
                model = build_model(cfg, derive(run_seed, "init"))
                extra = (arch_overrides or {}).get(MODEL_KINDS[kind][0], {})
                tcfg = replace(train_cfg, seed=run_seed, **extra)
                res = train(model, task, tcfg, desc=f"{kind} d={width} #{restart}")
                key = (kind, width, restart)
                result.histories[key] = res.history
                result.models[key] = res.model
                last = res.history.iloc[-1]
                rows.append({
                    "model": kind, "width": width, "restart": restart, "seed": run_seed,
                    **{c: float(last[c]) for c in res.history.columns if c.startswith(("train_", "test_"))},
                    "trainable_params": count_params(model),
                    "total_params": count_params(model, trainable_only=False),
                    "steps": res.steps_done, "wall_time_s": res.wall_time_s,
                })
                if checkpoint_dir is not None:
                    slug = kind.replace(" ", "_")
                    atomic_save_torch(
                        {"config": cfg, "state_dict": res.model.state_dict(), "seed": run_seed},
                        f"{checkpoint_dir}/{slug}_d{width}_r{restart}.pt")
    result.metrics = pd.DataFrame(rows)
    return result


def load_checkpoint(path: str) -> nn.Module:
    """Rebuild a model saved by :func:`train_grid` (config + weights)."""
    state = torch.load(path, map_location="cpu", weights_only=False)
    model = build_model(state["config"], 0)
    model.load_state_dict(state["state_dict"])
    return model.eval()
