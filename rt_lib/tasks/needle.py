"""Needle-in-a-haystack: in-context associative recall (Zhong & Andreas §4.2;
docs/papers.md, random transformers: tasks).

A sequence lists k marker/value pairs, then asks for one marker again; the answer is the value
that followed it::

    m_1 v_1 m_2 v_2 ... m_k v_k q(m_j)  ->  v_j

Token ids follow the authors' vocabulary of 256: 0 = padding, values 1..127, markers 128..157,
queries 158..187 (query of marker i = i + 158 - 128, a token distinct from the marker itself).
Sequences are right-padded with 0 to a fixed length, and only the answer, predicted at the query's
position, is scored.  The paper draws k ~ U{1..30} (length 2·30 + 1 = 61 tokens before padding);
the CPU profile uses fewer keys and values.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rt_lib.tasks.base import IGNORE, Batch, StreamTask

PAD = 0
VALUE_OFFSET = 1  # values are tokens 1 .. n_values
MARKER_OFFSET = 128  # markers are tokens 128 .. 128 + max_keys - 1
QUERY_OFFSET = 158  # the query for marker i is token 158 + i
MAX_KEYS = 30  # markers 128..157 and queries 158..187 leave room for at most 30 keys
MAX_VALUES = 127
VOCAB = 256


class NeedleInAHaystack(StreamTask):
    """k ~ U{min_keys..max_keys} distinct markers out of ``n_markers``, each followed by a value
    ~ U{1..n_values}; the query asks for one of the k markers, uniformly."""

    last_only = False  # the answer sits at the query's position, which depends on k

    def __init__(self, max_keys: int = 30, n_values: int = 127, min_keys: int = 1,
                 n_markers: int = MAX_KEYS, n_test: int = 4000, test_seed: int = 0,
                 n_ctx: int | None = None) -> None:
        if not isinstance(max_keys, int) or not 1 <= max_keys <= MAX_KEYS:
            raise ValueError(f"max_keys must be an integer in 1..{MAX_KEYS}, got {max_keys!r}")
        if not isinstance(min_keys, int) or not 1 <= min_keys <= max_keys:
            raise ValueError(f"min_keys must be an integer in 1..max_keys={max_keys}, got {min_keys!r}")
        if not isinstance(n_values, int) or not 2 <= n_values <= MAX_VALUES:
            raise ValueError(f"n_values must be an integer in 2..{MAX_VALUES}, got {n_values!r}")
        if not isinstance(n_markers, int) or not max_keys <= n_markers <= MAX_KEYS:
            raise ValueError(f"n_markers must be an integer in max_keys={max_keys}..{MAX_KEYS}, "
                             f"got {n_markers!r}")
        min_ctx = 2 * max_keys + 1
        if n_ctx is None:
            n_ctx = min_ctx
        if n_ctx < min_ctx:
            raise ValueError(f"n_ctx={n_ctx} is shorter than 2 * max_keys + 1 = {min_ctx}")
        self.name = f"needle_k{min_keys}-{max_keys}_m{n_markers}_v{n_values}"
        self.max_keys, self.min_keys, self.n_values = max_keys, min_keys, n_values
        self.n_markers = n_markers
        self.d_vocab = self.d_vocab_out = VOCAB
        self.n_ctx = n_ctx  # the paper pads to 63 tokens (62 inputs + answer)
        super().__init__(n_test, test_seed)

    def sample(self, n: int, gen: torch.Generator) -> Batch:
        k = torch.randint(self.min_keys, self.max_keys + 1, (n,), generator=gen)  # [n]
        # k distinct markers per row: the first k of a random permutation of all markers.
        markers = torch.rand(n, self.n_markers, generator=gen).argsort(-1)[:, : self.max_keys]
        values = torch.randint(0, self.n_values, (n, self.max_keys), generator=gen)  # [n, K]
        slot = torch.arange(self.max_keys)
        present = slot < k[:, None]  # [n, K]
        tokens = torch.full((n, self.n_ctx), PAD, dtype=torch.long)
        tokens[:, 0 : 2 * self.max_keys : 2] = torch.where(present, markers + MARKER_OFFSET, PAD)
        tokens[:, 1 : 2 * self.max_keys : 2] = torch.where(present, values + VALUE_OFFSET, PAD)
        asked = (torch.rand(n, generator=gen) * k).long()  # which pair is queried, U{0..k-1}
        rows = torch.arange(n)
        query_pos = 2 * k  # right after the last pair
        tokens[rows, query_pos] = markers[rows, asked] + QUERY_OFFSET
        targets = torch.full((n, self.n_ctx), IGNORE, dtype=torch.long)
        targets[rows, query_pos] = values[rows, asked] + VALUE_OFFSET
        return tokens, targets

    @staticmethod
    def keys_per_row(tokens: Tensor) -> Tensor:
        """[b] number of marker/value pairs k in each sequence."""
        return ((tokens >= MARKER_OFFSET) & (tokens < QUERY_OFFSET)).sum(-1)


def needle_token_labels(row: Tensor) -> list[str]:
    """Readable tokens of one sequence up to its query, as in Figure 2 ("a 1 b 2 ... b?"):
    markers as letters, values as numbers, the query as its marker's letter with '?'."""
    letters = "abcdefghijklmnopqrstuvwxyzABCD"
    out = []
    for tok in row.tolist():
        if MARKER_OFFSET <= tok < QUERY_OFFSET:
            out.append(letters[tok - MARKER_OFFSET])
        elif QUERY_OFFSET <= tok < QUERY_OFFSET + MAX_KEYS:
            out.append(letters[tok - QUERY_OFFSET] + "?")
            break
        elif tok != PAD:
            out.append(str(tok - VALUE_OFFSET + 1))
    return out
