"""ipywidgets explorers; each redraws one of the ``plot_x`` functions on every change."""

from __future__ import annotations

import io
from collections.abc import Mapping

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from torch import Tensor, nn

from rt_lib.analysis.activations import PCA
from rt_lib.plots.figures import (
    plot_attention,
    plot_completions,
    plot_embedding_circle,
    plot_neuron_grid,
    plot_neuron_spectrum,
    plot_residue_profile,
)
from rt_lib.tasks.tokenizer import BPETokenizer, generate


def pc_explorer(projections: Mapping[str, PCA], default: tuple[int, int] = (0, 2),
                n_pcs: int = 8) -> widgets.VBox:
    """Pick a model and two principal components; shows its embedding on them (Figure 3)."""
    names = list(projections)
    n = min(n_pcs, min(pr.projected.shape[1] for pr in projections.values()))
    options = [(f"PC{i + 1}", i) for i in range(n)]
    model = widgets.Dropdown(options=names, value=names[0], description="model")
    pc_x = widgets.Dropdown(options=options, value=default[0], description="x axis")
    pc_y = widgets.Dropdown(options=options, value=default[1], description="y axis")

    def draw(name: str, x: int, y: int) -> None:
        fig, ax = plt.subplots(figsize=(5, 4.5))
        plot_embedding_circle(ax, projections[name], (x, y), title=name)
        plt.show()

    out = widgets.interactive_output(draw, {"name": model, "x": pc_x, "y": pc_y})
    return widgets.VBox([widgets.HBox([model, pc_x, pc_y]), out])


def attention_explorer(patterns: Mapping[str, Tensor], labels: list[list[str]],
                       default: tuple[int, int] = (0, 0)) -> widgets.VBox:
    """Pick a model, layer, head and example; shows that head's attention (Figure 2).

    ``patterns[name]`` is [n_layers, b, n_heads, t, t] (``analysis.attention_patterns``) and
    ``labels[i]`` the token strings of example i (trailing padding left out)."""
    names = list(patterns)
    first = patterns[names[0]]
    model = widgets.Dropdown(options=names, value=names[0], description="model")
    layer = widgets.IntSlider(value=default[0], min=0, max=first.shape[0] - 1, description="layer")
    head = widgets.IntSlider(value=default[1], min=0, max=first.shape[2] - 1, description="head")
    example = widgets.IntSlider(value=0, min=0, max=len(labels) - 1, description="example")

    def draw(name: str, layer: int, head: int, example: int) -> None:
        fig, ax = plt.subplots(figsize=(5.2, 4.6))
        pattern = patterns[name][layer, example, head].numpy()
        plot_attention(ax, pattern, labels[example], title=f"{name}: layer {layer + 1}, head {head}")
        plt.show()

    out = widgets.interactive_output(
        draw, {"name": model, "layer": layer, "head": head, "example": example})
    return widgets.VBox([widgets.HBox([model, example]), widgets.HBox([layer, head]), out])


def completion_explorer(models: Mapping[str, nn.Module], tokenizer: BPETokenizer,
                        prompt: str, max_new_tokens: int = 40) -> widgets.VBox:
    """Type a prompt, set temperature and seed; every model completes it (Figure 5, live)."""
    text = widgets.Textarea(value=prompt, description="prompt", layout=widgets.Layout(width="95%"))
    temperature = widgets.FloatSlider(value=0.7, min=0.0, max=1.5, step=0.1, description="temperature")
    seed = widgets.IntSlider(value=0, min=0, max=20, description="seed")
    tokens = widgets.IntSlider(value=max_new_tokens, min=5, max=120, step=5, description="tokens")

    def draw(prompt: str, temperature: float, seed: int, tokens: int) -> None:
        if not prompt.strip():
            print("type a prompt")
            return
        done = {name: tokenizer.decode(generate(model, tokenizer.encode(prompt), tokens, seed=seed,
                                                temperature=temperature, stop_id=tokenizer.eot_id))
                for name, model in models.items()}
        fig, ax = plt.subplots(figsize=(11, 2.4))
        plot_completions(ax, prompt, done)
        plt.show()

    out = widgets.interactive_output(
        draw, {"prompt": text, "temperature": temperature, "seed": seed, "tokens": tokens})
    return widgets.VBox([text, widgets.HBox([temperature, seed, tokens]), out])


def neuron_figure(grid: np.ndarray, neuron: int, q: int, epoch: int, n_top: int = 3,
                  readout: np.ndarray | None = None, qs: tuple[int, ...] = ()) -> Figure:
    """The explorer's view of one neuron at one snapshot: activation over the p x p grid of
    [x1, x0] (n = x0 + x1 p), its 2-D spectrum with the top frequencies, and its mean activation
    per residue n mod q.  ``readout`` [d_mlp, n_tasks] (optional) adds how strongly the neuron
    writes to head q."""
    from rt_lib.analysis.fourier import spectrum_2d, top_frequencies

    p = grid.shape[0]
    acts = grid[..., neuron]
    power = spectrum_2d(acts[..., None])[..., 0]
    top = top_frequencies(power, n_top)
    n = np.arange(p)[None, :] + p * np.arange(p)[:, None]  # [x1, x0] -> n
    profile = np.array([acts[n % q == r].mean() for r in range(q)])
    fig = Figure(figsize=(13, 3.8))
    axes = fig.subplots(1, 3)
    plot_neuron_grid(axes[0], acts, f"neuron {neuron}, epoch {epoch}")
    freqs = ", ".join(f"({a}, {b}) {share:.0%}" for a, b, share in top)
    plot_neuron_spectrum(axes[1], power, f"|FFT|²; top (w_x1, w_x0): {freqs}")
    write = ""
    if readout is not None and q in qs:
        write = f"; writes to head q={q}: {readout[neuron, qs.index(q)]:.2f}"
    plot_residue_profile(axes[2], profile, q, f"mean activation by n mod {q}{write}")
    fig.tight_layout()
    return fig


def figure_png(fig: Figure, dpi: int = 72) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def neuron_explorer(grids: Mapping[int, np.ndarray], qs: tuple[int, ...],
                    readouts: Mapping[int, np.ndarray] | None = None,
                    neuron: int = 0, n_top: int = 3) -> widgets.VBox:
    """miiii neuron explorer: sliders for the neuron, the snapshot epoch and the task q; shows
    :func:`neuron_figure` as a PNG image (``children[-1]``), redrawn on every change.

    ``grids[epoch]`` is [p, p, d_mlp] (``fourier.neuron_grid``); ``readouts[epoch]`` [d_mlp, n_tasks]."""
    epochs = sorted(grids)
    d_mlp = grids[epochs[0]].shape[-1]
    neuron_slider = widgets.IntSlider(value=neuron, min=0, max=d_mlp - 1, description="neuron",
                                      continuous_update=False)
    epoch_slider = widgets.SelectionSlider(options=epochs, value=epochs[-1], description="epoch",
                                           continuous_update=False)
    q_slider = widgets.SelectionSlider(options=list(qs), value=qs[0], description="task q",
                                       continuous_update=False)
    image = widgets.Image(format="png")

    def redraw(_change: object = None) -> None:
        epoch = epoch_slider.value
        readout = readouts[epoch] if readouts is not None else None
        image.value = figure_png(neuron_figure(grids[epoch], neuron_slider.value, q_slider.value,
                                               epoch, n_top, readout, tuple(qs)))

    for slider in (neuron_slider, epoch_slider, q_slider):
        slider.observe(redraw, names="value")
    redraw()
    return widgets.VBox([widgets.HBox([neuron_slider, epoch_slider, q_slider]), image])
