"""Memorisation of random labels (Zhong & Andreas §5, Table 3;
docs/papers.md, random transformers: tasks).

Every pair (x, y) with x, y < n gets an independent uniform label z < n; the model is trained
and evaluated on all n² pairs, so accuracy measures storage, not generalisation.  Two layouts
(``layout``):

- ``"authors"`` (``hdmemorize_exp.py``): the sequence [x, n + y, z] over a vocabulary of 2n ids,
  the label read from the logits at the y position (their ``logits[:, -2]``).  The model thus
  reads [x, n + y]; it has the authors' 5 positions (``n_positions=5``), of which 2 are used.
- ``"equals"`` (this companion's earlier layout): [x, n + y, '='] with '=' = id 2n, vocabulary
  2n + 1, the label read at '='.

Both give the authors' parameter counts at n = 512, width 128 (262,784 trainable when random,
659,584 fully trained).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

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


Layout = Literal["authors", "equals"]
AUTHORS_POSITIONS = 5  # hdmemorize_exp.py: n_positions = 5


def memorisation(n: int = 512, label_seed: int = 0, layout: Layout = "authors") -> MemorisationTask:
    if not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n!r}")
    if layout not in ("authors", "equals"):
        raise ValueError(f"layout must be 'authors' or 'equals', got {layout!r}")
    x = torch.arange(n).repeat_interleave(n)
    y = torch.arange(n).repeat(n)
    labels = torch.randint(0, n, (n * n,), generator=torch.Generator().manual_seed(label_seed))
    if layout == "authors":
        tokens = torch.stack([x, n + y], dim=1)  # [n², 2]: the label is read at y
        vocab, n_ctx = 2 * n, AUTHORS_POSITIONS
    else:
        tokens = torch.stack([x, n + y, torch.full_like(x, 2 * n)], dim=1)  # [n², 3]: read at '='
        vocab, n_ctx = 2 * n + 1, 3
    data = (tokens, labels)
    return MemorisationTask(name=f"memorisation_{n}" + ("" if layout == "authors" else "_equals"),
                            d_vocab=vocab, d_vocab_out=vocab, n_ctx=n_ctx, train=data, test=data,
                            n_labels=n)


def bits_memorised(accuracy: float, task: MemorisationTask) -> float:
    """Bits recalled = correctly recalled labels × log2(n): each right label is log2(n) bits.
    Counts the labels a guess gets right by chance too (see :func:`bits_net_of_chance`)."""
    return accuracy * task.bits


def bits_net_of_chance(accuracy: float, task: MemorisationTask) -> float:
    """Bits recalled beyond guessing: the accuracy above chance (1/n), rescaled so that a
    model that guesses stores 0 bits and a perfect one all n² log2(n)."""
    chance = 1 / task.n_labels
    return max(accuracy - chance, 0.0) / (1 - chance) * task.bits
