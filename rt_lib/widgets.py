"""ipywidgets explorers; each redraws one of the ``plot_x`` functions on every change."""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as widgets
import matplotlib.pyplot as plt
from torch import Tensor

from rt_lib.analysis import PCA
from rt_lib.plots import plot_attention, plot_embedding_circle


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
