"""Every figure function of rt_lib drawn from small fixed inputs and compared with a committed
PNG baseline, the way matplotlib's own image tests and pytest-mpl work.

nbval skips images, so without these tests a figure could go blank, lose its legend or plot the
wrong column while every notebook still passes.  Each ``plot_x`` function has one case below:
hand-built inputs shaped like the ones the notebooks pass, drawn on a figure of fixed size and
dpi with matplotlib's Agg renderer, its defaults, matplotlib's test font settings (DejaVu Sans,
which ships with matplotlib) and the project's ``style()``.  The PNG is saved under pytest's
``tmp_path`` and compared with ``tests/plots/baseline_figures/plot_x.png`` by
``matplotlib.testing.compare.compare_images``.  A failure names the function and the diff image,
``plot_x-failed-diff.png``, which sits next to the actual image in ``tmp_path``.

After an intended change to a figure, check the diff image, then rewrite the baselines:

    RT_REGENERATE_FIGURES=1 .venv/bin/python -m pytest tests/plots/test_figures.py

Each figure test then writes its baseline and is reported as skipped with a message saying so.
Look at the new PNGs before committing them.  A missing baseline fails its test; it never
passes silently.  A new ``plot_*`` function in rt_lib without a case here fails
``test_every_plot_function_has_a_case``.
"""

from __future__ import annotations

import configparser
import importlib
import inspect
import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.testing import set_font_settings_for_testing
from matplotlib.testing.compare import compare_images
from matplotlib.testing.exceptions import ImageComparisonFailure

import rt_lib
from rt_lib.analysis.activations import PCA
from rt_lib.plots import figures as plots
from rt_lib.runtime.io import save_figure

BASELINES = Path(__file__).parent / "baseline_figures"
REGENERATE = os.environ.get("RT_REGENERATE_FIGURES") == "1"
REGENERATE_COMMAND = "RT_REGENERATE_FIGURES=1 .venv/bin/python -m pytest tests/plots/test_figures.py"

# Small figures keep the baseline folder small: 4 x 3 inches at 64 dpi is 256 x 192 pixels.
FIGSIZE = (4, 3)
DPI = 64

# RMS tolerance on the 0-255 pixel scale, measured on these figures: a redraw gives RMS 0
# (Agg with a fixed font and hinting is deterministic), and so does float noise in the inputs
# (a 1e-9 relative change moves no pixel); a 1e-3 relative change in every input point, far
# beyond what another BLAS or CPU gives, reaches about 1.2.  The smallest real changes tried cost
# more: one letter of an axis label 2.7, one letter of a title 5.2, one bar 0.01 taller 8.7, a
# dropped legend 15.7.  2 lies between the two groups.
TOL = 2.0


@dataclass(frozen=True)
class Case:
    draw: Callable[[Axes], object]  # calls the plot function on the axes it is given
    sets: str  # what the function writes and the test checks: x (xlabel), y (ylabel), t (title)


CASES: dict[str, Case] = {}


def case(sets: str = ""):
    """Register ``draw_plot_x`` as the case of ``plots.plot_x``."""
    def register(draw: Callable[[Axes], object]) -> Callable[[Axes], object]:
        CASES[draw.__name__.removeprefix("draw_")] = Case(draw, sets)
        return draw
    return register


# ---- the cases: one per plot function, inputs shaped like the ones the notebooks pass ----------

def _curve(steps: np.ndarray, rate: float, top: float = 1.0) -> np.ndarray:
    return top * (1 - np.exp(-steps / rate))


@case(sets="xy")
def draw_plot_learning_curves(ax):
    # Notebook 01 uses "kind (d=w, #r)" labels: two restarts of the narrow run share one legend
    # entry and are dotted; the widest run is solid.  The train twin of each run is dashed.
    steps = np.arange(0, 201, 20)
    def run(rate, lag):
        return pd.DataFrame({"step": steps, "test_acc": _curve(steps, rate + lag),
                             "train_acc": _curve(steps, rate)})
    histories = {"random transformer (d=16, #1)": run(60, 40),
                 "random transformer (d=16, #2)": run(70, 30),
                 "trained transformer (d=32, #1)": run(20, 10)}
    plots.plot_learning_curves(ax, histories, "test_acc")


@case(sets="xyt")
def draw_plot_embedding_circle(ax):
    # A hand-built projection (no SVD): 11 tokens on a circle walked at frequency 3 in PCs 1 and
    # 3, so the function joins them as a polygon and the title reads "circularity 1.00, k=3".
    p, k = 11, 3
    angle = 2 * np.pi * k * np.arange(p) / p
    projected = np.stack([2 * np.cos(angle), np.linspace(-0.5, 0.5, p), 2 * np.sin(angle)], 1)
    projection = PCA(components=np.eye(3), explained_variance_ratio=np.array([0.45, 0.1, 0.45]),
                     projected=projected)
    plots.plot_embedding_circle(ax, projection, (0, 2), title="toy")


@case(sets="xyt")
def draw_plot_attention(ax):
    # A causal pattern over five tokens (rows sum to 1), one cell highlighted as notebook 02 does.
    t = 5
    pattern = np.tril(np.arange(1, t + 1)[None, :] * np.ones((t, 1)))
    pattern = pattern / pattern.sum(1, keepdims=True)
    plots.plot_attention(ax, pattern, ["a", "1", "b", "2", "?"], title="layer 1, head 0",
                         highlight=[(4, 2)])


@case(sets="y")
def draw_plot_accuracy_ranges(ax):
    table = pd.DataFrame({
        "column": ["mod add", "mod add", "parens", "parens"],
        "model": ["random transformer", "trained transformer"] * 2,
        "median": [0.95, 1.0, 0.7, 0.9], "min": [0.9, 0.99, 0.6, 0.85],
        "max": [0.98, 1.0, 0.8, 0.95]})
    plots.plot_accuracy_ranges(ax, table, group="column", chance={"parens": 0.5})


BARS = dict(labels=["random", "trained", "LSTM"], values=[0.31, 0.62, 0.9],
            colors=["#d95f02", "#1b9e77", "#7570b3"], ylabel="accuracy")


@case(sets="y")
def draw_plot_bars(ax):
    plots.plot_bars(ax, **BARS)


@case(sets="xt")
def draw_plot_head_scores(ax):
    plots.plot_head_scores(ax, np.array([[0.1, 0.75, 0.3], [0.5, 0.0, 0.95]]), title="needle")


@case(sets="xyt")
def draw_plot_accuracy_by_length(ax):
    lengths = [4, 8, 12, 16]
    table = pd.DataFrame({"answer": ["balanced"] * 4 + ["unbalanced"] * 4,
                          "length": lengths * 2,
                          "accuracy": [1.0, 0.95, 0.85, 0.7, 0.98, 0.9, 0.8, 0.75]})
    plots.plot_accuracy_by_length(ax, table, baseline=0.5, title="parentheses")


@case(sets="xy")
def draw_plot_loss_vs_width(ax):
    # Two restarts per width: each one is a faint dot, and the line joins their medians.
    rows = [(model, w, base - 0.3 * np.log2(w / 16) + 0.05 * r)
            for model, base in (("random transformer", 3.0), ("trained transformer", 2.4))
            for w in (16, 32, 64) for r in (0, 1)]
    plots.plot_loss_vs_width(ax, pd.DataFrame(rows, columns=["model", "width", "valid_loss"]))


@case()
def draw_plot_completions(ax):
    # Text only (the axes is switched off): the emptiness check looks at ax.texts.
    plots.plot_completions(ax, "Once upon a time", {
        "random transformer": "there was a dog. The dog was",
        "trained transformer": "there was a little girl named Lily."}, wrap=24)


@case(sets="y")
def draw_plot_explained_variance(ax):
    kinds = ("random transformer", "trained transformer")
    summary = pd.DataFrame({"task": ["mod add", "needle"]})
    for kind, share in zip(kinds, (0.4, 0.7)):
        summary[f"{kind}: top-k PCs"] = [share + 0.2, share]
        summary[f"{kind}: top-k neurons"] = [share / 2, share / 3]
    # three restarts per bar: dots at the median and 0.05 either side
    runs = pd.DataFrame([{"task": task, "model": kind, "pcs": pcs + d, "neurons": neurons + d}
                         for _, row in summary.iterrows() for kind in kinds
                         for task, pcs, neurons in [(row["task"], row[f"{kind}: top-k PCs"],
                                                     row[f"{kind}: top-k neurons"])]
                         for d in (-0.05, 0.0, 0.05)])
    plots.plot_explained_variance(ax, summary, kinds, k=10, runs=runs)


@case(sets="xy")
def draw_plot_imitation(ax):
    targets = [16, 32, 64]
    rows = [("random transformer", 64, t, 0.1 * i + 0.05, (0.1 * i + 0.05) / 0.6, 0.6)
            for i, t in enumerate(targets)]
    table = pd.DataFrame(rows, columns=["model", "imitator_width", "target_width", "test_kl",
                                        "kl_ratio", "baseline_kl"])
    plots.plot_imitation(ax, table)


@case(sets="xyt")
def draw_plot_per_task_curves(ax):
    # Epochs on a log axis (must be > 0); head q=3 masked, so dotted as in notebook 11.
    qs = (2, 3, 5, 7)
    steps = np.array([1, 3, 10, 30, 100, 300, 1000])
    history = pd.DataFrame({"step": steps, "train_acc": _curve(steps, 20)})
    for i, q in enumerate(qs):
        history[f"valid_acc_q{q}"] = _curve(steps, 30 * (i + 1), top=1 - 0.5 / q)
    plots.plot_per_task_curves(ax, history, qs, split="valid", title="T_miiii", masked=(3,))


@case(sets="xy")
def draw_plot_generalisation_epochs(ax):
    # NaN = a head that never generalised: drawn as a cross at the right edge (epochs).
    qs = [2, 3, 5, 7]
    tables = {"T_miiii": pd.DataFrame({"q": qs, "valid epoch": [40.0, 120.0, 300.0, np.nan]}),
              "T_masked": pd.DataFrame({"q": qs, "valid epoch": [60.0, np.nan, 500.0, 800.0]})}
    plots.plot_generalisation_epochs(ax, tables, epochs=1000)


@case(sets="xyt")
def draw_plot_positional_embeddings(ax):
    x = np.linspace(0, 2 * np.pi, 16, endpoint=False)
    w_pos = np.stack([np.sin(x), 0.8 * np.sin(x) + 0.3 * np.cos(3 * x)])
    plots.plot_positional_embeddings(ax, w_pos, "T_nanda")


@case(sets="xyt")
def draw_plot_singular_values(ax):
    values = {"T_nanda": 0.5 ** np.arange(12), "T_miiii": 0.8 ** np.arange(12)}
    plots.plot_singular_values(ax, values, squared=False, fractions=(0.5, 0.9))


@case(sets="xyt")
def draw_plot_singular_vectors(ax):
    # Orthogonal Fourier columns with distinct norms, so the singular vectors are unique up to
    # sign, which plot_singular_vectors fixes by each vector's largest-magnitude entry.  A phase
    # of 0.3 rad keeps that entry unique (at phase 0, sin is largest at two mirrored tokens, a
    # tie that rounding, not the function, would break).
    p = 13
    a = 2 * np.pi * np.arange(p) / p + 0.3
    embedding = np.stack([3 * np.cos(a), 2 * np.sin(a), np.cos(2 * a), 0.5 * np.sin(2 * a)], 1)
    plots.plot_singular_vectors(ax, embedding, n=3, title="T_miiii")


@case(sets="xyt")
def draw_plot_fourier_power(ax):
    plots.plot_fourier_power(ax, np.array([0.05, 0.6, 0.05, 0.2, 0.05, 0.05]), "T_miiii")


@case(sets="xyt")
def draw_plot_neuron_grid(ax):
    p = 7
    x1, x0 = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    plots.plot_neuron_grid(ax, np.cos(2 * np.pi * (3 * x1 + 2 * x0) / p), "neuron 4")


@case(sets="xyt")
def draw_plot_neuron_spectrum(ax):
    # The power of a single-frequency neuron, built by hand rather than by an FFT: peaks at
    # (3, 2) and its mirror (-3, -2), i.e. indices (3, 2) and (4, 5) for p = 7.
    power = np.zeros((7, 7))
    power[3, 2] = power[4, 5] = 1.0
    power[0, 0] = 0.2
    plots.plot_neuron_spectrum(ax, power, "neuron 4")


@case(sets="xy")
def draw_plot_active_frequencies(ax):
    table = pd.DataFrame({"epoch": [10, 100, 1000, 10000],
                          "active (k = 1.0)": [40, 25, 12, 8], "active (k = 2.0)": [20, 10, 6, 4],
                          "interaction share": [0.1, 0.3, 0.6, 0.8]})
    plots.plot_active_frequencies(ax, table)


@case(sets="xyt")
def draw_plot_gradient_norms(ax):
    epochs = [1, 10, 100, 1000]
    table = pd.DataFrame([{"epoch": e, "part": part, "norm": top / (1 + e / rate)}
                          for part, top, rate in (("attention", 80.0, 5.0), ("mlp", 60.0, 200.0))
                          for e in epochs])
    plots.plot_gradient_norms(ax, table, {"attention": 100, "mlp": None}, 0.1)


@case(sets="y")
def draw_plot_digit_attention(ax):
    plots.plot_digit_attention(ax, {"T_miiii": [[0.95, 0.99, 0.97, 0.93], [0.92, 0.98, 0.96, 0.99]],
                                    "T_nanda": [[0.55, 0.7, 0.62, 0.51]]}, 0.9)


@case(sets="xyt")
def draw_plot_residue_profile(ax):
    q = 7
    plots.plot_residue_profile(ax, np.cos(2 * np.pi * 2 * np.arange(q) / q), q, "neuron 4")


@case(sets="xyt")
def draw_plot_per_head_accuracy(ax):
    table = pd.DataFrame({"q": [2, 3, 5, 7], "random transformer": [0.9, 0.7, 0.4, 0.3],
                          "trained transformer": [1.0, 0.95, 0.9, 0.85]})
    plots.plot_per_head_accuracy(ax, table, tuple(table.columns[1:]), "T_miiii")


@case(sets="xy")
def draw_plot_search_history(ax):
    table = pd.DataFrame({"trial": [3, 0, 1, 2, 4], "value": [0.7, 0.5, 0.4, 0.65, 0.6]})
    plots.plot_search_history(ax, table, maximize=True, label="valid acc")


@case(sets="xy")
def draw_plot_param_effect(ax):
    table = pd.DataFrame({"lr": [1e-3, 3e-3, 1e-3, 3e-3, 1e-2],
                          "value": [0.5, 0.7, 0.55, 0.65, 0.3]})
    plots.plot_param_effect(ax, table, "lr", "valid acc")


# ---- drawing, saving, comparing -----------------------------------------------------------------

@pytest.fixture(autouse=True)
def _pinned_rcparams():
    """matplotlib's defaults, its test font settings and the project's style for each test.
    rc_context restores the caller's rcParams afterwards, so no state leaks into other tests."""
    with mpl.rc_context():
        mpl.rcdefaults()
        set_font_settings_for_testing()  # DejaVu Sans, fixed hinting: the same glyphs everywhere
        plots.style()  # what every notebook calls first, so the figures look as they do there
        yield


def new_axes() -> tuple[Figure, Axes]:
    # A bare Figure with an explicit Agg canvas, not pyplot: no global figure registry to leak
    # between tests, and the renderer does not depend on MPLBACKEND.
    fig = Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def save(fig: Figure, path: Path) -> Path:
    """As every notebook saves its figures: rt_lib.runtime.io.save_figure (bbox_inches="tight", so a
    legend or label that spills past the axes is in the file, as the reader sees it)."""
    return save_figure(fig, path, dpi=DPI)


def compare(name: str, baseline: Path, actual: Path) -> dict | None:
    """compare_images' result: None when equal within TOL, else a dict with rms and diff."""
    try:
        return compare_images(str(baseline), str(actual), tol=TOL, in_decorator=True)
    except ImageComparisonFailure as err:  # e.g. the sizes differ: still name the function
        pytest.fail(f"{name}: {err}")


def baseline_of(name: str) -> Path:
    path = BASELINES / f"{name}.png"
    if not path.exists():
        pytest.fail(f"{name} has no baseline image {path}; write it with: {REGENERATE_COMMAND}")
    return path


def assert_drawn(name: str, ax: Axes, sets: str) -> None:
    """Catch an empty figure even before the comparison: something drawn, and the labels the
    function sets are not blank."""
    assert ax.has_data() or ax.texts, f"{name} drew nothing (no lines, patches, images, texts)"
    labels = {"xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(), "title": ax.get_title()}
    for key in sets:
        label = {"x": "xlabel", "y": "ylabel", "t": "title"}[key]
        assert labels[label].strip(), f"{name} left its {label} empty"


@pytest.mark.parametrize("name", sorted(CASES))
def test_figure_matches_its_baseline(name, tmp_path):
    fig, ax = new_axes()
    CASES[name].draw(ax)
    assert_drawn(name, ax, CASES[name].sets)
    actual = save(fig, tmp_path / f"{name}.png")
    if REGENERATE:
        BASELINES.mkdir(exist_ok=True)
        shutil.copyfile(actual, BASELINES / f"{name}.png")
        pytest.skip(f"wrote baseline {BASELINES / f'{name}.png'} (RT_REGENERATE_FIGURES=1)")
    result = compare(name, baseline_of(name), actual)
    if result is not None:
        pytest.fail(f"{name} differs from its baseline: RMS {result['rms']:.2f} > tol {TOL}\n"
                    f"  expected: {result['expected']}\n  actual:   {result['actual']}\n"
                    f"  diff:     {result['diff']}\n"
                    f"If the change is intended, regenerate: {REGENERATE_COMMAND}")


def test_a_changed_figure_fails_the_comparison(tmp_path):
    # The comparison must be able to fail, and on a small change: one bar 0.01 taller (0.62 ->
    # 0.63, its printed value included) against plot_bars' baseline.
    if REGENERATE:
        pytest.skip("baselines are being rewritten")
    fig, ax = new_axes()
    plots.plot_bars(ax, **{**BARS, "values": [0.31, 0.63, 0.9]})
    result = compare("plot_bars", baseline_of("plot_bars"), save(fig, tmp_path / "plot_bars.png"))
    assert result is not None, "a changed bar went unnoticed by the comparison"
    assert result["rms"] > TOL and Path(result["diff"]).exists()
    assert Path(result["diff"]).parent == tmp_path  # the diff lands in tmp_path, not the repo


# ---- coverage: every plot function has a case and a baseline -------------------------------------

def plot_functions_in_rt_lib() -> dict[str, str]:
    """{name: module} of the public ``plot_*`` functions defined in rt_lib, by introspection.
    Modules whose source never mentions ``plot_`` are not imported: a function defined in them
    cannot be named plot_x, and importing all of rt_lib (nbformat, the runner) costs seconds."""
    root = Path(rt_lib.__file__).parent
    found = {}
    for path in sorted(root.rglob("*.py")):
        if "plot_" not in path.read_text(encoding="utf-8"):
            continue
        module_name = ".".join(("rt_lib", *path.relative_to(root).with_suffix("").parts))
        module = importlib.import_module(module_name.removesuffix(".__init__"))
        for name, obj in inspect.getmembers(module, inspect.isfunction):
            if name.startswith("plot_") and obj.__module__ == module.__name__:  # not re-exports
                found[name] = module.__name__
    return found


def test_every_plot_function_has_a_case():
    functions = plot_functions_in_rt_lib()
    assert functions, "introspection found no plot_* function in rt_lib: the search is broken"
    missing = sorted(set(functions) - set(CASES))
    assert not missing, (f"plot functions without a figure test: "
                         f"{', '.join(f'{n} ({functions[n]})' for n in missing)}; add a case to "
                         f"tests/plots/test_figures.py, then run {REGENERATE_COMMAND}")
    stale = sorted(set(CASES) - set(functions))
    assert not stale, f"cases for plot functions rt_lib no longer has: {stale}"
    orphans = sorted(p.name for p in BASELINES.glob("*.png") if p.stem not in CASES)
    assert not orphans, f"baseline images without a case (delete them): {orphans}"


# ---- the nbval sanitizer must not hide figure sizes ----------------------------------------------

SANITIZE_CFG = Path(__file__).parents[1] / "nbval_sanitize.cfg"


def sanitizer() -> configparser.ConfigParser:
    cfg = configparser.ConfigParser(interpolation=None)  # a "%" in a regex is literal
    assert cfg.read(SANITIZE_CFG), f"cannot read {SANITIZE_CFG}"
    return cfg


def test_address_rule_rewrites_addresses_but_not_figure_sizes():
    rule = sanitizer()["memory addresses"]
    def sanitize(text):
        return re.sub(rule["regex"], rule["replace"], text)
    # "1210x418" holds "0x418": rewriting it would hide a changed figure size from nbval.
    assert sanitize("<Figure size 1210x418 with 2 Axes>") == "<Figure size 1210x418 with 2 Axes>"
    assert sanitize("<object at 0x7f3a2b1c>") == "<object at 0xADDR>"


def test_all_rules_together_keep_a_figure_size():
    # nbval applies every rule of the file in turn; none of them may touch a figure's size.
    cfg = sanitizer()
    text = "<Figure size 1210x478.5 with 3 Axes>"
    for section in cfg.sections():
        text = re.sub(cfg[section]["regex"], cfg[section]["replace"], text)
    assert text == "<Figure size 1210x478.5 with 3 Axes>"


def test_active_frequencies_draw_a_control_run_dashed_in_each_lines_colour():
    import matplotlib.pyplot as plt
    table = pd.DataFrame({"epoch": [10, 100, 1000], "active (k = 1.0)": [0, 12, 6],
                          "active (k = 2.0)": [0, 5, 2]})
    control = table.assign(**{"active (k = 1.0)": [0, 11, 12], "active (k = 2.0)": [0, 4, 5]})
    fig, ax = plt.subplots()
    try:
        plots.plot_active_frequencies(ax, table, control=control)
        solid = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
        dashed = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
        assert [list(line.get_ydata()) for line in dashed] == [[0, 11, 12], [0, 4, 5]]
        assert [line.get_color() for line in dashed] == [line.get_color() for line in solid]
        assert all(line.get_label().startswith("T_basis: ") for line in dashed)
    finally:
        plt.close(fig)


def test_every_model_kind_has_its_colour():
    """A kind any notebook can be asked to train (06's variants: --set variants=[...]) is drawn."""
    from rt_lib.experiments.common import MODEL_KINDS
    assert set(MODEL_KINDS) <= set(plots.MODEL_COLORS)
    assert len(set(plots.MODEL_COLORS.values())) == len(plots.MODEL_COLORS)
