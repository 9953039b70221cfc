"""Circuit imitation (Zhong & Andreas, Figure 6; docs/papers.md, random transformers: tasks):
fit a random target transformer.

A randomly initialised *target* transformer maps uniformly random token sequences to a
distribution over the vocabulary at the last position.  A model imitates it by minimising
KL(target || model) there.  The target's weights are scaled as in the authors' ``imitation.py``
so that its function is far from trivial: attention projections x10 (sharper attention), MLP
output projection x20 (the MLP matters), unembedding x100/sqrt(width) (logits of standard
deviation ~2 at every width, so targets of different widths are equally peaked).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from rt_lib.model import Transformer, TransformerConfig, build_model, fast_paths
from rt_lib.tasks.base import Batch, StreamTask

#: The authors' target scalings (imitation.py): (W_Q, W_K, W_V) x10, W_out x20, W_U x100/sqrt(d).
QKV_SCALE, MLP_OUT_SCALE, LOGIT_SCALE = 10.0, 20.0, 100.0


@torch.no_grad()
def imitation_target(d_model: int, d_vocab: int = 512, n_ctx: int = 40, n_layers: int = 3,
                     n_heads: int = 2, seed: int = 0, qkv_scale: float = QKV_SCALE,
                     mlp_out_scale: float = MLP_OUT_SCALE,
                     logit_scale: float = LOGIT_SCALE) -> Transformer:
    """A frozen random GPT-2-style transformer with the authors' scalings (defaults: their 3
    layers, 2 heads, vocabulary 512, 40 positions)."""
    cfg = TransformerConfig(d_vocab=d_vocab, n_ctx=n_ctx, d_model=d_model, n_layers=n_layers,
                            n_heads=n_heads)
    target = build_model(cfg, seed)
    for block in target.blocks:
        for W in (block.attn.W_Q, block.attn.W_K, block.attn.W_V):
            W.mul_(qkv_scale)
        block.mlp.W_out.mul_(mlp_out_scale)
        block.mlp.b_out.mul_(mlp_out_scale)  # zero at init; scaled as the authors do
    target.W_U.mul_(logit_scale / math.sqrt(d_model))
    target.requires_grad_(False)
    return target.eval()


def kl_divergence(target_logp: Tensor, logits: Tensor) -> Tensor:
    """Per-example KL(target || model) [b] from target log-probs and model logits [b, v]."""
    logq = F.log_softmax(logits, dim=-1)
    return (target_logp.exp() * (target_logp - logq)).sum(-1)


class CircuitImitation(StreamTask):
    """Tokens uniform over the target's vocabulary; target = its last-position log-probs."""

    last_only = True

    def __init__(self, target: Transformer, n_test: int = 1000, test_seed: int = 0,
                 chunk: int = 1024) -> None:
        self.target = target.eval()
        self.d_vocab = self.d_vocab_out = target.cfg.d_vocab
        self.n_ctx = target.cfg.n_ctx
        self.name = f"imitation of a width-{target.cfg.d_model} target"
        self.chunk = chunk  # rows per target forward, to bound memory
        super().__init__(n_test, test_seed)

    @torch.no_grad()
    def target_logprobs(self, tokens: Tensor) -> Tensor:
        chunks = (tokens[i : i + self.chunk] for i in range(0, len(tokens), self.chunk))
        out = [F.log_softmax(fast_paths.last_logits(self.target, x).float(), -1) for x in chunks]
        return torch.cat(out)

    def sample(self, n: int, gen: torch.Generator) -> Batch:
        tokens = torch.randint(0, self.d_vocab, (n, self.n_ctx), generator=gen)
        return tokens, self.target_logprobs(tokens)

    def loss(self, logits: Tensor, targets: Tensor) -> Tensor:
        return kl_divergence(targets, logits).mean()

    def scores(self, logits: Tensor, targets: Tensor) -> dict[str, Tensor]:
        kl = kl_divergence(targets, logits)
        agree = (logits.argmax(-1) == targets.argmax(-1)).float()  # same most likely token
        return {"kl": kl, "top1": agree}

    def baseline_kl(self) -> float:
        """KL on the test set of the best input-blind imitator, the target's average
        distribution: the level an imitator that learned nothing about the input reaches."""
        logp = self.test[1]
        mean = logp.exp().mean(0).clamp_min(1e-30).log()
        return float(kl_divergence(logp, mean.expand_as(logp)).mean())
