"""Analysis helpers: PCA of embeddings, how circular a projection is (Figure 3), attention
patterns and the recall heads of needle-in-a-haystack (Figure 2)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import torch
from torch import Tensor, nn

from rt_lib.model import Transformer, eval_mode


@dataclass(frozen=True)
class PCA:
    components: np.ndarray  # [n_components, d]: principal directions, rows of unit norm
    explained_variance_ratio: np.ndarray  # [n_components]: share of the total variance
    projected: np.ndarray  # [n, n_components]: the centred data in PC coordinates


def pca(x: Tensor | np.ndarray, n_components: int | None = None) -> PCA:
    """PCA by SVD of the centred rows of ``x`` [n, d]; component signs fixed for reproducibility."""
    data = x.detach().cpu().double().numpy() if isinstance(x, Tensor) else np.asarray(x, float)
    centred = data - data.mean(0, keepdims=True)
    u, s, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(n_components or len(s), len(s))
    # SVD signs are arbitrary: make the largest-magnitude loading of each component positive.
    signs = np.sign(vt[np.arange(len(vt)), np.abs(vt).argmax(1)])
    signs[signs == 0] = 1
    vt, u = vt * signs[:, None], u * signs[None, :]
    var = s**2
    ratio = var / var.sum() if var.sum() > 0 else np.zeros_like(var)
    return PCA(components=vt[:k], explained_variance_ratio=ratio[:k], projected=(u * s)[:, :k])


def circularity(points: np.ndarray) -> tuple[float, int]:
    """How well consecutive values a = 0..p-1 lie on a circle walked at a constant angle.

    Treat each 2-D point as a complex number z_a.  For a circle walked at frequency k, the step
    z_{a+1} / z_a is the same rotation e^{2 pi i k / p} for every a, so the resultant length
    |sum_a z_{a+1} conj(z_a)| / sum_a |z_{a+1}| |z_a| is 1; scattered points give about 0.
    Returns (score in [0, 1], the frequency k in 0..p/2 of that rotation).
    """
    z = points[:, 0] - points[:, 0].mean() + 1j * (points[:, 1] - points[:, 1].mean())
    nxt = np.roll(z, -1)  # z_{a+1}, wrapping p-1 -> 0 as modular arithmetic does
    prod = nxt * np.conj(z)
    denom = np.abs(prod).sum()
    if denom == 0:
        return 0.0, 0
    resultant = prod.sum()
    p = len(z)
    k = int(round(np.angle(resultant) * p / (2 * np.pi))) % p
    return float(np.abs(resultant) / denom), min(k, p - k)


def best_circle_pcs(projected: np.ndarray, max_pc: int = 8) -> tuple[tuple[int, int], float, int]:
    """The pair of PCs (0-based) among the first ``max_pc`` whose projection is most circular."""
    n = min(max_pc, projected.shape[1])
    best = max(
        ((i, j) for i, j in combinations(range(n), 2)),
        key=lambda ij: circularity(projected[:, list(ij)])[0],
    )
    score, k = circularity(projected[:, list(best)])
    return best, score, k


@torch.no_grad()
def attention_patterns(model: Transformer, tokens: Tensor) -> Tensor:
    """Every head's attention over ``tokens`` [b, t]: [n_layers, b, n_heads, t(query), t(key)]."""
    names = [f"blocks.{i}.attn.hook_pattern" for i in range(len(model.blocks))]
    with eval_mode(model):
        _, cache = model.run_with_cache(tokens, names)
    return torch.stack([cache[name] for name in names]).cpu()


def needle_head_scores(patterns: Tensor, tokens: Tensor) -> dict[str, Tensor]:
    """How much each head does the two steps of in-context recall (Figure 2), averaged over
    sequences; each [n_layers, n_heads]:

    - ``value_to_marker``: attention from each value to the marker just before it;
    - ``query_to_value``: attention from the query to the value of the marker it asks for.
    """
    from rt_lib.tasks.needle import MARKER_OFFSET, MAX_KEYS, QUERY_OFFSET

    L, b, H = patterns.shape[:3]
    v2m = torch.zeros(L, H)
    q2v = torch.zeros(L, H)
    n_vals = 0
    for r, row in enumerate(tokens.tolist()):
        q = next(i for i, t in enumerate(row) if QUERY_OFFSET <= t < QUERY_OFFSET + MAX_KEYS)
        marker = row[q] - QUERY_OFFSET + MARKER_OFFSET
        value_pos = row.index(marker) + 1
        q2v += patterns[:, r, :, q, value_pos]
        for m in range(0, q, 2):
            v2m += patterns[:, r, :, m + 1, m]
            n_vals += 1
    return {"value_to_marker": v2m / max(n_vals, 1), "query_to_value": q2v / b}


@torch.no_grad()
def mean_ablate_heads(model: Transformer, tokens: Tensor, heads: list[tuple[int, int]],
                      last_only: bool = False, batch_size: int = 1024) -> Tensor:
    """Logits of ``tokens`` [b, t] with each (layer, head) of ``heads`` mean-ablated: its output
    z (before W_O, hook ``blocks.{layer}.attn.hook_z``) replaced at every position by its mean
    over the rows of ``tokens``, so the head still writes what it writes on average but nothing
    of what it read in this row.  Through the plain forward (the hook points), in eval mode,
    ``batch_size`` rows at a time (the mean is over all of them)."""
    names = sorted({f"blocks.{layer}.attn.hook_z" for layer, _ in heads})
    batches = tokens.split(batch_size)
    with eval_mode(model):
        sums: dict[str, Tensor] = {}
        for batch in batches:
            _, clean = model.run_with_cache(batch, names, last_only=last_only)
            for name in names:  # [t, h, k], summed in float64 over every batch
                sums[name] = sums.get(name, 0) + clean[name].double().sum(0)
        means = {name: (total / len(tokens)).to(clean[name].dtype) for name, total in sums.items()}

        def ablate(z: Tensor, hook) -> Tensor:
            z = z.clone()  # [b, t, h, k]: TransformerLens's layout
            for layer, head in heads:
                if hook.name == f"blocks.{layer}.attn.hook_z":
                    z[:, :, head] = means[hook.name][:, head]
            return z

        hooks = [(name, ablate) for name in names]
        return torch.cat([model.run_with_hooks(batch, hooks, last_only) for batch in batches])


@torch.no_grad()
def max_attention_logit(model: nn.Module) -> Tensor:
    """[n_layers, n_heads]: the largest attention logit each head can produce.

    After LayerNorm (gain 1, as in a frozen random transformer) a query or key input has norm
    sqrt(d_model), so the logit q.k / sqrt(d_head) is at most sigma_max(W_Q W_K^T) d / sqrt(d_head).
    With N(0, 0.02^2) weights this grows roughly like d^1.5: a frozen head can only attend
    sharply, as recall needs, when the model is wide (about 2 at width 128, 16 at 512, 46 at 1024).
    """
    d, d_head = model.cfg.d_model, model.cfg.d_head
    rows = []
    for block in model.blocks:
        qk = torch.einsum("hdk,hek->hde", block.attn.W_Q, block.attn.W_K)  # [h, d, d]
        rows.append(torch.linalg.matrix_norm(qk, ord=2) * d / d_head**0.5)
    return torch.stack(rows).cpu()


def explained_variance(hidden: Tensor | np.ndarray, k: int = 10) -> dict[str, float]:
    """Share of the total variance of ``hidden`` [n, d] along its top-``k`` principal components
    and along its top-``k`` coordinates ("neurons") (Zhong & Andreas, Tables 4, 5, 7).

    The total variance is the trace of the covariance; both shares are in [0, 1], the PCs' is
    never below the neurons' (the top-k PCs maximise the variance of any k-dim subspace), and
    equal shares mean the variance is axis-aligned.  Isotropic states give about k/d for both
    when n >> d (:func:`isotropic_baseline` gives the PC share at any n)."""
    x = torch.as_tensor(hidden, dtype=torch.float64)
    if x.ndim != 2 or len(x) < 2:
        raise ValueError(f"hidden must be [n >= 2, d], got shape {tuple(x.shape)}")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    x = x - x.mean(0)
    per_dim = (x**2).sum(0)  # n-1 times each coordinate's variance
    total = float(per_dim.sum())
    if total == 0.0:
        raise ValueError("hidden has zero variance")
    eig = torch.linalg.svdvals(x) ** 2  # the same scale: n-1 times the covariance eigenvalues
    return {"pcs": float(eig[:k].sum()) / total,
            "neurons": float(per_dim.topk(min(k, len(per_dim))).values.sum()) / total}


def isotropic_baseline(n: int, d: int, k: int = 10, seed: int = 0) -> float:
    """The top-``k`` PC share of ``n`` isotropic Gaussian states in ``d`` dimensions: what
    :func:`explained_variance` gives states with no preferred direction at this sample size.
    Not k/d: n states span at most n - 1 dimensions, and the sample covariance of finitely many
    states spreads its eigenvalues (Marchenko-Pastur), so the top k carry more than k/d."""
    gen = torch.Generator().manual_seed(seed)
    return explained_variance(torch.randn(n, d, generator=gen, dtype=torch.float64), k)["pcs"]


@torch.no_grad()
def hidden_states(model: Transformer, tokens: Tensor, positions: Tensor | None = None,
                  batch_size: int = 1024) -> dict[str, Tensor]:
    """Residual stream after each block, ``{"layer 1": [n, d], ...}``, at the scored positions:
    ``positions`` [b, t] bool selects (example, position) pairs; None = the last position."""
    out: dict[str, list[Tensor]] = {}
    with eval_mode(model):
        for start in range(0, len(tokens), batch_size):
            names = [f"blocks.{i}.hook_resid_post" for i in range(len(model.blocks))]
            _, cache = model.run_with_cache(tokens[start : start + batch_size], names)
            for i, name in enumerate(names):
                resid = cache[name]  # [b, t, d]
                if positions is None:
                    picked = resid[:, -1]
                else:
                    picked = resid[positions[start : start + batch_size]]
                out.setdefault(f"layer {i + 1}", []).append(picked.cpu())
    return {name: torch.cat(parts) for name, parts in out.items()}


def digit_attention_shares(model: Transformer, tokens: Tensor, digits: tuple[int, int] = (0, 1),
                           query: int = -1, layer: int = 0) -> Tensor:
    """[n_heads]: for each head of ``layer``, the share of the attention that ``query`` pays to
    the two digit positions which goes to the head's preferred one, averaged over ``tokens``
    [b, t] (0.5: both digits alike; 1: one digit only).  The paper's Figure 18 (Syrkis & Søgaard
    §4.5) shows the attention from ŷ to x0 per head; attention to the query's own position is
    left out, so the share is of the digits' part alone."""
    pattern = attention_patterns(model, tokens)[layer]  # [b, h, tq, tk]
    on_digits = pattern[:, :, query, list(digits)].double()  # [b, h, 2]
    split = (on_digits / on_digits.sum(-1, keepdim=True).clamp_min(1e-12)).mean(0)  # [h, 2]
    return split.max(-1).values.float()
