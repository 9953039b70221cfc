"""Memorisation of random labels (Zhong & Andreas §5; SPEC A task 5, Table 3).

Every pair (x, y) with x, y < n gets an independent uniform label z < n; the model is trained
and evaluated on all n² pairs, so accuracy measures storage, not generalisation.  Input tokens
follow the authors' shared vocabulary of 2n + 1 ids: x, then n + y, then '=' (id 2n); the label
is read at '='.  With n = 512 and width 128 this reproduces the authors' parameter counts
(262,784 trainable when random, 659,584 fully trained).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from rt_lib.tasks.base import Batch, FiniteTask


@dataclass
class MemorisationTask(FiniteTask):
    n_labels: int = 0

    @property
    def bits(self) -> float:
        """Information in all labels: n² · log2(n) bits (2,359,296 at n = 512)."""
        return len(self.train[0]) * math.log2(self.n_labels)

    def eval_sets(self) -> dict[str, Batch]:
        return {"train": self.train}  # train and test are the same set: evaluate it once


def memorisation(n: int = 512, label_seed: int = 0) -> MemorisationTask:
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    x = torch.arange(n).repeat_interleave(n)
    y = torch.arange(n).repeat(n)
    tokens = torch.stack([x, n + y, torch.full_like(x, 2 * n)], dim=1)  # [n², 3]
    labels = torch.randint(0, n, (n * n,), generator=torch.Generator().manual_seed(label_seed))
    data = (tokens, labels)
    return MemorisationTask(name=f"memorisation_{n}", d_vocab=2 * n + 1, d_vocab_out=2 * n + 1,
                            n_ctx=3, train=data, test=data, n_labels=n)


def bits_memorised(accuracy: float, task: MemorisationTask) -> float:
    """Bits stored = correctly recalled labels × log2(n): each right label is log2(n) bits."""
    return accuracy * task.bits
