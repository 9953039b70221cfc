"""Speed paths beside :class:`rt_lib.model.Transformer`: the same arithmetic, regrouped.

:mod:`rt_lib.model` says what the model computes (``Transformer.forward``, the plain forward).
This module computes some of the same numbers faster: each path is the plain forward's arithmetic
regrouped, equal to it up to float rounding and tested against it (tests/model/test_fast_paths.py,
tests/model/test_model.py, tests/training/test_batched.py, tests/model/test_plain_forward.py).  The model never calls
it; the code that wants a shortcut calls it by name.

Tasks scored at the last position only (modular addition, miiii, circuit imitation) need the
logits there alone.  :func:`last_logits` is the one entry point: a shortcut's logits when one
applies, else the plain forward's ``model(tokens, last_only=True)``.  It is called by the training
loop's step and evaluation (rt_lib/training/train.py), batched restarts (rt_lib/training/batched.py) and circuit
imitation's target (rt_lib/tasks/imitation.py), for every task with ``last_only``.  Which shortcut,
under the model's ``last_position`` (a constructor option the model stores and never reads):

* ``"shared"`` (the default): a one-block model reads the keys and values of the earlier
  positions from (position, token) tables (:func:`last_token_tables`); a deeper causal model
  computes each distinct prefix once (:func:`last_shared_prefix`).
* ``"vocab"``: as ``"shared"``, but the prefixes are every one-token prefix of the vocabulary, a
  shape that does not depend on the data, which ``vmap`` needs (batched restarts,
  :mod:`rt_lib.training.batched`).
* ``"full"``: no shortcut; the plain forward, every row through every position.

The attention kernels chosen by sequence length (broadcast products, SDPA) are not here: every
forward takes them, whoever calls it, so they sit beside ``Attention`` in :mod:`rt_lib.model`
(``attention_kernel``).

Shapes: b = batch, t = positions, u = distinct prefixes, d = d_model, h = n_heads, k = d_head,
v = vocabulary.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from rt_lib.model import Block, Transformer


def last_logits(model: nn.Module, tokens: Tensor) -> Tensor:
    """Logits [b, ...] at the last position of ``tokens`` [b, t]: by a shortcut where one applies
    (a :class:`Transformer`, its ``last_position`` allowing one, a batch that repeats what the
    shortcut computes once), else by the plain ``model(tokens, last_only=True)``."""
    if isinstance(model, Transformer):
        logits = last_position_logits(model, tokens)
        if logits is not None:
            return logits
    return model(tokens, last_only=True)


def last_position_logits(model: Transformer, tokens: Tensor) -> Tensor | None:
    """Logits [b, ...] at the last position of ``tokens`` [b, t] by the first shortcut that
    applies under ``model.last_position``; None when none does."""
    if token_tables_apply(model, tokens):
        return last_token_tables(model, tokens)
    shared = shared_prefixes(model, tokens)
    if shared is not None:
        return last_shared_prefix(model, tokens, *shared)
    return None


def token_tables_apply(model: Transformer, tokens: Tensor) -> bool:
    """One block, shortcuts allowed, embeddings never dropped, and fewer (position, token) pairs
    than rows."""
    return (len(model.blocks) == 1 and model.last_position != "full"
            and not (model.training and model.embed_dropout.p)
            and (tokens.shape[1] - 1) * model.cfg.d_vocab * 2 <= len(tokens))


def last_token_tables(model: Transformer, tokens: Tensor) -> Tensor:
    """Last-position logits [b, ...] of a one-block model from key/value tables.

    In one block the keys and values of the earlier positions are projections of the
    embedding W_E[token] + W_pos[position] alone, so they are computed once per (position,
    token) pair, [t-1, v] rows instead of [b, t-1] (miiii at p = 113: 2 x 114 rather than
    3,831 x 2 on the paper's 30 % training split), and gathered per row; the query, MLP and
    readout run at the last position only."""
    t = tokens.shape[1]
    block = model.blocks[0]
    table = model.W_E[None, :, :] + model.W_pos[: t - 1, None, :]  # [t-1, v, d]
    k_tab, v_tab = block.attn.keys_values(block.ln1(table))  # [t-1, h, v, k]
    pos = torch.arange(t - 1, device=tokens.device)[None, :]
    # advanced indices [1, t-1] and [b, t-1] around the head slice: [b, t-1, h, k]
    k_pre = k_tab[pos, :, tokens[:, :-1]].transpose(1, 2)
    v_pre = v_tab[pos, :, tokens[:, :-1]].transpose(1, 2)
    x = model.W_E[tokens[:, -1:]] + model.W_pos[t - 1 : t]  # [b, 1, d]
    x = block_after(block, x, k_pre, v_pre)
    return model.unembed(model.ln_final(x[:, -1]))


def block_after(block: Block, x: Tensor, k_pre: Tensor, v_pre: Tensor) -> Tensor:
    """``block`` on the stream x [b, t1, d] of the positions after those whose keys and values
    [b, h, t0, k] are given (computed elsewhere, as in incremental decoding): [b, t1, d], what the
    block's plain forward gives at those positions.  The hook points on the queries, keys and
    values are passed by, the rest see these positions alone: read activations through the plain
    forward (``run_with_cache``)."""
    attn = block.attn
    y = block.ln1(x)
    # queries before keys and values, as in Attention.forward: the order in which autograd sums
    # the gradients reaching y, and so the rounding of every step after
    q = attn.queries(y)  # [b, h, t1, k]
    key, value = attn.keys_values(y)
    key, value = torch.cat([k_pre, key], 2), torch.cat([v_pre, value], 2)
    return block.write(x, attn.mix(q, key, value))


def shared_prefixes(model: Transformer, tokens: Tensor) -> tuple[Tensor, Tensor] | None:
    """(distinct prefixes [u, t-1], row -> prefix index [b]) when shortcuts are allowed, the batch
    repeats its prefixes (u <= b/2, e.g. [a, b] pairs with only p values of a) and the model is
    causal and deterministic; else None."""
    if model.last_position == "full":
        return None
    if not model.cfg.causal or tokens.shape[1] < 2 or (model.training and model.cfg.dropout):
        return None
    if model.last_position == "vocab":
        # Every possible one-token prefix instead of the distinct ones: a shape that does not
        # depend on the data, which vmap needs (batched restarts, rt_lib/training/batched.py).
        if tokens.shape[1] != 2 or 2 * model.cfg.d_vocab > len(tokens):
            return None
        return torch.arange(model.cfg.d_vocab, device=tokens.device)[:, None], tokens[:, 0]
    prefixes, inverse = distinct_rows(tokens[:, :-1], model.cfg.d_vocab)
    return (prefixes, inverse) if 2 * len(prefixes) <= len(tokens) else None


def last_shared_prefix(model: Transformer, tokens: Tensor, prefixes: Tensor,
                       inverse: Tensor) -> Tensor:
    """Last-position logits [b, v] with each distinct prefix computed once.

    Under a causal mask the stream at positions < t-1 depends on the prefix tokens alone, so
    it is computed for the u distinct prefixes (u = p for modular addition, not b = p^2) and
    its keys and values gathered per row; only the last position is computed per row."""
    t = tokens.shape[1]
    x_pre = model.embed(prefixes)  # [u, t-1, d]
    x = model.embed_dropout(model.W_E[tokens[:, -1:]] + model.W_pos[t - 1 : t])  # [b, 1, d]
    for i, block in enumerate(model.blocks):
        k_pre, v_pre = block.attn.keys_values(block.ln1(x_pre))  # [u, h, t-1, k]
        x = block_after(block, x, k_pre[inverse], v_pre[inverse])
        if i < len(model.blocks) - 1:
            x_pre = block(x_pre)
    return model.unembed(model.ln_final(x[:, -1]))


def distinct_rows(tokens: Tensor, d_vocab: int) -> tuple[Tensor, Tensor]:
    """``tokens.unique(dim=0, return_inverse=True)`` for tokens [b, t] < d_vocab, fast.

    ``unique(dim=0)`` compares rows one by one on CPU, a large part of a small model's step; each
    row read as a base-``d_vocab`` number is one integer, and a 1-D unique sorts those in the same
    lexicographic order, so rows and inverse are identical (tested)."""
    t = tokens.shape[1]
    if t * math.log2(max(d_vocab, 2)) >= 62:  # the code would overflow int64
        return tokens.unique(dim=0, return_inverse=True)
    code = torch.zeros(len(tokens), dtype=torch.int64, device=tokens.device)
    for j in range(t):
        code = code * d_vocab + tokens[:, j]
    distinct, inverse = torch.unique(code, return_inverse=True)
    rows = torch.empty(len(distinct), t, dtype=tokens.dtype, device=tokens.device)
    for j in reversed(range(t)):
        rows[:, j] = distinct % d_vocab
        distinct = distinct // d_vocab
    return rows, inverse


__all__ = ["block_after", "distinct_rows", "last_logits", "last_position_logits", "last_shared_prefix",
           "last_token_tables", "shared_prefixes", "token_tables_apply"]
