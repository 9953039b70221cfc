"""miiii analysis (Syrkis & Søgaard 2024, section 4; docs/papers.md, miiii: training):
positional-embedding correlation, singular values and Fourier spectra of the token embedding, MLP
neurons over the p x p input grid.

Conventions: ``p`` digits are tokens 0..p-1 (token p is "="); the input grid is indexed
``[first, second]`` = ``[x1, x0]`` for T_miiii (n = x0 + x1 * p) and ``[a, b]`` for T_nanda, i.e. in
the order the tokens are fed.  Frequencies are integers w in 0..p-1 (cycles over the p digits).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor, nn

from rt_lib.model import Transformer, eval_mode


def pearson(a: Tensor | np.ndarray, b: Tensor | np.ndarray) -> float:
    """Pearson's r of two vectors."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape or len(a) < 2:
        raise ValueError(f"need two vectors of one length >= 2, got {a.shape} and {b.shape}")
    a, b = a - a.mean(), b - b.mean()
    denom = np.sqrt((a @ a) * (b @ b))
    if denom == 0:
        raise ValueError("a constant vector has no correlation")
    return float(a @ b / denom)


def positional_correlation(model: nn.Module, dims: int | None = None) -> float:
    """Pearson's r between the positional embeddings of the two digit positions (paper, Figure 7:
    0.95 for T_nanda, whose inputs commute; -0.64 for T_miiii, whose digits do not), over the
    first ``dims`` model dimensions (None: all).  The authors' figure shows the first 37 dimensions
    (``slice = 37`` in their ``paper.py``); the text does not say over which the r was taken."""
    w_pos = model.W_pos.detach().cpu()
    n = w_pos.shape[1] if dims is None else dims
    if not 2 <= n <= w_pos.shape[1]:
        raise ValueError(f"dims must lie in 2..d_model={w_pos.shape[1]}, got {dims!r}")
    return pearson(w_pos[0, :n], w_pos[1, :n])


def correlation_noise(n: int) -> float:
    """Standard deviation of Pearson's r between two independent random vectors of length ``n``
    (1 / sqrt(n - 1)): the spread of r at initialisation, before training made the rows alike."""
    if n < 3:
        raise ValueError(f"n must be at least 3, got {n!r}")
    return 1 / np.sqrt(n - 1)


def token_embedding(model: nn.Module, p: int) -> np.ndarray:
    """W_E of the p digit tokens [p, d] (the "=" row left out)."""
    return model.W_E.detach().cpu()[:p].double().numpy()


def singular_values(matrix: np.ndarray) -> np.ndarray:
    return np.linalg.svd(np.asarray(matrix, dtype=np.float64), compute_uv=False)


def cumulative_marks(values: np.ndarray, fractions: tuple[float, ...] = (0.5, 0.9),
                     squared: bool = False) -> list[int]:
    """How many of the (descending) singular ``values`` reach each fraction of their total.

    ``squared=False`` sums the singular values themselves (the authors' code); ``squared=True``
    sums their squares, i.e. the variance (the paper's text).  Counts are 1-based: 1 = the first
    value alone reaches it."""
    v = np.sort(np.asarray(values, dtype=np.float64))[::-1]
    v = v**2 if squared else v
    if (v < 0).any() or v.sum() == 0:
        raise ValueError("values must be non-negative and not all zero")
    share = np.cumsum(v) / v.sum()
    out = []
    for f in fractions:
        if not 0 < f <= 1:
            raise ValueError(f"fractions must be in (0, 1], got {f}")
        out.append(int(np.searchsorted(share, f - 1e-12) + 1))
    return out


def fourier_power(embedding: np.ndarray) -> np.ndarray:
    """Share of the (mean-removed) power of an embedding [p, d] at each frequency w = 1..p//2:
    the 1-D DFT along the token axis, power summed over the d columns (paper, Figures 11-13).
    Frequencies w and p - w are one real frequency and are added together."""
    x = np.asarray(embedding, dtype=np.float64)
    x = x - x.mean(0)
    p = len(x)
    power = (np.abs(np.fft.fft(x, axis=0)) ** 2).sum(1)  # [p]
    half = power[1 : p // 2 + 1].copy()
    # fold w and p - w (for even p the Nyquist frequency p/2 is its own twin)
    half[: (p - 1) // 2] += power[p - 1 : p // 2 : -1]
    total = half.sum()
    return half / total if total > 0 else half


def singular_vectors(embedding: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Left singular vectors [p, r] (one column per vector, over the tokens) and singular
    values [r], descending, of an embedding [p, d] with its mean over tokens removed: the vectors
    of miiii Figures 9-10.  Each vector's sign is arbitrary."""
    x = np.asarray(embedding)
    u, s, _ = np.linalg.svd(x - x.mean(0), full_matrices=False)
    return u, s


def vector_periodicity(embedding: np.ndarray, fraction: float = 0.5) -> list[float]:
    """For each of an embedding's top left singular vectors (:func:`singular_vectors`, as many
    as reach ``fraction`` of the sum of the singular values: Figure 9's cutoff), the share of its
    power at its strongest frequency (:func:`fourier_power`): 1 for one sinusoid over the
    tokens, whatever its phase; about 3 / (p // 2) for noise."""
    u, s = singular_vectors(embedding)
    (n,) = cumulative_marks(s, (fraction,))
    return [float(fourier_power(u[:, i : i + 1]).max()) for i in range(n)]


def top_frequency_share(embedding: np.ndarray, k: int = 3) -> float:
    """Share of an embedding's power [p, d] in its ``k`` strongest frequencies
    (:func:`fourier_power`): near 1 for a periodic embedding, k / (p // 2) or so for noise."""
    return float(np.sort(fourier_power(embedding))[::-1][:k].sum())


def grid_tokens(p: int) -> Tensor:
    """All p^2 inputs [first, second, "="] in row-major grid order [p^2, 3]."""
    first, second = torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")
    return torch.stack([first.ravel(), second.ravel(), torch.full((p * p,), p)], 1)


@torch.no_grad()
def neuron_grid(model: Transformer, p: int) -> np.ndarray:
    """MLP activations (after the ReLU) at the output position over every input pair:
    [p (first token), p (second token), d_mlp]."""
    name = f"blocks.{len(model.blocks) - 1}.mlp.hook_post"
    with eval_mode(model):
        _, cache = model.run_with_cache(grid_tokens(p).to(next(model.parameters()).device),
                                        [name], last_only=True)
    post = cache[name][:, -1]  # [p^2, m]
    return post.reshape(p, p, -1).double().cpu().numpy()


def spectrum_2d(grid: np.ndarray) -> np.ndarray:
    """Power |FFT2|^2 of each neuron's p x p activation grid, axes (w_first, w_second, neuron);
    the constant term (0, 0) is set to 0 so the spectrum shows only the periodic structure."""
    power = np.abs(np.fft.fft2(np.asarray(grid, dtype=np.float64), axes=(0, 1))) ** 2
    power[0, 0] = 0.0
    return power


def _unique_pairs(p: int) -> np.ndarray:
    """Mask [p, p] of frequency pairs up to the symmetry (w0, w1) ~ (-w0, -w1) of a real
    grid's spectrum, without (0, 0)."""
    w0, w1 = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    key = w0 * p + w1
    twin = ((p - w0) % p) * p + (p - w1) % p
    keep = key <= twin
    keep[0, 0] = False
    return keep


def active_frequencies(power: np.ndarray, k: float = 1.0) -> np.ndarray:
    """Frequency pairs (w_first, w_second) [n, 2] whose power, summed over neurons, exceeds the
    mean + k std over all pairs (the authors' code uses k = 1, the paper's text k = 2)."""
    power = np.asarray(power, dtype=np.float64)
    total = power.sum(-1) if power.ndim == 3 else power
    p = total.shape[0]
    keep = _unique_pairs(p)
    values = total[keep]
    threshold = values.mean() + k * values.std()
    return np.argwhere(keep & (total > threshold))


def authors_neuron_spectrum(grid: np.ndarray, neurons: int = 5) -> np.ndarray:
    """The spectrum the miiii code logs at every epoch (``scope_fn`` in ``miiii/train.py``): for
    the first ``neurons`` neurons, |rfft2| of the activation grid without token 0 (rows and columns
    1..p-1), averaged over the first token's frequencies: [neurons, (p - 1) // 2 + 1], indexed by
    the second token's frequency (0 = constant)."""
    grid = np.asarray(grid, dtype=np.float64)[1:, 1:, :neurons]  # [p-1, p-1, n]
    return np.abs(np.fft.rfft2(grid, axes=(0, 1))).mean(0).T


def authors_active_counts(series: np.ndarray, k: float = 1.0) -> np.ndarray:
    """The miiii paper's count of active frequencies over training (``omega_aux`` in the authors'
    ``paper.py``) from one neuron's spectrum over time ``series`` [time, frequency]: each
    frequency's series is normalised to sum 1 over time, and a (time, frequency) entry is active
    above the mean + k std of all entries; returns the count per time [time].  (The authors also
    smooth over 3 consecutive epochs and resample 168 log-spaced epochs first: with snapshots that
    are already log-spaced and few, neither is done here.)"""
    series = np.asarray(series, dtype=np.float64)
    if series.ndim != 2 or len(series) < 2:
        raise ValueError(f"series must be [time >= 2, frequency], got shape {series.shape}")
    total = series.sum(0, keepdims=True)
    share = np.divide(series, total, out=np.zeros_like(series), where=total > 0)
    threshold = share.mean() + k * share.std()
    return (share > threshold).sum(1)


def interaction_share(power: np.ndarray) -> float:
    """Share of the neurons' periodic power (summed over neurons) at frequency pairs with both
    w_first and w_second non-zero.  A neuron that is a sum f(x1) + g(x0) has none: the share
    measures how much the MLP combines the two digits (it rises when the model generalises)."""
    total = np.asarray(power, dtype=np.float64)
    total = total.sum(-1) if total.ndim == 3 else total
    periodic = total.sum() - total[0, 0]
    both = total[1:, 1:].sum()
    return float(both / periodic) if periodic > 0 else 0.0


def top_frequencies(power: np.ndarray, n: int = 3) -> list[tuple[int, int, float]]:
    """The ``n`` strongest frequency pairs of one neuron's spectrum [p, p]: (w_first, w_second,
    share of the neuron's periodic power), each pair listed once (w and -w are one frequency)."""
    p = power.shape[0]
    keep = _unique_pairs(p)
    total = power.sum() - power[0, 0]
    order = np.argsort(np.where(keep, power, -1.0), axis=None)[::-1][:n]
    out = []
    for flat in order:
        i, j = divmod(int(flat), p)
        twin = (-i % p, -j % p)
        pair = power[i, j] + (power[twin] if twin != (i, j) else 0.0)
        out.append((i, j, float(pair / total) if total > 0 else 0.0))
    return out


__all__ = ["pearson", "positional_correlation", "correlation_noise", "token_embedding",
           "singular_values", "cumulative_marks", "fourier_power", "grid_tokens", "neuron_grid",
           "spectrum_2d", "active_frequencies", "authors_neuron_spectrum", "authors_active_counts",
           "interaction_share", "top_frequencies", "top_frequency_share"]
