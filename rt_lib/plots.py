"""Figures: each is ``plot_x(ax, ...)`` drawing on an axes it is given; notebooks only arrange."""

from __future__ import annotations

import math
from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from rt_lib.analysis import PCA, circularity

#: One colour per model kind, the same in every figure of the project.
MODEL_COLORS = {
    "random transformer": "#d95f02",
    "trained transformer": "#1b9e77",
    "trained LSTM": "#7570b3",
    "random LSTM": "#e7298a",
}


def style() -> None:
    """The project's matplotlib defaults (called once per notebook)."""
    plt.rcParams.update({
        "figure.dpi": 110, "axes.spines.top": False, "axes.spines.right": False,
        "axes.grid": True, "grid.alpha": 0.25, "font.size": 10, "axes.titlesize": 11,
        "legend.frameon": False, "svg.hashsalt": "rt-companion",
    })


def plot_learning_curves(ax: Axes, histories: Mapping[str, pd.DataFrame], metric: str = "test_acc",
                         log_x: bool = False, colors: Mapping[str, str] | None = None) -> Axes:
    """One line per run: ``metric`` against optimiser step."""
    colors = colors or MODEL_COLORS
    for label, hist in histories.items():
        kind = label.split(" (")[0]
        line, = ax.plot(hist["step"], hist[metric], label=label, color=colors.get(kind), lw=1.8)
        twin = "train_" + metric.removeprefix("test_")
        if metric.startswith("test_") and twin in hist:
            # The same run's training score, dashed: the gap is memorisation not yet generalised.
            ax.plot(hist["step"], hist[twin], color=line.get_color(), lw=1.0, ls="--", alpha=0.7)
    ax.set_xlabel("step")
    ax.set_ylabel(metric.replace("_", " ") + (" (dashed: train)" if metric.startswith("test_") else ""))
    if log_x:
        ax.set_xscale("log")
    if metric.endswith("acc"):
        ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=8)
    return ax


def plot_embedding_circle(ax: Axes, projection: PCA, pcs: tuple[int, int] = (0, 2),
                          title: str | None = None, annotate_every: int | None = None) -> Axes:
    """Token embeddings on two principal components, coloured by token value (Figure 3).

    When the projection is roughly circular (score >= 0.5), a faint line joins the tokens in the
    order they sit on a circle walked at frequency k (a, a + m, a + 2m, ... with m k = 1 mod p),
    so a circle shows as a regular polygon rather than a star; the title gives the score and k.
    """
    i, j = pcs
    pts = projection.projected[:, [i, j]]
    p = len(pts)
    score, k = circularity(pts)
    if score >= 0.5:  # only a projection that is roughly a circle gets its polygon
        step = pow(k, -1, p) if k and math.gcd(k, p) == 1 else 1
        order = (np.arange(p + 1) * step) % p
        ax.plot(pts[order, 0], pts[order, 1], color="0.75", lw=0.6, zorder=1)
    sc = ax.scatter(pts[:, 0], pts[:, 1], c=np.arange(p), cmap="twilight", s=28,
                    edgecolors="0.2", linewidths=0.3, zorder=2)
    for a in range(0, p, annotate_every or max(1, p // 10)):
        ax.annotate(str(a), pts[a], fontsize=7, xytext=(3, 3), textcoords="offset points")
    var = projection.explained_variance_ratio
    ax.set_xlabel(f"PC{i + 1} ({var[i]:.0%} var.)")
    ax.set_ylabel(f"PC{j + 1} ({var[j]:.0%} var.)")
    ax.set_aspect("equal", adjustable="datalim")
    head = f"{title}\n" if title else ""
    ax.set_title(f"{head}circularity {score:.2f}, frequency k={k}", fontsize=9)
    plt.colorbar(sc, ax=ax, fraction=0.046, pad=0.04, label="token value")
    return ax
