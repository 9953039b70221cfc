"""Gradient norms of a model's weight matrices on a task's training set (Syrkis & Søgaard §4.4,
Figure 17: the L2 norm of each matrix's gradient over training), read at weight snapshots."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
from torch import nn

from rt_lib.model import eval_mode
from rt_lib.tasks.base import FiniteTask

#: The model's weight matrices by part of the block (TransformerLens names, one layer).
PARTS: dict[str, tuple[str, ...]] = {
    "attention": ("W_Q", "W_K", "W_V", "W_O"),
    "mlp": ("W_in", "W_out"),
    "embedding": ("W_E", "W_pos"),
    "unembedding": ("W_U",),
}


def gradient_norms(model: nn.Module, task: FiniteTask) -> dict[str, float]:
    """{part: L2 norm} of the training loss's gradient over the whole training set (full batch,
    as miiii trains), for each part of :data:`PARTS`: the raw gradient of the loss, before any
    filter (grokfast) and with dropout off, so that a snapshot gives the same number on every
    read.  Nothing of the model is changed (no ``.grad`` is written)."""
    x, y = task.train
    named = dict(model.named_parameters())
    picked = {part: [p for name, p in named.items() if name.rsplit(".", 1)[-1] in names]
              for part, names in PARTS.items()}
    picked = {part: ps for part, ps in picked.items() if ps}
    flat = [p for ps in picked.values() for p in ps]
    with eval_mode(model), torch.enable_grad():
        loss = task.loss(model(x, last_only=task.last_only).float(), y)
        grads = torch.autograd.grad(loss, flat, allow_unused=True)
    by_param = {id(p): g for p, g in zip(flat, grads)}
    return {part: math.sqrt(sum(float(by_param[id(p)].double().pow(2).sum())
                                for p in ps if by_param[id(p)] is not None))
            for part, ps in picked.items()}


def settled_at(epochs: Sequence[int], norms: Sequence[float], fraction: float) -> int | None:
    """The first epoch from which ``norms`` (one per epoch of ``epochs``, in order) stay at or
    below ``fraction`` of their peak for good; None when the last one is above it."""
    if len(epochs) != len(norms) or not norms:
        raise ValueError("settled_at needs one norm per epoch, at least one")
    peak = max(norms)
    at = None
    for epoch, norm in zip(epochs, norms):
        if norm <= fraction * peak:
            at = epoch if at is None else at
        else:
            at = None
    return at


def norms_over(models: Mapping[int, nn.Module], task: FiniteTask) -> dict[int, dict[str, float]]:
    """{epoch: :func:`gradient_norms`} for every snapshot of ``models`` ({epoch: model})."""
    return {epoch: gradient_norms(m, task) for epoch, m in sorted(models.items())}
