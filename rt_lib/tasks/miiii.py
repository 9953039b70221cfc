"""Prime remainders (Syrkis & Søgaard 2024, "miiii"; docs/papers.md, miiii: model and task):
T_miiii and its baselines.

Every n < p^2 is written as two base-p digits, n = x0 + x1 * p, and read as [x1, x0, "="] (the
authors' code; vocabulary p + 1, "=" = p).  T_miiii has one output head per prime q < p
predicting n mod q; together the heads decide whether n is prime.  Baselines on the same model:

* ``nanda``: (a + b) mod p from [a, b, "="], one head (Nanda et al. 2023).
* ``basis``: T_miiii with the label rows shuffled across samples (nothing to learn).
* ``masked``: T_miiii without the losses of q in {2, 3, 5, 7}.

The loss divides each head's cross-entropy by ln(q), the loss of a uniform guess, so every head
starts near 1; heads are combined by a sum (the paper's text) or a mean (the authors' code).

Two readouts of the same loss (``readout``): ``padded``, each head's log-softmax over logits
[b, n_tasks, q_max] with -inf beyond its q (the plain forward's layout, which every profile
trains with); ``compact``, the training forward's logits of the classes that exist only
[b, sum q] and each head's log-softmax over its own segment of them: no padded tensor to fill,
place and normalise (at p = 113, 1,480 columns rather than 29 x 109 = 3,161).  Equal up to
float rounding (tests/tasks/test_miiii_readout.py), not bit for bit: a declared choice (issue 59).
Evaluation reads the padded logits either way, so its numbers do not depend on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from rt_lib.primes import is_prime, primes_below
from rt_lib.runtime.seeding import derive
from rt_lib.tasks.base import Batch, FiniteTask

MiiiiVariant = Literal["miiii", "nanda", "basis", "masked"]
VARIANTS = ("miiii", "nanda", "basis", "masked")
# T_masked: the primes whose losses are dropped (docs/papers.md, miiii: model and task)
MASKED_PRIMES = (2, 3, 5, 7)
Split = Literal["paper", "code"]
Readout = Literal["padded", "compact"]
READOUTS = ("padded", "compact")


@dataclass
class MultiPrimeTask(FiniteTask):
    """A finite task with one head per modulus: targets [b, n_tasks]; logits [b, n_tasks, q_max]."""

    qs: tuple[int, ...] = ()  # the modulus of each head
    loss_weights: Tensor | None = None  # [n_tasks]: 1/ln(q), 0 for heads without a loss
    combine: Literal["sum", "mean"] = "sum"  # over heads: the paper's sum or the code's mean
    valid: Batch | None = None  # the split used for validation curves
    extra_sets: dict[str, Batch] = field(default_factory=dict)
    # the training loss's readout (module docstring): "padded" as every profile trains, or
    # "compact", the same loss over the classes that exist only, fewer operations per step
    readout: Readout = "padded"

    def __post_init__(self) -> None:
        if self.readout not in READOUTS:
            raise ValueError(f"readout must be one of {list(READOUTS)}, got {self.readout!r}")

    @property
    def compact_logits(self) -> bool:  # type: ignore[override]
        return self.readout == "compact"

    def segments(self, device: torch.device) -> tuple[Tensor, Tensor]:
        """(each head's q [n_tasks], each head's first column in the compact logits [n_tasks])
        on ``device``, made once per device: a tensor built from a list each step would be a
        host-to-device copy each step on a GPU."""
        cache = self.__dict__.setdefault("_segments", {})
        if device not in cache:
            sizes = torch.tensor(self.qs, device=device)
            cache[device] = (sizes, torch.cumsum(sizes, 0) - sizes)
        return cache[device]

    def compact_cross_entropy(self, logits: Tensor, targets: Tensor) -> Tensor:
        """[b, n_tasks] cross-entropy of each head from compact logits [b, sum q]: ln(sum of
        exp over the head's classes) - its target's logit, each head shifted by its own
        maximum (detached: the shift changes no gradient) so that no exp overflows."""
        b, n = targets.shape
        sizes, first = self.segments(logits.device)
        lengths = sizes.expand(b, n)
        top = torch.segment_reduce(logits.detach(), "max", lengths=lengths, axis=1)  # [b, n]
        shifted = logits - top.repeat_interleave(sizes, dim=1, output_size=logits.shape[1])
        total = torch.segment_reduce(shifted.exp(), "sum", lengths=lengths, axis=1)  # [b, n]
        return top + total.log() - logits.gather(1, targets + first)

    def padded(self, logits: Tensor) -> Tensor:
        """Compact logits [b, sum q] placed as the plain forward gives them: [b, n_tasks, q_max],
        -inf beyond each head's q (the same values)."""
        sizes, _ = self.segments(logits.device)
        q_max = max(self.qs)
        mask = torch.arange(q_max, device=logits.device) < sizes[:, None]  # [n_tasks, q_max]
        out = logits.new_full((len(logits), len(self.qs), q_max), float("-inf"))
        out[:, mask] = logits
        return out

    def per_head_loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        """[b, n_tasks] cross-entropy / ln(q) (0 for heads without a loss)."""
        # Rows of [b * n_tasks, q_max]: log-softmax over the contiguous class axis (the
        # [b, q, n_tasks] layout cross_entropy takes otherwise is strided and 4x slower).
        if logits.ndim == 2:  # the compact readout's [b, sum q]
            ce = self.compact_cross_entropy(logits, targets)
        else:
            b, n, q = logits.shape
            ce = F.cross_entropy(logits.reshape(b * n, q), targets.reshape(b * n),
                                 reduction="none").view(b, n)
        return ce * self.loss_weights.to(ce.device)

    def _combine(self, per_head: Tensor) -> Tensor:
        if self.combine == "sum":
            return per_head.sum(-1)
        return per_head.sum(-1) / int((self.loss_weights > 0).sum())

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        return self._combine(self.per_head_loss(logits, targets)).mean()

    def scores(self, logits: Tensor, targets: Tensor) -> dict[str, Tensor]:
        if logits.ndim == 2:  # compact: scored as placed, the numbers of the padded readout
            logits = self.padded(logits)
        per_head = self.per_head_loss(logits, targets)
        correct = (logits.argmax(-1) == targets).float()  # [b, n_tasks]
        out = {"loss": self._combine(per_head), "acc": correct.mean(-1)}
        for i, q in enumerate(self.qs):
            out[f"acc_q{q}"] = correct[:, i]
            out[f"loss_q{q}"] = per_head[:, i]  # cross-entropy / ln q (0 where masked)
        return out

    def eval_sets(self) -> dict[str, Batch]:
        sets = {"train": self.train}
        if self.valid is not None:
            sets["valid"] = self.valid
        return sets | self.extra_sets


def miiii_inputs(p: int) -> tuple[Tensor, Tensor]:
    """Every n < p^2 as tokens [x1, x0, "="] [p^2, 3], and n [p^2]."""
    n = torch.arange(p * p)
    x0, x1 = n % p, n // p
    tokens = torch.stack([x1, x0, torch.full_like(n, p)], dim=1)
    return tokens, n


def miiii_task(p: int, variant: MiiiiVariant = "miiii", split: Split = "code",
               train_fraction: float | None = None, n_valid: int = 1000, split_seed: int = 0,
               combine: Literal["sum", "mean"] = "sum", shuffle_seed: int = 0,
               readout: Readout = "padded") -> MultiPrimeTask:
    """T_miiii (or a baseline) at prime ``p``.

    ``split="code"``: the authors' code, ``train_fraction`` (default 0.5) train, the rest
    validation, no test.  ``split="paper"``: the paper's text, ``train_fraction`` (default 0.3)
    train, ``n_valid`` validation, the rest test.  Every sample is shuffled once with
    ``split_seed``.  ``readout``: the training loss's (module docstring)."""
    if not isinstance(p, int) or not is_prime(p):
        raise ValueError(f"p must be a prime, got {p!r}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown task {variant!r}; one of {list(VARIANTS)}")
    if split not in ("paper", "code"):
        raise ValueError(f"split must be 'paper' or 'code', got {split!r}")
    if combine not in ("sum", "mean"):
        raise ValueError(f"combine must be 'sum' or 'mean', got {combine!r}")
    tokens, n = miiii_inputs(p)
    if variant == "nanda":
        qs = (p,)
        labels = ((tokens[:, 0] + tokens[:, 1]) % p)[:, None]  # (a + b) mod p
    else:
        qs = tuple(primes_below(p))
        if not qs:
            raise ValueError(f"p={p} has no prime below it")
        labels = n[:, None] % torch.tensor(qs)  # [p^2, n_tasks]
        if variant == "basis":
            gen = torch.Generator().manual_seed(derive(shuffle_seed, "basis"))
            labels = labels[torch.randperm(len(labels), generator=gen)]
    weights = torch.tensor([1.0 / math.log(q) for q in qs])
    if variant == "masked":
        weights = weights * torch.tensor([q not in MASKED_PRIMES for q in qs], dtype=torch.float32)
        if not (weights > 0).any():
            raise ValueError(f"p={p}: every prime below it is masked")
    total = p * p
    frac = train_fraction if train_fraction is not None else (0.5 if split == "code" else 0.3)
    if not 0.0 < frac < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {frac}")
    order = torch.randperm(total, generator=torch.Generator().manual_seed(split_seed))
    n_train = round(frac * total)
    if split == "code":
        n_val = total - n_train
    else:
        if not isinstance(n_valid, int) or n_valid < 1:
            raise ValueError(f"n_valid must be a positive integer, got {n_valid!r}")
        n_val = n_valid
    if n_train < 1 or n_train + n_val > total or (split == "code" and n_val < 1):
        raise ValueError(f"p={p}: {total} samples cannot give {n_train} train + {n_val} validation")
    tr, va, te = order[:n_train], order[n_train : n_train + n_val], order[n_train + n_val :]
    extra = {"test": (tokens[te], labels[te])} if split == "paper" and len(te) else {}
    return MultiPrimeTask(
        name=f"{variant}_p{p}", d_vocab=p + 1, d_vocab_out=max(qs), n_ctx=3,
        train=(tokens[tr], labels[tr]), test=(tokens[va], labels[va]), qs=qs,
        loss_weights=weights, combine=combine, valid=(tokens[va], labels[va]), extra_sets=extra,
        readout=readout)
