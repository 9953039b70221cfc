"""Modular addition, (a + b) mod p (Zhong & Andreas, section 4.1;
docs/papers.md, random transformers: tasks)."""

from __future__ import annotations

import torch

from rt_lib.tasks.base import FiniteTask, split_indices


def modular_addition(p: int, train_fraction: float = 0.95, split_seed: int = 0) -> FiniteTask:
    """All p^2 pairs [a, b] -> (a + b) mod p, shuffled once with ``split_seed`` and cut.

    The authors' sequence is [a, b, c] with only c scored; the model reads [a, b] and predicts c
    at the last position, which is the same computation.  95 % / 5 % is the authors' split.
    """
    if not isinstance(p, int) or p < 2:
        raise ValueError(f"p must be an integer >= 2, got {p!r}")
    a = torch.arange(p).repeat_interleave(p)
    b = torch.arange(p).repeat(p)
    tokens = torch.stack([a, b], dim=1)  # [p^2, 2]
    labels = (a + b) % p  # [p^2]
    train_idx, test_idx = split_indices(p * p, train_fraction, split_seed)
    return FiniteTask(
        name=f"modular_addition_p{p}", d_vocab=p, d_vocab_out=p, n_ctx=2,
        train=(tokens[train_idx], labels[train_idx]), test=(tokens[test_idx], labels[test_idx]),
    )
