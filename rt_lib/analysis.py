"""Analysis helpers: PCA of embeddings and how circular a projection is (Figure 3)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from torch import Tensor


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
