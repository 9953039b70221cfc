"""Speed paths beside :class:`rt_lib.model.Transformer`: the same logits, by regrouped arithmetic.

:mod:`rt_lib.model` says what the model computes (``Transformer.forward``, the plain forward).
This module computes the same logits faster, for training: each path is the plain forward's
arithmetic regrouped, equal to it up to float rounding and tested against it
(tests/model/test_fast_paths.py, tests/model/test_plain_forward.py, tests/training/test_batched.py).
The model never calls it; the training loop (rt_lib/training/train.py), batched restarts
(rt_lib/training/batched.py) and circuit imitation's target (rt_lib/tasks/imitation.py) call it by
name.  Of the hook points, only those the paths share with the plain forward fire here: the
embedding's (``hook_embed``, ``hook_pos_embed``; not under :func:`last_token_tables`, which reads
W_E and W_pos directly), and each block's writes and MLP (``hook_attn_out``, ``hook_resid_mid``,
``hook_mlp_out``, ``hook_resid_post``, ``mlp.hook_pre``, ``mlp.hook_post``); ``hook_resid_pre`` and
the attention's (``hook_q/k/v/z``, ``hook_pattern``) never do (tests/model/test_hooks.py).  Read or
patch activations through the plain forward.

* :func:`logits`: the forward with the **attention kernel** fastest at the sequence's length
  (:func:`attention_kernel`: broadcast products up to SHORT_SEQ keys, SDPA beyond, or the plain
  matmuls under vmap) and the **multi-task unembedding** over the classes that exist only
  (:func:`unembed`), placed in the plain forward's [..., n_tasks, q_max] or, with ``compact``,
  left as [..., sum q] for a loss that reads them there (miiii's compact readout).
* :func:`last_logits`, for tasks scored at the last position only (modular addition, miiii,
  circuit imitation): a **last-position shortcut** where one applies, else :func:`logits` at the
  last position.  Which shortcut, under the model's ``last_position`` (a constructor option the
  model stores and never reads):

  * ``"shared"`` (the default): a one-block model reads the keys and values of the earlier
    positions from (position, token) tables (:func:`last_token_tables`); a deeper causal model
    computes each distinct prefix once (:func:`last_shared_prefix`).
  * ``"vocab"``: as ``"shared"``, but the prefixes are every one-token prefix of the vocabulary,
    a shape that does not depend on the data, which ``vmap`` needs (batched restarts,
    :mod:`rt_lib.training.batched`).
  * ``"full"``: no shortcut.

Shapes: b = batch, t = positions, u = distinct prefixes, d = d_model, h = n_heads, k = d_head,
v = vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from rt_lib.model import Attention, Block, Transformer, attend
from rt_lib.model.transformer import mask_future

SHORT_SEQ = 8  # up to this many keys, attention is computed by broadcasting (attention_kernel)


def logits(model: nn.Module, tokens: Tensor, last_only: bool = False,
           compact: bool = False) -> Tensor:
    """``model(tokens, last_only)`` by the attention kernels and the multi-task unembedding over
    the existing classes (a :class:`Transformer`; any other model by its own forward);
    ``compact``: a multi-task model's logits as :func:`unembed` gives them with ``compact``."""
    if not isinstance(model, Transformer):
        return model(tokens, last_only=last_only)
    x = model.embed(tokens)  # [b, t, d]
    for i, block in enumerate(model.blocks):
        # only the last position of the last block feeds a last-position loss
        x = block_forward(model, block, x, last_only and i == len(model.blocks) - 1)
    x = model.ln_final(x)
    return unembed(model, x[:, -1] if last_only else x, compact)


def block_forward(model: Transformer, block: Block, x: Tensor, last_only: bool = False) -> Tensor:
    """``block(x, last_only)`` with the attention kernel: x [b, t, d] -> [b, t, d], or [b, 1, d]."""
    # in Block.forward's order: autograd sums the gradients reaching x in the order their
    # operations were recorded, so the order is part of every result's bits
    resid = x[:, -1:] if last_only else x
    y = block.ln1(x)
    q = block.attn.queries(y[:, -1:] if last_only else y)  # [b, h, tq, k]
    key, value = block.attn.keys_values(y)  # [b, h, t, k]
    return block.write(resid, mix(model, block.attn, q, key, value))


def mix(model: Transformer, attn: Attention, q: Tensor, key: Tensor, value: Tensor) -> Tensor:
    """``attn.mix(q, key, value)`` by the kernel fastest at this length: [b, tq, d]."""
    kernel = attention_kernel(key.shape[2], model.fused_attention)
    return attn.out(kernel(q, key, value, attn.masks(q), attn.p_drop, attn.training))


def unembed(model: Transformer, x: Tensor, compact: bool = False) -> Tensor:
    """``model.unembed(x)``: a multi-task model's logits by one [d, sum q] matmul over the classes
    that exist, placed into [..., n_tasks, q_max] over -inf, without the columns of classes that
    do not exist and without the einsum's broadcast copy of x.

    ``compact``: the matmul's [..., sum q] as they are, task after task (task i's q_i classes
    in order), not placed: for a loss that reads each task's classes in place
    (:class:`rt_lib.tasks.miiii.MultiPrimeTask` with ``readout="compact"``).  The values are
    the placed logits' own, bit for bit.  A model of one output ignores it."""
    if model.cfg.out_sizes is None:
        return x @ model.W_U
    n, d, q = model.W_U.shape
    columns = model.W_U.permute(1, 0, 2).reshape(d, n * q)[:, model.out_columns]
    if compact:
        return x @ columns
    out = x.new_full((*x.shape[:-1], n * q), float("-inf"))
    out = out.index_copy(-1, model.out_columns, x @ columns)
    return out.view(*x.shape[:-1], n, q)


def last_logits(model: nn.Module, tokens: Tensor, compact: bool = False) -> Tensor:
    """Logits [b, ...] at the last position of ``tokens`` [b, t]: by a shortcut where one applies
    (a :class:`Transformer`, its ``last_position`` allowing one, a batch that repeats what the
    shortcut computes once), else by :func:`logits` at the last position; ``compact`` as in
    :func:`unembed`."""
    if isinstance(model, Transformer):
        out = last_position_logits(model, tokens, compact)
        if out is not None:
            return out
    return logits(model, tokens, last_only=True, compact=compact)


def last_position_logits(model: Transformer, tokens: Tensor,
                         compact: bool = False) -> Tensor | None:
    """Logits [b, ...] at the last position of ``tokens`` [b, t] by the first shortcut that
    applies under ``model.last_position``; None when none does."""
    if token_tables_apply(model, tokens):
        return last_token_tables(model, tokens, compact)
    shared = shared_prefixes(model, tokens)
    if shared is not None:
        return last_shared_prefix(model, tokens, *shared, compact=compact)
    return None


def token_tables_apply(model: Transformer, tokens: Tensor) -> bool:
    """One block, shortcuts allowed, embeddings never dropped, and fewer (position, token) pairs
    than rows."""
    return (len(model.blocks) == 1 and model.last_position != "full"
            and not (model.training and model.embed_dropout.p)
            and (tokens.shape[1] - 1) * model.cfg.d_vocab * 2 <= len(tokens))


def last_token_tables(model: Transformer, tokens: Tensor, compact: bool = False) -> Tensor:
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
    x = block_after(model, block, x, k_pre, v_pre)
    return unembed(model, model.ln_final(x[:, -1]), compact)


def block_after(model: Transformer, block: Block, x: Tensor, k_pre: Tensor, v_pre: Tensor) -> Tensor:
    """``block`` on the stream x [b, t1, d] of the positions after those whose keys and values
    [b, h, t0, k] are given (computed elsewhere, as in incremental decoding): [b, t1, d], what the
    block's plain forward gives at those positions."""
    attn = block.attn
    y = block.ln1(x)
    # queries before keys and values, as in Attention.forward: the order in which autograd sums
    # the gradients reaching y, and so the rounding of every step after
    q = attn.queries(y)  # [b, h, t1, k]
    key, value = attn.keys_values(y)
    key, value = torch.cat([k_pre, key], 2), torch.cat([v_pre, value], 2)
    return block.write(x, mix(model, attn, q, key, value))


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
                       inverse: Tensor, compact: bool = False) -> Tensor:
    """Last-position logits [b, v] with each distinct prefix computed once.

    Under a causal mask the stream at positions < t-1 depends on the prefix tokens alone, so
    it is computed for the u distinct prefixes (u = p for modular addition, not b = p^2) and
    its keys and values gathered per row; only the last position is computed per row."""
    t = tokens.shape[1]
    x_pre = model.embed(prefixes)  # [u, t-1, d]
    x = model.embed_dropout(model.W_E[tokens[:, -1:]] + model.W_pos[t - 1 : t])  # [b, 1, d]
    for i, block in enumerate(model.blocks):
        k_pre, v_pre = block.attn.keys_values(block.ln1(x_pre))  # [u, h, t-1, k]
        x = block_after(model, block, x, k_pre[inverse], v_pre[inverse])
        if i < len(model.blocks) - 1:
            x_pre = block_forward(model, block, x_pre)
    return unembed(model, model.ln_final(x[:, -1]), compact)


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


# --- Attention kernels ----------------------------------------------------------------------------
# The arithmetic of rt_lib.model.attend, regrouped for speed; equal to it up to float rounding
# (tested).  mix runs the one attention_kernel picks.

def attend_short(q: Tensor, key: Tensor, value: Tensor, causal: bool, p_drop: float,
                 training: bool) -> Tensor:
    """``attend`` by broadcast products: for few positions (modular addition, miiii: 2-3),
    where the per-call cost of a matmul or of the fused kernel dominates."""
    scores = (q[:, :, :, None, :] * key[:, :, None, :, :]).sum(-1) / math.sqrt(q.shape[-1])
    scores = mask_future(scores) if causal else scores
    pattern = F.dropout(scores.softmax(-1), p_drop, training)
    return (pattern[..., None] * value[:, :, None, :, :]).sum(-2)  # [b, h, tq, k]


def attend_fused(q: Tensor, key: Tensor, value: Tensor, causal: bool, p_drop: float,
                 training: bool) -> Tensor:
    """``attend`` by torch's fused kernel (scaled_dot_product_attention)."""
    return F.scaled_dot_product_attention(q, key, value, is_causal=causal,
                                          dropout_p=p_drop if training else 0.0)


def attention_kernel(n_keys: int, fused: bool) -> Callable[..., Tensor]:
    """The kernel of an attention over ``n_keys`` keys: broadcast products up to SHORT_SEQ keys;
    beyond, SDPA when ``fused``, else the plain matmuls of ``attend`` (for vmap, which has no
    batching rule for SDPA on CPU and would loop over the stacked seeds)."""
    if n_keys <= SHORT_SEQ:
        return attend_short
    return attend_fused if fused else attend


__all__ = ["SHORT_SEQ", "attend_fused", "attend_short", "attention_kernel", "block_after",
           "block_forward", "distinct_rows", "last_logits", "last_position_logits",
           "last_shared_prefix", "last_token_tables", "logits", "mix", "shared_prefixes",
           "token_tables_apply", "unembed"]
