"""Decimal addition (Zhong & Andreas §4.3; docs/papers.md, random transformers: tasks).

Two operands of exactly ``n_digits`` digits, written least-significant digit first, then their
sum, also least-significant first, and a stop token::

    a_0 .. a_{n-1} + b_0 .. b_{n-1} = s_0 .. s_m <stop> <pad> ...

Operand digits and sum digits are different tokens (ids 0-9 and 13-22), as in the authors'
vocabulary.  Training is teacher-forced: the model reads the sequence up to each output token and
predicts it.  The authors' code never scores the first sum digit (a mask quirk);
``score_first_digit`` picks what the training loss does (targets always hold every output
token), and :meth:`scores` reports accuracy both ways.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rt_lib.tasks.base import IGNORE, Batch, StreamTask

PLUS, EQUALS, PAD = 10, 11, 12
OUT_OFFSET = 13  # sum digit d is token 13 + d
STOP = 23
VOCAB = 24


class DecimalAddition(StreamTask):
    last_only = False  # every output token is scored, teacher-forced

    def __init__(self, n_digits: int = 10, n_test: int = 4000, test_seed: int = 0,
                 score_first_digit: bool = True) -> None:
        if not isinstance(n_digits, int) or not 1 <= n_digits <= 18:
            raise ValueError(f"n_digits must be an integer in 1..18, got {n_digits!r}")
        self.name = f"decimal_addition_{n_digits}"
        self.n_digits = n_digits
        self.score_first_digit = score_first_digit
        self.d_vocab = self.d_vocab_out = VOCAB
        # a, '+', b, '=', up to n+1 sum digits, stop; the model reads all but the last token.
        self.n_ctx = 3 * n_digits + 3
        self.first_out = 2 * n_digits + 1  # input position of '=', which predicts s_0
        super().__init__(n_test, test_seed)

    def sample(self, n: int, gen: torch.Generator) -> Batch:
        d = self.n_digits
        # Exactly d digits: the most significant one is 1..9 (or 0..9 when d = 1, as in 0 + 5).
        a = torch.randint(0, 10, (n, d), generator=gen)
        b = torch.randint(0, 10, (n, d), generator=gen)
        if d > 1:
            a[:, -1] = torch.randint(1, 10, (n,), generator=gen)
            b[:, -1] = torch.randint(1, 10, (n,), generator=gen)
        # Schoolbook addition, least-significant digit first.
        s = torch.zeros(n, d + 1, dtype=torch.long)
        carry = torch.zeros(n, dtype=torch.long)
        for i in range(d):
            total = a[:, i] + b[:, i] + carry
            s[:, i], carry = total % 10, total // 10
        s[:, d] = carry
        n_sum = d + carry  # digits of the sum: d, or d + 1 when the last carry is 1
        seq = torch.full((n, self.n_ctx + 1), PAD, dtype=torch.long)
        seq[:, :d] = a
        seq[:, d] = PLUS
        seq[:, d + 1 : 2 * d + 1] = b
        seq[:, 2 * d + 1] = EQUALS
        start = 2 * d + 2
        seq[:, start : start + d + 1] = s + OUT_OFFSET
        rows = torch.arange(n)
        seq[rows, start + n_sum] = STOP  # overwrites the leading 0 when there is no last carry
        tokens, targets = seq[:, :-1], seq[:, 1:].clone()
        # Score the output tokens only: sum digits and stop, i.e. targets from index 2d + 1 on
        # until (and including) the stop token.
        pos = torch.arange(self.n_ctx)
        scored = (pos >= self.first_out) & (pos <= self.first_out + n_sum[:, None])
        targets[~scored] = IGNORE
        return tokens, targets

    def authors_mask(self, targets: Tensor) -> Tensor:
        """[b, t] bool: the positions the authors' mask scores (``labels[:-1] >= 20`` in
        task_additionstream.py: every position whose input is a sum digit or the stop token).
        That skips the first sum digit (its input is '=') and adds the pad after the stop token
        whenever the sum has no final carry (the stop token is then not the last input)."""
        scored = targets != IGNORE
        mask = scored.clone()
        mask[:, self.first_out] = False
        after_stop = torch.zeros_like(scored)
        after_stop[:, 1:] = targets[:, :-1] == STOP
        return mask | after_stop

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        if not self.score_first_digit:  # the authors' mask: s_0 never, the pad after stop too
            mask = self.authors_mask(targets)
            targets = torch.where(mask, targets.masked_fill(targets == IGNORE, PAD), IGNORE)
        return super().loss(logits, targets)

    def scores(self, logits: Tensor, targets: Tensor) -> dict[str, Tensor]:
        """Per example: ``loss``; ``acc`` = fraction of output tokens right (every sum digit and
        the stop token); ``acc_authors`` = the fraction right under the authors' mask
        (:meth:`authors_mask`); ``exact`` = 1 when the whole sum and stop are right."""
        out = super().scores(logits, targets)
        scored = targets != IGNORE
        predicted = logits.argmax(-1)
        right = (predicted == targets) & scored
        mask = self.authors_mask(targets)
        right_authors = (predicted == targets.masked_fill(~scored, PAD)) & mask
        out["acc_authors"] = right_authors.sum(-1).float() / mask.sum(-1).clamp(min=1)
        out["exact"] = (right.sum(-1) == scored.sum(-1)).float()
        return out

    def chance_floor(self) -> dict[str, float]:
        """What a model scores on the test set without adding: it gets the structure right (the
        final carry digit, which the operands' leading digits nearly fix, and the stop token) and
        guesses every other sum digit (1 in 10).  ``acc``: per-token accuracy of that model;
        ``exact``: its exact-match accuracy (10^-n)."""
        _, targets = self.test
        scored = targets != IGNORE
        n_scored = scored.sum(-1).float()
        n_guessed = torch.full_like(n_scored, self.n_digits)
        per_token = (n_guessed * 0.1 + (n_scored - n_guessed)) / n_scored
        return {"acc": per_token.mean().item(), "exact": 0.1 ** self.n_digits}
