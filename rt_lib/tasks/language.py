"""Language modelling on a token stream (Zhong & Andreas §6, Figures 4-5; SPEC A task 6).

:class:`LanguageModelling` is the :class:`~rt_lib.tasks.base.Task` the training loop sees: random
windows of ``n_ctx + 1`` tokens of the training stream (stories joined by the end-of-text token),
next-token targets at every position, and fixed non-overlapping windows of the held-out stories
as the ``valid`` set.  The tokenizer and sampling live in :mod:`rt_lib.text`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rt_lib.seeding import derive
from rt_lib.tasks.base import Batch, Task


class LanguageModelling(Task):
    """Next-token prediction on a token stream; ``valid`` = held-out stories' windows."""

    last_only = False

    def __init__(self, train_ids: Tensor, valid_ids: Tensor, d_vocab: int, n_ctx: int,
                 n_valid_windows: int | None = None, name: str = "tinystories") -> None:
        if not isinstance(n_ctx, int) or n_ctx < 2:
            raise ValueError(f"n_ctx must be an integer >= 2, got {n_ctx!r}")
        for split, ids in (("training", train_ids), ("validation", valid_ids)):
            if len(ids) < n_ctx + 1:
                raise ValueError(f"the {split} stream has {len(ids)} tokens, fewer than "
                                 f"n_ctx + 1 = {n_ctx + 1}: use more stories or a shorter n_ctx")
        if int(max(train_ids.max(), valid_ids.max())) >= d_vocab:
            raise ValueError(f"token ids reach beyond d_vocab={d_vocab}")
        self.name, self.d_vocab, self.d_vocab_out, self.n_ctx = name, d_vocab, d_vocab, n_ctx
        self.train_ids, self.valid_ids = train_ids, valid_ids
        # Fixed, non-overlapping windows of the held-out stream: every scored token is a
        # validation token predicted from up to n_ctx - 1 tokens of its own window.
        n_windows = (len(valid_ids) - 1) // n_ctx
        if n_valid_windows is not None:
            if n_valid_windows < 1:
                raise ValueError(f"n_valid_windows must be positive, got {n_valid_windows}")
            n_windows = min(n_windows, n_valid_windows)
        starts = torch.arange(n_windows) * n_ctx
        self._valid = self._windows(valid_ids, starts)

    def _windows(self, ids: Tensor, starts: Tensor) -> Batch:
        index = starts[:, None] + torch.arange(self.n_ctx + 1)  # [b, t+1]
        chunk = ids[index]
        return chunk[:, :-1], chunk[:, 1:]

    def get_batch(self, step: int, batch_size: int | None, seed: int) -> Batch:
        if batch_size is None:
            raise ValueError("language modelling needs a batch_size (the stream has no full batch)")
        gen = torch.Generator().manual_seed(derive(seed, f"step{step}"))
        starts = torch.randint(0, len(self.train_ids) - self.n_ctx, (batch_size,), generator=gen)
        return self._windows(self.train_ids, starts)

    def eval_sets(self) -> dict[str, Batch]:
        return {"valid": self._valid}

    @property
    def n_valid_tokens(self) -> int:
        return self._valid[1].numel()
