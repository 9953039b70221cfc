"""The task interface every experiment plugs into.

A task says what the model sees (vocabulary, context length), how training batches are drawn,
which fixed sets it is evaluated on, and how logits are scored.  The training loop knows nothing
else about it, so modular addition, needle-in-a-haystack, Dyck, memorisation and miiii share one
loop.  Targets are either [b] (only the last position is scored: ``last_only``) or [b, t] with
``IGNORE`` at unscored positions (teacher-forced sequence outputs).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from rt_lib.runtime.seeding import derive

IGNORE = -100  # target value of an unscored position (PyTorch's cross-entropy ignore_index)

Batch = tuple[Tensor, Tensor]  # (tokens [b, t] long, targets [b] or [b, t] long)


class Task(ABC):
    """Interface: sizes, a training stream, fixed evaluation sets, a loss and metrics."""

    name: str
    d_vocab: int  # input vocabulary size
    d_vocab_out: int  # number of output classes
    n_ctx: int  # input length
    last_only: bool = True  # only the last position is scored: models may compute it alone
    # the training forward hands loss() a multi-task model's logits over the classes that exist
    # only (rt_lib.model.fast_paths.unembed's compact): a task whose loss reads them sets it
    compact_logits: bool = False

    @abstractmethod
    def get_batch(self, step: int, batch_size: int | None, seed: int) -> Batch:
        """The training batch of ``step``: a pure function of its arguments, so that a resumed
        run sees the same batches.  ``batch_size=None`` = full batch (finite tasks)."""

    @abstractmethod
    def eval_sets(self) -> dict[str, Batch]:
        """Fixed sets scored during training, e.g. ``{"train": ..., "test": ...}``."""

    def for_jobs(self, folder: str | Path) -> Task:
        """This task as a submitted training job carries it in its pickle
        (:mod:`rt_lib.jobs.executor`): the task itself, unless its data is large enough to belong in
        a file under ``folder`` that every job reads (:class:`~rt_lib.tasks.language.LanguageModelling`)."""
        return self

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """Training loss: mean cross-entropy over scored positions."""
        return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=IGNORE)

    def scores(self, logits: Tensor, targets: Tensor) -> dict[str, Tensor]:
        """Per-example scores [b], averaged over an eval set: loss and accuracy by default,
        each the mean over that example's scored positions."""
        if targets.ndim == 1:
            loss = F.cross_entropy(logits, targets, reduction="none")
            return {"loss": loss, "acc": (logits.argmax(-1) == targets).float()}
        scored = (targets != IGNORE).float()
        n = scored.sum(-1).clamp(min=1)
        ce = F.cross_entropy(logits.transpose(1, -1), targets, ignore_index=IGNORE,
                             reduction="none")  # [b, t], 0 where ignored
        correct = (logits.argmax(-1) == targets).float() * scored
        return {"loss": ce.sum(-1) / n, "acc": correct.sum(-1) / n}


@dataclass
class FiniteTask(Task):
    """A task given by a fixed train and test set (modular addition, memorisation, miiii)."""

    name: str
    d_vocab: int
    d_vocab_out: int
    n_ctx: int
    train: Batch
    test: Batch
    last_only: bool = True
    _epoch_cache: tuple[tuple[int, int], Tensor] | None = field(default=None, repr=False)

    def get_batch(self, step: int, batch_size: int | None, seed: int) -> Batch:
        x, y = self.train
        n = len(x)
        if batch_size is None or batch_size >= n:
            return x, y
        # Epochs of a fresh permutation each; a short tail is dropped so every batch is full.
        per_epoch = n // batch_size
        epoch, i = divmod(step, per_epoch)
        if self._epoch_cache is None or self._epoch_cache[0] != (seed, epoch):
            gen = torch.Generator().manual_seed(derive(seed, f"epoch{epoch}"))
            self._epoch_cache = ((seed, epoch), torch.randperm(n, generator=gen))
        idx = self._epoch_cache[1][i * batch_size : (i + 1) * batch_size]
        return x[idx], y[idx]

    def eval_sets(self) -> dict[str, Batch]:
        return {"train": self.train, "test": self.test}


class StreamTask(Task):
    """A task with an endless training stream and a fixed test set the stream never repeats.

    Subclasses define :meth:`sample` (``n`` random examples from a generator).  The test set is
    ``n_test`` draws from the task's distribution with ``test_seed``; every training batch is
    drawn from a generator seeded by (seed, step), and rows equal to a test sequence are
    replaced by fresh draws (docs/papers.md, random transformers: tasks).  The test set
    thus follows the task's distribution exactly, and the stream follows it conditioned on not
    being a test sequence.  Where single sequences carry much probability (Dyck strings of a few
    pairs) the test set holds all of them and training never sees them: accuracy on them is
    generalisation, not recall.
    """

    max_draws = 50  # rounds of resampling before a too-small sequence space is reported

    def __init__(self, n_test: int, test_seed: int) -> None:
        if not isinstance(n_test, int) or n_test < 1:
            raise ValueError(f"n_test must be a positive integer, got {n_test!r}")
        self.test = self.sample(n_test, torch.Generator().manual_seed(test_seed))
        self._test_rows = {_row_key(r) for r in self.test[0]}

    @abstractmethod
    def sample(self, n: int, gen: torch.Generator) -> Batch:
        """``n`` random examples (tokens [n, n_ctx], targets) drawn with ``gen``."""

    def get_batch(self, step: int, batch_size: int | None, seed: int) -> Batch:
        if batch_size is None:
            raise ValueError(f"{self.name} is an endless stream: give a batch_size, not None")
        gen = torch.Generator().manual_seed(derive(seed, f"step{step}"))
        xs, ys, have = [], [], 0
        for _ in range(self.max_draws):
            x, y = self.sample(batch_size - have, gen)
            keep = ~self.is_test_sequence(x)
            xs.append(x[keep])
            ys.append(y[keep])
            have += int(keep.sum())
            if have == batch_size:
                return torch.cat(xs), torch.cat(ys)
        raise ValueError(
            f"{self.name}: could not draw {batch_size} sequences outside the test set in "
            f"{self.max_draws} rounds; the sequence space is too small for n_test={len(self.test[0])}"
        )

    def eval_sets(self) -> dict[str, Batch]:
        return {"test": self.test}

    def is_test_sequence(self, tokens: Tensor) -> Tensor:
        """[b] bool: which rows of ``tokens`` are test sequences."""
        return torch.tensor([_row_key(r) in self._test_rows for r in tokens], dtype=torch.bool)


def _row_key(row: Tensor) -> bytes:
    return row.numpy().tobytes()


def split_indices(n: int, train_fraction: float, seed: int) -> tuple[Tensor, Tensor]:
    """Shuffle range(n) once with ``seed`` and cut it at ``train_fraction``."""
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_train = round(train_fraction * n)
    if n_train == 0 or n_train == n:
        raise ValueError(
            f"train_fraction={train_fraction} leaves an empty split of {n} examples"
        )
    return order[:n_train], order[n_train:]


class EvalCapped(Task):
    """``task`` with each evaluation set cut to its first ``rows`` rows; the training stream,
    loss, metrics and every other attribute are the task's own."""

    def __init__(self, task: Task, rows: int) -> None:
        self.inner, self.rows = task, rows
        self.name, self.d_vocab, self.d_vocab_out = task.name, task.d_vocab, task.d_vocab_out
        self.n_ctx, self.last_only = task.n_ctx, task.last_only

    def __getattr__(self, name: str) -> Any:  # task-specific fields (p, n_digits, ...)
        if name.startswith("__") or "inner" not in self.__dict__:  # e.g. while unpickled
            raise AttributeError(name)
        return getattr(self.__dict__["inner"], name)

    def get_batch(self, step: int, batch_size: int | None, seed: int):
        return self.inner.get_batch(step, batch_size, seed)

    def for_jobs(self, folder: str | Path) -> EvalCapped:
        return EvalCapped(self.inner.for_jobs(folder), self.rows)

    def eval_sets(self):
        return {k: (x[: self.rows], y[: self.rows]) for k, (x, y) in self.inner.eval_sets().items()}

    def loss(self, logits, targets):
        return self.inner.loss(logits, targets)

    def scores(self, logits, targets):
        return self.inner.scores(logits, targets)
