"""Language modelling on a token stream (Zhong & Andreas §6, Figures 4-5;
docs/papers.md, random transformers: tasks).

:class:`LanguageModelling` is the :class:`~rt_lib.tasks.base.Task` the training loop sees: random
windows of ``n_ctx + 1`` tokens of the training stream (stories joined by the end-of-text token),
next-token targets at every position, and fixed non-overlapping windows of the held-out stories
as the ``valid`` set.  The tokenizer and sampling live in :mod:`rt_lib.tasks.tokenizer`.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from rt_lib.runtime.io import atomic_save_torch
from rt_lib.runtime.seeding import derive
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
        self._n_windows = n_windows
        self._valid = self._valid_windows()
        self._streams_file: str | None = None  # set by for_jobs: where a job reads the streams

    def _valid_windows(self) -> Batch:
        return self._windows(self.valid_ids, torch.arange(self._n_windows) * self.n_ctx)

    def _windows(self, ids: Tensor, starts: Tensor) -> Batch:
        index = starts[:, None] + torch.arange(self.n_ctx + 1)  # [b, t+1]
        chunk = ids[index].long()  # a job's memory-mapped streams are int32
        return chunk[:, :-1], chunk[:, 1:]

    def for_jobs(self, folder: str | Path) -> LanguageModelling:
        """A copy whose pickle carries the path of its token streams, not the streams: they are
        written once to ``folder`` (as int32, named by their content, so a changed text is
        another file) and every job memory-maps the same file.  The paper profile's training
        stream (the hub's TinyStories) would otherwise travel in each job's pickle."""
        digest = hashlib.sha256(f"{self.name} {self.d_vocab}".encode())
        for ids in (self.train_ids, self.valid_ids):
            digest.update(str(len(ids)).encode())
            digest.update(memoryview(ids.contiguous().numpy()))  # no copy of the stream
        path = Path(folder) / f"{self.name}-streams-{digest.hexdigest()[:16]}.pt"
        if not path.exists():  # written whole or not at all (atomic_save_torch)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_save_torch({"train": self.train_ids.to(torch.int32),
                               "valid": self.valid_ids.to(torch.int32)}, path)
        out = copy.copy(self)
        out._streams_file = str(path)
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._streams_file is not None:  # the job reads them from the file
            for key in ("train_ids", "valid_ids", "_valid"):
                del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "train_ids" not in state:
            # Memory-mapped: the jobs on one node share the file's pages instead of each
            # holding a copy (the file's checksum was checked when it was written)
            streams = torch.load(state["_streams_file"], mmap=True, weights_only=True)
            self.train_ids, self.valid_ids = streams["train"], streams["valid"]
            self._valid = self._valid_windows()

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
