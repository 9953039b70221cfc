"""Parenthesis balancing, Dyck-1 (Zhong & Andreas §4.4; docs/papers.md, random transformers: tasks).

A string of '(' and ')' followed by '?'; the answer is ')' if the string is balanced and '('
otherwise.  Two generators (``generator``), both with the authors' mix: one third random strings
of length 1..2·max_pairs, two thirds balanced strings of 1..max_pairs pairs (``min_pairs`` raises
both lower bounds), half of which may then be mutated by runs of random swaps and/or flips.

- ``"uniform"`` (this companion's): balanced strings uniform over Dyck words of their length,
  every swap applied, left padding so that '?' is always the last token.
- ``"authors"`` (``task_dyckstream.py`` of fjzzq2002/random_transformers): their recursive
  generator, which favours nesting; swaps of positions i >= j skipped (``if p >= q: continue``, so
  about half of the swaps do nothing); the random strings also receive the mutations; right
  padding, the answer read at the position of '?'.

About half of the examples end up balanced (chance level, reported by the notebook).
"""

from __future__ import annotations

import random
from typing import Literal

import torch
from torch import Tensor

from rt_lib.tasks.base import IGNORE, Batch, StreamTask

PAD, OPEN, CLOSE, ASK = 0, 1, 2, 3
VOCAB = 4


def is_balanced(steps: Tensor, lengths: Tensor) -> Tensor:
    """[n] bool from +1/-1 steps [n, L] (0 beyond each row's length): no prefix goes below 0
    and the whole string sums to 0."""
    depth = steps.cumsum(-1)
    inside = torch.arange(steps.shape[1]) < lengths[:, None]
    never_negative = ((depth >= 0) | ~inside).all(-1)
    return never_negative & (depth[:, -1] == 0)


def random_dyck_steps(pairs: Tensor, max_len: int, gen: torch.Generator) -> Tensor:
    """Uniform random balanced strings as +1/-1 steps [n, max_len] (0-padded), ``pairs`` [n].

    Cycle lemma: a random arrangement of n (+1)s and n+1 (-1)s has exactly one rotation whose
    proper prefixes are all >= 0: the one that starts right after the first minimum of the prefix
    sums.  Dropping that rotation's final -1 gives a uniformly random Dyck word of n pairs.
    """
    n = len(pairs)
    width = 2 * int(pairs.max()) + 1
    length = 2 * pairs + 1  # [n]
    slot = torch.arange(width)
    sign = torch.where(slot < pairs[:, None], 1, -1)  # [n, width]: n ups, then downs
    active = slot < length[:, None]
    keys = torch.rand(n, width, generator=gen).masked_fill(~active, 2.0)  # inactive sort last
    walk = sign.gather(1, keys.argsort(-1)).masked_fill(~active, 0)  # shuffled active steps
    depth = walk.cumsum(-1).masked_fill(~active, width + 1)  # inactive never the minimum
    start = depth.argmin(-1) + 1  # argmin returns the first minimum
    idx = (start[:, None] + slot) % length[:, None]
    rotated = walk.gather(1, idx).masked_fill(slot >= 2 * pairs[:, None], 0)
    out = torch.zeros(n, max_len, dtype=torch.long)
    cols = min(width, max_len)
    out[:, :cols] = rotated[:, :cols]
    return out


def _geometric(n: int, gen: torch.Generator) -> Tensor:
    """[n] counts k >= 1 with P(k) = 2^-k (the authors' "while coin: rep += 1"), capped at 30."""
    u = torch.rand(n, generator=gen).clamp(min=1e-9)
    return (1 + torch.floor(torch.log2(1 / u))).long().clamp(max=30)


Generator = Literal["uniform", "authors"]


class Parentheses(StreamTask):
    """With ``generator="uniform"`` strings are left-padded so that '?' is always the last token
    and the answer is read at one fixed position.  (The authors right-pad; with right padding, a
    training stream that never repeats a test string would never show '?' at the early positions
    of the shortest strings, which a test set of thousands holds all of, and the answer
    position's embedding there would stay untrained.)  ``generator="authors"`` right-pads as
    they do and scores the token after '?' wherever it is."""

    def __init__(self, max_pairs: int = 30, n_test: int = 4000, test_seed: int = 0,
                 min_pairs: int = 1, generator: Generator = "uniform") -> None:
        if generator not in ("uniform", "authors"):
            raise ValueError(f"generator must be 'uniform' or 'authors', got {generator!r}")
        self.generator = generator
        # uniform: the answer is read at the last position, after '?'; authors: wherever '?' is
        self.last_only = generator == "uniform"
        if not isinstance(max_pairs, int) or max_pairs < 1:
            raise ValueError(f"max_pairs must be a positive integer, got {max_pairs!r}")
        if not isinstance(min_pairs, int) or not 1 <= min_pairs <= max_pairs:
            raise ValueError(f"min_pairs must be an integer in 1..max_pairs={max_pairs}, got {min_pairs!r}")
        self.name = f"parentheses_{min_pairs}-{max_pairs}" + ("_authors" if generator == "authors" else "")
        self.max_pairs, self.min_pairs = max_pairs, min_pairs
        self.max_len = 2 * max_pairs  # random strings: length 1..60 in the paper
        self.d_vocab = self.d_vocab_out = VOCAB
        self.n_ctx = self.max_len + 1  # the string and '?'
        super().__init__(n_test, test_seed)

    def sample(self, n: int, gen: torch.Generator) -> Batch:
        if self.generator == "authors":
            return self._sample_authors(n, gen)
        L = self.max_len
        kind = torch.randint(0, 3, (n,), generator=gen)  # 0 random, 1 balanced, 2 mutated
        # Random strings: length 2 min_pairs - 1 .. L (1..60 in the paper), each '(' or ')'.
        rand_len = torch.randint(2 * self.min_pairs - 1, L + 1, (n,), generator=gen)
        rand_steps = torch.where(torch.rand(n, L, generator=gen) < 0.5, 1, -1)
        rand_steps = rand_steps.masked_fill(torch.arange(L) >= rand_len[:, None], 0)
        # Balanced strings of 1..max_pairs pairs.
        pairs = torch.randint(self.min_pairs, self.max_pairs + 1, (n,), generator=gen)
        steps = random_dyck_steps(pairs, L, gen)
        lengths = 2 * pairs
        # Mutations as in the authors' generator: code U{0..3} per mutated string, bit 1 = a run
        # of swaps, bit 2 = a run of flips; run lengths are geometric (1, 2, ... with prob 1/2,
        # 1/4, ...), flip runs doubled with prob 2/3 (an even number of flips can rebalance).
        code = torch.randint(0, 4, (n,), generator=gen).masked_fill(kind != 2, 0)
        n_swaps = _geometric(n, gen).masked_fill(code & 1 == 0, 0)
        n_flips = _geometric(n, gen)
        n_flips = torch.where(torch.rand(n, generator=gen) < 2 / 3, 2 * n_flips, n_flips)
        n_flips = n_flips.masked_fill(code & 2 == 0, 0)
        rows = torch.arange(n)
        for r in range(int(n_swaps.max())):
            i = (torch.rand(n, generator=gen) * lengths).long()
            j = (torch.rand(n, generator=gen) * lengths).long()
            on = rows[n_swaps > r]
            si, sj = steps[on, i[on]].clone(), steps[on, j[on]].clone()
            steps[on, i[on]], steps[on, j[on]] = sj, si
        for r in range(int(n_flips.max())):
            f = (torch.rand(n, generator=gen) * lengths).long()
            on = rows[n_flips > r]
            steps[on, f[on]] *= -1
        steps = torch.where((kind == 0)[:, None], rand_steps, steps)
        lengths = torch.where(kind == 0, rand_len, lengths)

        right = torch.full((n, self.n_ctx), PAD, dtype=torch.long)
        right[:, :L] = torch.where(steps == 1, OPEN, torch.where(steps == -1, CLOSE, PAD))
        right[rows, lengths] = ASK
        # Left-pad: rotate each row right so that '?' lands on the last position.
        shift = self.n_ctx - 1 - lengths
        tokens = right.gather(1, (torch.arange(self.n_ctx) - shift[:, None]) % self.n_ctx)
        targets = torch.where(is_balanced(steps, lengths), CLOSE, OPEN)  # [n]
        return tokens, targets

    def answers(self, tokens: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
        """The answer [n] of each example and the position [n] it is read at (that of '?')."""
        where = (tokens == ASK).long().argmax(-1)
        if targets.ndim == 1:
            return targets, where
        return targets[torch.arange(len(targets)), where], where

    def _sample_authors(self, n: int, gen: torch.Generator) -> Batch:
        """The authors' generator, string by string (Python's ``random`` seeded from ``gen``);
        the strings are drawn in Python, then turned into tensors once per batch (a GPU step
        waits on this: per-row tensors made it the job's slowest part)."""
        rng = random.Random(int(torch.randint(0, 2**62, (1,), generator=gen)))
        strings = [authors_string(rng, self.min_pairs, self.max_pairs) for _ in range(n)]
        lengths = torch.tensor([len(s) for s in strings])
        pad = self.max_len
        steps = torch.tensor([[1 if c == "(" else -1 for c in s] + [0] * (pad - len(s)) for s in strings])
        tokens = torch.where(steps == 1, OPEN, torch.where(steps == -1, CLOSE, PAD))
        tokens = torch.cat([tokens, torch.full((n, 1), PAD, dtype=torch.long)], 1)  # [n, n_ctx]
        rows = torch.arange(n)
        tokens[rows, lengths] = ASK
        targets = torch.full((n, self.n_ctx), IGNORE, dtype=torch.long)
        targets[rows, lengths] = torch.where(is_balanced(steps, lengths), CLOSE, OPEN)  # read at '?'
        return tokens, targets


def _nested(rng: random.Random, pairs: int) -> str:
    """The authors' recursive balanced string: wrap one of ``pairs - 1`` with prob 1/2, else
    concatenate two of a uniform split (favours nesting over the uniform Dyck word)."""
    if pairs == 0:
        return ""
    if pairs == 1:
        return "()"
    if rng.randint(0, 1):
        return "(" + _nested(rng, pairs - 1) + ")"
    u = rng.randint(1, pairs - 1)
    return _nested(rng, u) + _nested(rng, pairs - u)


def authors_string(rng: random.Random, min_pairs: int, max_pairs: int) -> str:
    """One string of the authors' mix (task_dyckstream.py, with ``min_pairs`` as our lower
    bound): mutation code U{0..3} for every string (bit 1 swaps, bit 2 flips), one third random
    strings, two thirds balanced of which half are left unmutated; swaps of i >= j skipped."""
    mutate = rng.randint(0, 3)
    if rng.randint(0, 2) == 0:
        length = rng.randint(2 * min_pairs - 1, 2 * max_pairs)
        s = "".join(rng.choice("()") for _ in range(length))
    else:
        s = _nested(rng, rng.randint(min_pairs, max_pairs))
        if rng.randint(0, 1):
            mutate = 0
    if mutate & 1:
        runs = 1
        while rng.randint(0, 1):
            runs += 1
        for _ in range(runs):
            i, j = rng.randint(0, len(s) - 1), rng.randint(0, len(s) - 1)
            if i >= j:
                continue
            s = s[:i] + s[j] + s[i + 1 : j] + s[i] + s[j + 1 :]
    if mutate & 2:
        runs = 1
        while rng.randint(0, 1):
            runs += 1
        if rng.randint(0, 2):
            runs *= 2
        for _ in range(runs):
            i = rng.randint(0, len(s) - 1)
            s = s[:i] + (")" if s[i] == "(" else "(") + s[i + 1 :]
    return s
