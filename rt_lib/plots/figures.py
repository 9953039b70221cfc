"""Figures: each is ``plot_x(ax, ...)`` drawing on an axes it is given; notebooks only arrange."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from rt_lib.analysis.activations import PCA, circularity
from rt_lib.analysis.fourier import singular_vectors

#: One colour per model kind, the same in every figure of the project.
MODEL_COLORS = {
    "random transformer": "#d95f02",
    "trained transformer": "#1b9e77",
    "trained LSTM": "#7570b3",
    "random LSTM": "#e7298a",
    "random: unembedding only": "#e6ab02",
    "random: embeddings only": "#a6761d",
    "random: W_E + W_U, random W_pos": "#666666",
    "random: W_E + W_U, sinusoidal W_pos": "#66a61e",
    "random: W_E + W_U, sinusoidal W_pos scaled to W_E": "#1f78b4",
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
    """One line per run: ``metric`` against optimiser step.  Runs labelled "kind (d=w, #r)" share
    one legend entry per kind and width (restarts are the same colour)."""
    colors = colors or MODEL_COLORS
    widths = {label: int(m.group(1)) for label in histories if (m := re.search(r"d=(\d+)", label))}
    widest = max(widths.values(), default=0)
    seen: set[str] = set()
    for label, hist in histories.items():
        kind = label.split(" (")[0]
        group = label.split(", #")[0] + ")" if ", #" in label else label
        legend = group if group not in seen else "_nolegend_"
        seen.add(group)
        narrow = widths.get(label, widest) < widest  # narrower runs dotted, the widest solid
        line, = ax.plot(hist["step"], hist[metric], label=legend, color=colors.get(kind),
                        lw=1.4, alpha=0.85, ls=":" if narrow else "-")
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
    ax.figure.colorbar(sc, ax=ax, fraction=0.046, pad=0.04, label="token value")
    return ax


def plot_attention(ax: Axes, pattern: np.ndarray, labels: list[str], title: str | None = None,
                   highlight: list[tuple[int, int]] | None = None) -> Axes:
    """One head's attention [query, key] over one sequence, tokens on both axes (Figure 2).

    ``highlight`` marks (query, key) cells, e.g. where a value should attend to its marker."""
    t = len(labels)
    im = ax.imshow(pattern[:t, :t], cmap="Blues", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(t), labels, fontsize=8)
    ax.set_yticks(range(t), labels, fontsize=8)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    ax.grid(False)
    for q, k in highlight or []:
        ax.add_patch(plt.Rectangle((k - 0.5, q - 0.5), 1, 1, fill=False, ec="#d95f02", lw=1.6))
    if title:
        ax.set_title(title, fontsize=9)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="attention")
    return ax


def plot_accuracy_ranges(ax: Axes, table: pd.DataFrame, group: str = "task",
                         value: str = "median", low: str = "min", high: str = "max",
                         hue: str = "model", chance: Mapping[str, float] | None = None) -> Axes:
    """Median accuracy per (group, hue) as a dot with its min-max range over restarts as a bar;
    ``chance`` draws each group's baseline as a grey tick."""
    groups = list(dict.fromkeys(table[group]))
    hues = list(dict.fromkeys(table[hue]))
    width = 0.8 / max(len(hues), 1)
    for j, h in enumerate(hues):
        rows = table[table[hue] == h]
        xs = [groups.index(g) - 0.4 + width * (j + 0.5) for g in rows[group]]
        color = MODEL_COLORS.get(str(h).split(" (")[0])
        ax.errorbar(xs, rows[value], yerr=[rows[value] - rows[low], rows[high] - rows[value]],
                    fmt="o", color=color, label=str(h), capsize=3, ms=6, lw=1.4)
    for i, g in enumerate(groups):
        if chance and g in chance:
            ax.hlines(chance[g], i - 0.45, i + 0.45, color="0.55", lw=1.2, ls=":")
    ax.set_xticks(range(len(groups)), [str(g) for g in groups])
    ax.set_ylim(-0.02, 1.05)
    ax.set_ylabel("test accuracy (dot: median, bar: min-max)")
    ax.legend(fontsize=8, loc="lower left")
    return ax


def plot_bars(ax: Axes, labels: list[str], values: list[float], colors: list[str] | None = None,
              fmt: str = "{:.2f}", ylabel: str = "") -> Axes:
    """Labelled bars with their values written on top (tables people would rather look at)."""
    bars = ax.bar(range(len(values)), values, color=colors or "#999999", edgecolor="0.2", lw=0.5)
    for bar, v in zip(bars, values):
        ax.annotate(fmt.format(v), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(values)), labels, fontsize=8, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    return ax


def plot_head_scores(ax: Axes, scores: np.ndarray, title: str | None = None) -> Axes:
    """A [n_layers, n_heads] score per head (e.g. ``analysis.needle_head_scores``) as an
    annotated heatmap on [0, 1]."""
    scores = np.asarray(scores)
    ax.imshow(scores, cmap="Oranges", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(scores.shape[1]))
    ax.set_yticks(range(scores.shape[0]), [f"layer {i + 1}" for i in range(scores.shape[0])])
    ax.set_xlabel("head")
    ax.grid(False)
    for (layer, head), v in np.ndenumerate(scores):
        ax.text(head, layer, f"{v:.2f}", ha="center", va="center", fontsize=8,
                color="white" if v > 0.6 else "black")
    if title:
        ax.set_title(title, fontsize=9)
    return ax


def plot_accuracy_by_length(ax: Axes, table: pd.DataFrame, baseline: float | None = None,
                            title: str | None = None) -> Axes:
    """Accuracy per length bin, one line per answer kind (``accuracy_by_length``'s table)."""
    for answer, color in (("balanced", "#1f78b4"), ("unbalanced", "#e31a1c")):
        rows = table[table["answer"] == answer]
        ax.plot(rows["length"], rows["accuracy"], "o-", color=color, label=answer)
    if baseline is not None:
        ax.axhline(baseline, color="0.5", ls=":", lw=1.2, label="majority baseline")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("string length")
    ax.set_ylabel("test accuracy")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    return ax


def plot_loss_vs_width(ax: Axes, metrics: pd.DataFrame, value: str = "valid_loss",
                       x: str = "width", hue: str = "model",
                       ylabel: str = "validation cross-entropy (nats/token)") -> Axes:
    """Figure 4: ``value`` against width (log2 axis), one line per model kind; every restart is
    a faint dot, the line joins medians."""
    for kind, rows in metrics.groupby(hue, sort=False):
        color = MODEL_COLORS.get(str(kind))
        med = rows.groupby(x)[value].median()
        ax.scatter(rows[x], rows[value], color=color, alpha=0.35, s=14)
        ax.plot(med.index, med.values, "o-", color=color, label=str(kind), lw=1.8)
        for w, v in med.items():
            ax.annotate(f"{v:.2f}", (w, v), fontsize=7, xytext=(3, 4), textcoords="offset points",
                        color=color)
    ax.set_xscale("log", base=2)
    widths = sorted(metrics[x].unique())
    ax.set_xticks(widths, [str(w) for w in widths])
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    return ax


def plot_completions(ax: Axes, prompt: str, completions: Mapping[str, str],
                     wrap: int = 64) -> Axes:
    """Figure 5: one prompt and each model's continuation side by side, the prompt in grey."""
    import textwrap

    ax.axis("off")
    n = len(completions)
    for i, (name, text) in enumerate(completions.items()):
        x0 = i / n + 0.01
        ax.text(x0, 0.98, name, transform=ax.transAxes, fontsize=9, weight="bold", va="top",
                color=MODEL_COLORS.get(name, "black"))
        body = textwrap.fill(f"{prompt} >>> {text.strip()}", wrap)
        ax.text(x0, 0.88, body, transform=ax.transAxes, fontsize=8, va="top", family="serif",
                linespacing=1.35)
    return ax


def plot_explained_variance(ax: Axes, summary: pd.DataFrame, kinds: tuple[str, ...] = (
        "random transformer", "trained transformer"), k: int = 10,
        runs: pd.DataFrame | None = None) -> Axes:
    """Tables 4/5/7 as bars: per task, each kind's top-k PC share (solid) and top-k neuron share
    (hatched) of the hidden-state variance; ``summary`` is ``subspace.summary``'s table (medians
    over restarts).  ``runs``: one row per model (``subspace.last_layer``'s, columns task, model,
    pcs, neurons), drawn as dots over its bar, so that the spread behind each median shows."""
    tasks = list(summary["task"])
    bar = 0.8 / (2 * len(kinds))
    for j, kind in enumerate(kinds):
        for s, (stat, hatch) in enumerate((("PCs", None), ("neurons", "///"))):
            col = f"{kind}: top-k {stat}"
            if col not in summary:
                continue
            xs = [i - 0.4 + bar * (2 * j + s + 0.5) for i in range(len(tasks))]
            ax.bar(xs, summary[col], bar, color=MODEL_COLORS.get(kind), hatch=hatch,
                   alpha=1.0 if stat == "PCs" else 0.55, edgecolor="0.2", lw=0.5,
                   label=f"{kind}, top-{k} {stat}")
            for i, (xv, v) in enumerate(zip(xs, summary[col])):
                top = v
                if runs is not None:
                    values = runs.loc[(runs["task"] == tasks[i]) & (runs["model"] == kind),
                                      stat.lower()]
                    ax.plot([xv] * len(values), values, "o", ms=2.5, color="0.1", zorder=3,
                            label="one model (restart)" if (i, j, s) == (0, 0, 0) else None)
                    top = max([v, *values])
                # the median's label above the highest dot, so that no dot hides it
                ax.annotate(f"{v:.2f}", (xv, top), ha="center", va="bottom", fontsize=7,
                            xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("share of hidden-state variance")
    # below the axes: four entries in two columns are wider than a small axes, and inside it
    # they covered the tallest bars and the y label
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.12), frameon=False)
    return ax


def plot_imitation(ax: Axes, table: pd.DataFrame, ratio: bool = False) -> Axes:
    """Figure 6: the imitator's test KL against the target's width (log2), with the KL of the
    best input-blind imitator (the target's average distribution) as the ceiling; ``ratio``
    plots KL / that ceiling instead (0: perfect imitation, 1: nothing learned about the input)."""
    value = "kl_ratio" if ratio else "test_kl"
    for (kind, width), rows in table.groupby(["model", "imitator_width"], sort=False):
        ax.plot(rows["target_width"], rows[value], "o-", color=MODEL_COLORS.get(kind),
                label=f"{kind} (width {width})", lw=1.8)
    if ratio:
        ax.axhline(1.0, color="0.5", ls="--", lw=1.2, label="input-blind imitator")
        ax.set_ylim(0, 1.1)
        ax.set_ylabel("KL / input-blind imitator's KL")
    else:
        base = table.drop_duplicates("target_width")
        ax.plot(base["target_width"], base["baseline_kl"], "s--", color="0.5",
                label="input-blind imitator (target's mean distribution)")
        ax.set_ylabel("KL(target || imitator), nats")
    ax.set_xscale("log", base=2)
    widths = sorted(table["target_width"].unique())
    ax.set_xticks(widths, [str(w) for w in widths])
    ax.set_xlabel("target transformer width")
    ax.legend(fontsize=8)
    return ax


def plot_per_task_curves(ax: Axes, history: pd.DataFrame, qs: tuple[int, ...],
                         split: str = "valid", metric: str = "acc", title: str | None = None,
                         masked: tuple[int, ...] = ()) -> Axes:
    """miiii: one curve per prime head q (colour runs from small to large q) against epoch on a
    log axis; dashed grey = the train accuracy over all heads, to show the grokking gap.
    ``masked`` heads (no loss) are drawn dotted."""
    cmap = plt.get_cmap("viridis")
    for i, q in enumerate(qs):
        col = f"{split}_{metric}_q{q}"
        ax.plot(history["step"], history[col], color=cmap(i / max(len(qs) - 1, 1)), lw=1.3,
                ls=":" if q in masked else "-", label=f"q = {q}" if i < 6 or i == len(qs) - 1 else None)
    if split != "train" and metric == "acc":
        ax.plot(history["step"], history["train_acc"], color="0.4", ls="--", lw=1.2,
                label="train (all heads)")
    ax.set_xscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel(f"{split} {metric} per head")
    if metric == "acc":
        ax.set_ylim(-0.02, 1.05)
    else:  # cross-entropy / ln q: 1 = a uniform guess; log scale shows both fit and overfit
        ax.set_yscale("log")
        ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    return ax


def plot_generalisation_epochs(ax: Axes, tables: Mapping[str, pd.DataFrame],
                               epochs: int) -> Axes:
    """The epoch at which each head q generalised, one marker row per run; heads that never did
    sit at the right edge as crosses."""
    markers = "osD^v<>"
    for j, (label, table) in enumerate(tables.items()):
        done = table[table["valid epoch"].notna()]
        never = table[table["valid epoch"].isna()]
        ax.scatter(done["valid epoch"], done["q"], marker=markers[j % len(markers)], s=28, label=label)
        ax.scatter([epochs] * len(never), never["q"], marker="x", color="0.5", s=20)
    ax.set_xscale("log")
    ax.set_xlabel("epoch at which validation accuracy stays above threshold (x: never)")
    ax.set_ylabel("prime q")
    ax.legend(fontsize=8)
    return ax


def plot_positional_embeddings(ax: Axes, w_pos: np.ndarray, title: str | None = None) -> Axes:
    """miiii Figure 7: each model dimension as a point (W_pos[0, i], W_pos[1, i]); a diagonal
    line means both digit positions are embedded alike (r near 1: a commutative task)."""
    from rt_lib.analysis.fourier import pearson

    a, b = np.asarray(w_pos[0]), np.asarray(w_pos[1])
    ax.scatter(a, b, s=9, alpha=0.7)
    lim = float(max(np.abs(a).max(), np.abs(b).max())) * 1.1
    ax.plot([-lim, lim], [-lim, lim], color="0.7", lw=0.8, ls="--")
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.set_xlabel("W_pos[0] (first digit)")
    ax.set_ylabel("W_pos[1] (second digit)")
    ax.set_title(f"{title + ': ' if title else ''}r = {pearson(a, b):+.2f}", fontsize=10)
    return ax


def plot_singular_values(ax: Axes, values: Mapping[str, np.ndarray], squared: bool = False,
                         fractions: tuple[float, ...] = (0.5, 0.9)) -> Axes:
    """miiii Figure 8: singular values of W_E (normalised to their largest) per task, with ticks
    where the cumulative sum of s (``squared=False``, the code) or s² (the variance, the text)
    reaches each fraction."""
    from rt_lib.analysis.fourier import cumulative_marks

    for i, (label, s) in enumerate(values.items()):
        s = np.sort(np.asarray(s))[::-1]
        color = f"C{i}"
        ax.plot(np.arange(1, len(s) + 1), s / s[0], color=color, lw=1.5, label=label)
        for f, n in zip(fractions, cumulative_marks(s, fractions, squared)):
            ax.axvline(n, color=color, ls=":" if f < max(fractions) else "--", lw=1)
            ax.text(n, 1.02 - 0.07 * i, f"{f:.0%}", color=color, fontsize=7, ha="center",
                    transform=ax.get_xaxis_transform())
    ax.set_xlabel("singular value index")
    ax.set_ylabel("s / s₁")
    ax.set_title(f"marks: share of {'Σ s² (variance)' if squared else 'Σ s'}", fontsize=10)
    ax.legend(fontsize=8)
    return ax


def plot_singular_vectors(ax: Axes, embedding: np.ndarray, n: int = 4, title: str | None = None) -> Axes:
    """miiii Figure 9: the top left singular vectors of W_E [p, d] over the digit tokens (periodic
    curves when the embedding is a Fourier lookup table)."""
    u, s = singular_vectors(embedding)
    # SVD signs are arbitrary (another LAPACK may flip a curve): largest-magnitude entry positive,
    # as rt_lib.analysis.activations.pca does for its components
    signs = np.sign(u[np.abs(u).argmax(0), np.arange(u.shape[1])])
    u = u * np.where(signs == 0, 1, signs)[None, :]
    for i in range(min(n, u.shape[1])):
        ax.plot(u[:, i] + 0.0, lw=1.2, label=f"u{i + 1} (s = {s[i]:.1f})")
    ax.set_xlabel("digit token")
    ax.set_ylabel("singular vector entry")
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    return ax


def plot_fourier_power(ax: Axes, power: np.ndarray, title: str | None = None) -> Axes:
    """miiii Figures 11-13: share of the token embedding's power at each frequency w = 1..p//2."""
    w = np.arange(1, len(power) + 1)
    ax.bar(w, power, color="C0", width=0.8)
    ax.set_xlabel("frequency w (cycles over the p digits)")
    ax.set_ylabel("share of power")
    ax.set_xticks(w[:: max(1, len(w) // 12)])
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_neuron_grid(ax: Axes, grid: np.ndarray, title: str | None = None,
                     labels: tuple[str, str] = ("x1 (first token)", "x0 (second token)")) -> Axes:
    """miiii Figure 14 (left): one neuron's activation over the p x p input grid."""
    im = ax.imshow(grid, cmap="viridis", origin="lower", interpolation="nearest")
    ax.grid(False)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_xlabel(labels[1])
    ax.set_ylabel(labels[0])
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_neuron_spectrum(ax: Axes, power: np.ndarray, title: str | None = None) -> Axes:
    """miiii Figure 14 (right): the power of a neuron's 2-D FFT, zero frequency at the centre."""
    p = power.shape[0]
    shifted = np.fft.fftshift(power)
    lo = -(p // 2)
    ax.imshow(shifted, cmap="magma", origin="lower", interpolation="nearest",
              extent=(lo - 0.5, lo + p - 0.5, lo - 0.5, lo + p - 0.5))
    ax.grid(False)
    ax.set_xlabel("frequency along x0")
    ax.set_ylabel("frequency along x1")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_active_frequencies(ax: Axes, table: pd.DataFrame,
                            ylabel: str = "active frequency pairs",
                            control: pd.DataFrame | None = None,
                            control_label: str = "T_basis") -> Axes:
    """miiii Figure 15: number of active frequency pairs of the MLP against epoch (log x), one
    line per threshold column ``active (k = ...)``; on a twin axis (dashed) the share of the
    periodic power that combines both digits (``interaction share``), if present.  ``control``:
    the same columns of a control run, dashed in each line's colour."""
    for col in [c for c in table.columns if c.startswith("active")]:
        line, = ax.plot(table["epoch"], table[col], marker="o", ms=3, label=col)
        if control is not None and col in control:
            ax.plot(control["epoch"], control[col], color=line.get_color(), ls="--", marker="x",
                    ms=3, label=f"{control_label}: {col}")
    ax.set_xscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, None)
    handles, labels = ax.get_legend_handles_labels()
    if "interaction share" in table:
        twin = ax.twinx()
        line, = twin.plot(table["epoch"], table["interaction share"], color="C3", ls="--",
                          marker="s", ms=3, label="interaction share (right)")
        twin.set_ylim(0, 1)
        twin.set_ylabel("power at (w1 ≠ 0, w0 ≠ 0)")
        handles, labels = handles + [line], labels + [line.get_label()]
    ax.legend(handles, labels, fontsize=8, loc="upper left")
    return ax


def plot_gradient_norms(ax: Axes, table: pd.DataFrame, settled: Mapping[str, int | None] | None = None,
                        fraction: float | None = None) -> Axes:
    """miiii Figure 17: the L2 norm of the training loss's gradient per part of the model
    (``table``: columns epoch, part, norm) against epoch, both axes log; ``settled``: the epoch
    each part's norm settled (``fraction`` of its peak), marked on its line."""
    for i, (part, rows) in enumerate(table.groupby("part", sort=False)):
        ax.plot(rows["epoch"], rows["norm"], marker="o", ms=3, color=f"C{i}", label=part)
        at = (settled or {}).get(part)
        if at is not None:
            ax.plot([at], rows.loc[rows["epoch"] == at, "norm"], marker="v", ms=9, color=f"C{i}",
                    ls="none")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("gradient L2 norm (train loss)")
    if fraction is not None:
        ax.set_title(f"▼: from here at most {fraction:g} of its peak", fontsize=9)
    ax.legend(fontsize=8)
    return ax


def plot_digit_attention(ax: Axes, shares: Mapping[str, list[list[float]]], threshold: float | None = None) -> Axes:
    """miiii Figure 18 in one number per head: the share of each head's attention on the digits
    that goes to its preferred digit (0.5 both alike, 1 one digit only), a dot per head and seed,
    one column per model (``shares``: {model: [per seed: per head]})."""
    for i, (label, seeds) in enumerate(shares.items()):
        for j, heads in enumerate(seeds):
            xs = i + 0.08 * (j - (len(seeds) - 1) / 2) + np.zeros(len(heads))
            ax.plot(xs, heads, "o", ms=5, color=f"C{i}", alpha=0.8,
                    label=label if j == 0 else None)
    if threshold is not None:
        ax.axhline(threshold, color="grey", ls=":", lw=1)
    ax.set_xticks(range(len(shares)), list(shares))
    ax.set_xlim(-0.6, len(shares) - 0.4)
    ax.set_ylim(0.45, 1.02)
    ax.set_ylabel("attention on its digit / on both digits")
    return ax


def plot_residue_profile(ax: Axes, values: np.ndarray, q: int, title: str | None = None) -> Axes:
    """Mean activation of a neuron per residue class n mod q (bars), across the input grid."""
    ax.bar(np.arange(q), values, color="C2", width=0.8)
    ax.set_xticks(np.arange(0, q, max(1, q // 10)))
    ax.set_xlim(-0.6, q - 0.4)
    ax.set_xlabel(f"n mod {q}")
    ax.set_ylabel("mean activation")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def plot_per_head_accuracy(ax: Axes, table: pd.DataFrame, columns: tuple[str, ...],
                           title: str | None = None) -> Axes:
    """Grouped bars: validation accuracy per prime head q (rows of ``table``, column "q") for
    each of ``columns`` (e.g. random vs trained transformer), with the chance level 1/q."""
    qs = table["q"].to_numpy()
    x = np.arange(len(qs))
    width = 0.8 / len(columns)
    for i, col in enumerate(columns):
        ax.bar(x + (i - (len(columns) - 1) / 2) * width, table[col], width, label=col)
    ax.plot(x, 1 / qs, color="0.3", marker="_", ls="none", ms=14, label="chance 1/q")
    ax.set_xticks(x)
    ax.set_xticklabels([str(q) for q in qs])
    ax.set_xlabel("prime q")
    ax.set_ylabel("validation accuracy")
    ax.set_ylim(0, 1.05)
    if title:
        ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return ax


def plot_search_history(ax: Axes, table: pd.DataFrame, maximize: bool = True,
                        label: str = "objective") -> Axes:
    """Optuna study: each finished trial's objective in trial order, and the best so far."""
    t = table.sort_values("trial")
    best = t["value"].cummax() if maximize else t["value"].cummin()
    ax.scatter(t["trial"], t["value"], s=22, color="C0", label="trial")
    ax.step(t["trial"], best, where="post", color="C3", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel(label)
    ax.legend(fontsize=8)
    return ax


def plot_param_effect(ax: Axes, table: pd.DataFrame, name: str, label: str = "objective") -> Axes:
    """Optuna study: the objective of every trial against one hyperparameter's values (points),
    with the mean per value (bars)."""
    values = sorted(table[name].unique())
    x = {v: i for i, v in enumerate(values)}
    means = table.groupby(name)["value"].mean()
    ax.bar(range(len(values)), [means[v] for v in values], color="C0", alpha=0.35, width=0.6)
    jitter = np.linspace(-0.15, 0.15, max(len(table), 2))[: len(table)]
    ax.scatter([x[v] + j for v, j in zip(table[name], jitter)], table["value"], s=14, color="C0")
    ax.set_xticks(range(len(values)))
    ax.set_xticklabels([f"{v:g}" if isinstance(v, float) else str(v) for v in values])
    ax.set_xlabel(name)
    ax.set_ylabel(label)
    return ax
