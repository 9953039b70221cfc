"""ipywidgets explorers; each redraws one of the ``plot_x`` functions on every change."""

from __future__ import annotations

from collections.abc import Mapping

import ipywidgets as widgets
import matplotlib.pyplot as plt
from torch import Tensor, nn

from rt_lib.analysis import PCA
from rt_lib.plots import plot_attention, plot_completions, plot_embedding_circle
from rt_lib.text import BPETokenizer, generate


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
