"""The companion site (rt_lib.site.pages), the kernel-free explorers (rt_lib.plots.static_explorers) and the runner's
progress line.  The site in a real browser: tests/site/test_browser.py."""

from __future__ import annotations

import io
import json
import re

import nbformat
import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from rt_lib.analysis.activations import pca
from rt_lib.pipeline import progress, runner
from rt_lib.plots.static_explorers import Control, FrameExplorer, frame_explorer, pc_frames
from rt_lib.site.pages import MATHJAX, MATHJAX_SCRIPT, SITE, build_site, claims_table, mathjax_files


def _png(value: int) -> bytes:
    return f"png-{value}".encode()


def test_a_frame_explorer_embeds_one_frame_per_combination_and_shows_the_default():
    controls = [Control("a", ("x", "y"), slider=False), Control("b", ("1", "2", "3"), default=2)]
    frames = {(i, j): _png(10 * i + j) for i in range(2) for j in range(3)}
    markup = FrameExplorer("t", controls, frames)._repr_html_()
    data = json.loads(re.search(r'class="rt-frames">(.*?)</script>', markup, re.S).group(1))
    assert len(data["frames"]) == 6 and data["options"] == [["x", "y"], ["1", "2", "3"]]
    import base64

    assert base64.b64decode(data["frames"]["1,2"]) == _png(12)
    shown = re.search(r'data-rt-key="([^"]+)"', markup).group(1)
    assert shown == "0,2"  # the defaults: first model, third value
    assert markup.count("<select") == 1 and markup.count('type="range"') == 1


def test_a_frame_explorer_refuses_missing_combinations():
    controls = [Control("a", ("x", "y"))]
    with pytest.raises(ValueError, match="every combination"):
        FrameExplorer("t", controls, {(0,): _png(0)})


def test_each_view_of_the_pc_picker_is_drawn_from_its_own_pair():
    theta = torch.arange(23) * 2 * np.pi * 3 / 23
    emb = torch.randn(23, 12, generator=torch.Generator().manual_seed(0)) * 0.05
    emb[:, 0] += torch.cos(theta)
    emb[:, 1] += torch.sin(theta)
    explorer = pc_frames({"m": pca(emb)}, n_pcs=3)
    assert [c.options for c in explorer.controls][1] == ("PC1 / PC2", "PC1 / PC3", "PC2 / PC3")
    assert len(set(explorer.frames.values())) == 3  # three pairs, three different pictures
    assert explorer.default_key == "0,1"  # PCs 1 and 3 first, the paper's figure


def test_frame_explorer_calls_draw_with_every_index_combination():
    seen = []

    def draw(i, j):
        seen.append((i, j))
        fig = Figure(figsize=(1, 1))
        fig.subplots().plot([0, i], [0, j])
        return fig

    explorer = frame_explorer("t", [Control("i", ("0", "1")), Control("j", ("0", "1"))], draw)
    assert sorted(seen) == [(0, 0), (0, 1), (1, 0), (1, 1)] and len(explorer.frames) == 4


def _notebook(title: str, png: bytes | None = None) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("print('hi')")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi\n")]
    if png is not None:
        import base64

        code.outputs.append(nbformat.v4.new_output(
            "display_data", data={"image/png": base64.b64encode(png).decode(),
                                  "text/plain": "<Figure>"}))
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {title}\n\ntext"), code]
    return nb


def _claims(rows):
    return pd.DataFrame([row + [""] * (8 - len(row)) for row in rows],
                        columns=["id", "source", "paper", "measured", "status", "scale", "own",
                                 "reason"])


@pytest.fixture
def run_root(tmp_path):
    """A profile's results root: two runs with claims, one exploration run, a manifest."""
    for name, title in (("01_a", "01 · first"), ("02_b", "02 · second"),
                        ("01_a+p=5", "01 · explored")):
        folder = tmp_path / name
        folder.mkdir()
        nbformat.write(_notebook(title), folder / f"{name.split('+')[0]}.ipynb")
    _claims([["c-ours", "ours", "a circle somewhere", "0.98", "holds", "", True],
             ["c-holds", "Zhong & Andreas 2024, §4.1, Table 1", "solves it", "1.000", "holds", "",
              False],
             ["c-unshown", "Zhong & Andreas 2024, §4.1, Fig. 3", "a circle", "0.35", "not shown",
              "width 1024", False, "noise"]]).to_csv(tmp_path / "01_a" / "claims.csv", index=False)
    _claims([["c-fails", "Syrkis & Søgaard 2024, §4", "groks", "no", "fails", "", False],
             ["c-unchecked", "Syrkis & Søgaard 2024, §4", "samples", "", "not checked",
              "qualitative", False]]).to_csv(tmp_path / "02_b" / "claims.csv", index=False)
    manifest = {"format": 1, "notebooks": {"01_a": {"wall_seconds": 754.0, "commit": "abc1234def0",
                                                    "finished": "2026-11-25T10:00:00Z"}}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def test_the_claims_table_has_one_row_per_recorded_claim_with_its_status(run_root):
    table = claims_table(run_root, ["01_a", "02_b"])
    # the papers' claims first, ours after them
    assert list(table["claim"]) == ["c-holds", "c-unshown", "c-fails", "c-unchecked", "c-ours"]
    assert list(table["status"]) == ["holds", "not shown", "fails", "not checked", "holds"]
    assert list(table["paper"]) == (["Zhong & Andreas 2024"] * 2 + ["Syrkis & Søgaard 2024"] * 2
                                    + ["ours"])
    assert table.loc[1, "section"] == "§4.1, Fig. 3" and table.loc[1, "scale or why"] == "width 1024"
    assert list(table["why not shown"]) == ["", "noise", "", "", ""]


def test_the_index_counts_the_four_statuses_for_the_papers_and_ours_apart(run_root):
    text = build_site(run_root, "cpu", ["01_a", "02_b"]).read_text()
    assert "1 holds, 1 fails, 1 not shown (1 noise), 1 not checked" in text  # the papers' four
    assert "Claims of our own, counted apart (1): 1 holds, 0 fails" in text


def test_the_site_renders_the_profiles_own_runs_and_links_them_from_the_index(run_root):
    index = build_site(run_root, "cpu", ["01_a", "02_b", "03_c"])
    site = run_root / SITE
    assert sorted(p.name for p in site.glob("*.html")) == ["01_a.html", "02_b.html", "index.html"]
    text = index.read_text()
    assert text.count('class="rt-claim"') == 5
    assert 'href="01_a.html"' in text and 'href="02_b.html"' in text
    assert "12.6 min" in text and "abc1234def" in text  # the manifest's wall time and commit
    page = (site / "01_a.html").read_text()
    assert "01 · first" in page and 'href="index.html"' in page and "explored" not in page


def test_site_pages_fetch_nothing(run_root):
    build_site(run_root, "cpu", ["01_a", "02_b"])
    site = run_root / SITE
    for page in site.glob("*.html"):
        text = page.read_text()
        remote = re.findall(r'<(?:script|link|img|iframe)[^>]+(?:src|href)="(https?:)?//[^"]*"',
                            text)
        assert not remote, (page.name, remote)
        assert "cdnjs" not in text and "unpkg" not in text and "MathJax.js" not in text
        # the one script loaded by a path: MathJax's copy in the site's folder
        for src in re.findall(r'<script[^>]+src="([^"]*)"', text):
            assert src == MATHJAX_SCRIPT and (site / src).is_file(), (page.name, src)


def test_mathjax_is_copied_once_per_site_and_every_page_loads_it_relatively(run_root):
    build_site(run_root, "cpu", ["01_a", "02_b"])
    site = run_root / SITE
    files = mathjax_files()
    copied = sorted(p.relative_to(site / MATHJAX).as_posix()
                    for p in (site / MATHJAX).rglob("*") if p.is_file())
    assert copied == sorted(files) and "tex-chtml-full.js" in copied and "LICENSE" in copied
    assert [p.name for p in site.rglob("tex-chtml-full.js")] == ["tex-chtml-full.js"]  # once
    assert 1 << 20 < sum((site / MATHJAX / f).stat().st_size for f in copied) < 3 << 20
    for page in sorted(site.glob("*.html")):
        text = page.read_text()
        assert text.count(f'src="{MATHJAX_SCRIPT}"') == 1, page.name
        assert 'inlineMath: [["$", "$"]' in text and 'displayMath: [["$$", "$$"]' in text
    # a rebuild leaves the copy alone and takes out what is not MathJax's
    stamp = {f: (site / MATHJAX / f).stat().st_mtime_ns for f in copied}
    (site / MATHJAX / "stale.js").write_text("")
    build_site(run_root, "cpu", ["01_a", "02_b"])
    assert {f: (site / MATHJAX / f).stat().st_mtime_ns for f in copied} == stamp
    assert not (site / MATHJAX / "stale.js").exists()


def test_a_rebuilt_site_drops_the_page_of_a_run_no_longer_there(run_root):
    build_site(run_root, "cpu", ["01_a", "02_b"])
    (run_root / "02_b" / "02_b.ipynb").unlink()
    build_site(run_root, "cpu", ["01_a", "02_b"])
    assert not (run_root / SITE / "02_b.html").exists()


def test_clock_and_progress_line():
    assert progress.clock(59.4) == "0:59" and progress.clock(3725) == "1:02:05"
    line = progress.progress_line({"01_a": (100.0, 200.0), "02_b": (250.0, None)}, 3, 15, 300.0)
    assert line == ("    [3/15 done] 01_a 3:20 of ~3:20 (100%) | "
                    "02_b 0:50 (no earlier run to compare)")
    late = progress.progress_line({"11_c": (0.0, 8.0)}, 0, 1, 360.0)
    assert late == "    [0/1 done] 11_c 6:00, past the 0:08 of its last run"


def test_the_ticker_prints_lines_into_a_log_and_redraws_on_a_terminal():
    log = io.StringIO()
    ticker = progress.Ticker(log)
    assert ticker.interval == 60.0
    ticker.show("a")
    ticker.show("b")
    ticker.clear()
    assert log.getvalue() == "a\nb\n"

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    term = Terminal()
    ticker = progress.Ticker(term)
    assert ticker.interval == 1.0
    ticker.show("a")
    ticker.clear()
    assert term.getvalue() == "\r\033[Ka\r\033[K"


def test_the_expected_time_is_the_last_recorded_run(tmp_path):
    book = tmp_path / "01_a.ipynb"
    book.write_text(json.dumps({"cells": [], "metadata": {"papermill": {"duration": 42.5}}}))
    job = runner.Job("01_a", book, {}, tmp_path / "results" / "01_a")
    assert progress.expected_seconds(job, None, "cpu") == 42.5
    assert progress.expected_seconds(job, None, "paper") is None  # another profile's times
