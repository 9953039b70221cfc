"""A plain eager PyTorch implementation of the miiii model: the benchmark's reference point.

What a straightforward port of the model (Syrkis & Søgaard 2024; docs/papers.md, miiii: model and task;
dropout on the residual stream after each add, as their code) computes per step: every position
through attention and the MLP (nanoGPT-style fused QKV linear), the output position read
out by a per-head einsum over all q_max classes with the classes beyond q masked, and the
cross-entropy over the [b, q, n_tasks] layout.  Same parameters, same FLOPs per useful output as
the rt_lib model, none of its shortcuts; used only by ``bench_all.py`` (the issue's "plain eager
implementation of the same model").
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class PlainMiiii(nn.Module):
    def __init__(self, p: int, qs: tuple[int, ...], d_model: int, n_heads: int, dropout: float):
        super().__init__()
        d, self.h = d_model, n_heads
        self.W_E = nn.Embedding(p + 1, d)
        self.W_pos = nn.Parameter(torch.randn(3, d) * math.sqrt(2 / d))
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.out = nn.Linear(d, d, bias=False)
        self.fc1 = nn.Linear(d, 4 * d, bias=False)
        self.fc2 = nn.Linear(4 * d, d, bias=False)
        self.W_U = nn.Parameter(torch.randn(len(qs), d, max(qs)) * math.sqrt(2 / d))
        self.register_buffer("mask", torch.arange(max(qs))[None] < torch.tensor(qs)[:, None])
        self.drop = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        b, t = x.shape
        h = self.W_E(x) + self.W_pos  # [b, t, d]
        q, k, v = (z.view(b, t, self.h, -1).transpose(1, 2) for z in self.qkv(h).chunk(3, -1))
        att = (q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])).softmax(-1)
        z = (att @ v).transpose(1, 2).reshape(b, t, -1)
        h = self.drop(h + self.out(z))  # dropout on the residual stream, as the miiii code
        h = self.drop(h + self.fc2(F.relu(self.fc1(h))))
        logits = torch.einsum("bd,ndq->bnq", h[:, -1], self.W_U)
        return logits.masked_fill(~self.mask, float("-inf"))


def plain_loss(logits: Tensor, targets: Tensor, weights: Tensor) -> Tensor:
    """Sum over heads of cross-entropy / ln q, mean over the batch (the paper's loss)."""
    ce = F.cross_entropy(logits.permute(0, 2, 1), targets, reduction="none")
    return (ce * weights).sum(-1).mean()
