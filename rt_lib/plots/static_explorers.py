"""Kernel-free explorers: every view drawn in advance, switched in the browser.

The ipywidgets explorers (:mod:`rt_lib.plots.explorers`) need a live kernel; a reader of the rendered
notebook or of the companion site (:mod:`rt_lib.site.pages`) has none.  A :class:`FrameExplorer` draws
every combination of its controls once (with the same ``plot_x`` functions as the live
explorers), embeds the PNGs in one HTML output, and a few lines of plain JavaScript show the
frame the controls select: no library, nothing fetched, works from a file.  The controls are
kept few (the notebook carries every frame): :func:`pc_frames`, :func:`attention_frames` and
:func:`neuron_frames` say which views they draw.
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.figure import Figure
from torch import Tensor

from rt_lib.analysis.activations import PCA
from rt_lib.plots.explorers import figure_png, neuron_figure
from rt_lib.plots.figures import plot_attention, plot_embedding_circle


@dataclass(frozen=True)
class Control:
    name: str  # shown beside it
    options: tuple[str, ...]  # the labels of its values, in order
    slider: bool = True  # a range slider (ordered values) or a drop-down (names)
    default: int = 0  # index of the value shown first


class FrameExplorer:
    """One PNG per combination of the controls' values (``frames[(i, j, ...)]``), shown as an
    HTML output whose controls switch the image without a kernel."""

    def __init__(self, title: str, controls: Sequence[Control],
                 frames: Mapping[tuple[int, ...], bytes]) -> None:
        expected = set(itertools.product(*(range(len(c.options)) for c in controls)))
        if set(frames) != expected:
            raise ValueError(f"{title}: frames must cover every combination of the controls "
                             f"({len(expected)}), got {len(frames)}")
        self.title, self.controls = title, tuple(controls)
        self.frames = {",".join(map(str, k)): base64.b64encode(v).decode()
                       for k, v in frames.items()}

    @property
    def default_key(self) -> str:
        return ",".join(str(c.default) for c in self.controls)

    def __repr__(self) -> str:
        return f"FrameExplorer({self.title!r}, {len(self.frames)} frames)"

    def _control_html(self, i: int, c: Control) -> str:
        name = html.escape(c.name)
        if c.slider:
            return (f'<label>{name} <input type="range" min="0" max="{len(c.options) - 1}" '
                    f'step="1" value="{c.default}" data-rt-control="{i}"> '
                    f'<span data-rt-label="{i}">{html.escape(c.options[c.default])}</span>'
                    "</label>")
        options = "".join(f'<option value="{k}"{" selected" if k == c.default else ""}>'
                          f"{html.escape(o)}</option>" for k, o in enumerate(c.options))
        return f'<label>{name} <select data-rt-control="{i}">{options}</select></label>'

    def _repr_html_(self) -> str:
        data = json.dumps({"frames": self.frames,
                           "options": [list(c.options) for c in self.controls]},
                          sort_keys=True)
        uid = "rt-explorer-" + hashlib.sha1(data.encode()).hexdigest()[:12]
        controls = " &nbsp; ".join(self._control_html(i, c) for i, c in enumerate(self.controls))
        # "</" cannot end the JSON's script element early: JSON allows the escaped slash
        data = data.replace("</", "<\\/")
        return f"""<div class="rt-explorer" id="{uid}">
<div class="rt-explorer-title"><b>{html.escape(self.title)}</b>
<i>(drawn in advance: works without a kernel)</i></div>
<div class="rt-controls">{controls}</div>
<img class="rt-frame" data-rt-key="{self.default_key}" alt="{html.escape(self.title)}"
 src="data:image/png;base64,{self.frames[self.default_key]}">
<script type="application/json" class="rt-frames">{data}</script>
<script>
(function () {{
  var root = document.getElementById("{uid}");
  var data = JSON.parse(root.querySelector(".rt-frames").textContent);
  var inputs = root.querySelectorAll("[data-rt-control]");
  var img = root.querySelector(".rt-frame");
  function show() {{
    var key = [];
    inputs.forEach(function (el) {{
      var i = +el.getAttribute("data-rt-control");
      key.push(el.value);
      var label = root.querySelector('[data-rt-label="' + i + '"]');
      if (label) {{ label.textContent = data.options[i][+el.value]; }}
    }});
    img.src = "data:image/png;base64," + data.frames[key.join(",")];
    img.setAttribute("data-rt-key", key.join(","));
  }}
  inputs.forEach(function (el) {{
    el.addEventListener("input", show);
    el.addEventListener("change", show);
  }});
}})();
</script>
</div>"""


def frame_explorer(title: str, controls: Sequence[Control],
                   draw: Callable[..., Figure], dpi: int = 60) -> FrameExplorer:
    """Draw ``draw(i, j, ...)`` (a Figure, one index per control) for every combination."""
    frames = {}
    for key in itertools.product(*(range(len(c.options)) for c in controls)):
        frames[key] = figure_png(draw(*key), dpi=dpi)
    return FrameExplorer(title, controls, frames)


def pc_frames(projections: Mapping[str, PCA], n_pcs: int = 6,
              default: tuple[int, int] = (0, 2)) -> FrameExplorer:
    """Notebook 01's PC picker without a kernel: a model and a pair of its first ``n_pcs``
    principal components (PCs 1 and 3 first, the paper's Figure 3)."""
    names = list(projections)
    n = min(n_pcs, min(pr.projected.shape[1] for pr in projections.values()))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]

    def draw(model: int, pair: int) -> Figure:
        fig = Figure(figsize=(4.4, 4.0))
        plot_embedding_circle(fig.subplots(), projections[names[model]], pairs[pair],
                              title=names[model])
        fig.tight_layout()
        return fig

    controls = [Control("model", tuple(names), slider=False),
                Control("PCs", tuple(f"PC{i + 1} / PC{j + 1}" for i, j in pairs),
                        default=pairs.index(default) if default in pairs else 0)]
    return frame_explorer("token embedding on two principal components", controls, draw, dpi=55)


def attention_frames(patterns: Mapping[str, Tensor], labels: list[list[str]],
                     n_examples: int = 3) -> FrameExplorer:
    """Notebook 02's head explorer without a kernel: a model, layer, head and one of the first
    ``n_examples`` test sequences.  ``patterns[name]``: [n_layers, b, n_heads, t, t]."""
    names = list(patterns)
    first = patterns[names[0]]
    n_layers, n_heads = first.shape[0], first.shape[2]
    examples = min(n_examples, len(labels), first.shape[1])

    def draw(model: int, layer: int, head: int, example: int) -> Figure:
        fig = Figure(figsize=(4.6, 4.0))
        pattern = patterns[names[model]][layer, example, head].numpy()
        plot_attention(fig.subplots(), pattern, labels[example],
                       title=f"{names[model]}: layer {layer + 1}, head {head}")
        fig.tight_layout()
        return fig

    controls = [Control("model", tuple(names), slider=False),
                Control("layer", tuple(str(i + 1) for i in range(n_layers))),
                Control("head", tuple(str(h) for h in range(n_heads))),
                Control("example", tuple(str(e) for e in range(examples)))]
    return frame_explorer("attention of one head on one test sequence", controls, draw, dpi=72)


def neuron_frames(grids: Mapping[int, np.ndarray], qs: Sequence[int],
                  readouts: Mapping[int, np.ndarray], neurons: Sequence[int],
                  n_epochs: int = 4, n_top: int = 3) -> FrameExplorer:
    """Notebook 13's neuron explorer without a kernel: one of ``neurons`` at one of
    ``n_epochs`` snapshots (evenly over the saved ones, the last included); the residue panel
    shows the task q the neuron writes to most strongly at the last snapshot."""
    epochs = sorted(grids)
    picked = [epochs[round(k)] for k in np.linspace(0, len(epochs) - 1, min(n_epochs, len(epochs)))]
    picked = sorted(set(picked))
    last = readouts[epochs[-1]]  # [d_mlp, n_tasks]
    q_of = {n: int(qs[int(np.argmax(np.abs(last[n])))]) for n in neurons}

    def draw(neuron: int, epoch: int) -> Figure:
        n, e = neurons[neuron], picked[epoch]
        return neuron_figure(grids[e], n, q_of[n], e, n_top, readouts[e], tuple(qs))

    controls = [Control("neuron", tuple(f"{n} (q = {q_of[n]})" for n in neurons)),
                Control("epoch", tuple(str(e) for e in picked), default=len(picked) - 1)]
    return frame_explorer("one neuron over the input grid, its spectrum and residues", controls,
                          draw, dpi=60)
