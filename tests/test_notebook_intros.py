"""Every notebook opens with the claim: a short first markdown cell, and a last markdown cell for
what the first one no longer carries (a pointer to how the scale was chosen, tables); at most 900
words of prose in all.

Reads the committed .ipynb files as JSON only: no kernel, no rt_lib import."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
MAX_WORDS = 250
MAX_PROSE_WORDS = 900  # a notebook holds the argument; how its scale was chosen is in docs/scale.md
# a hash-like token: 7-40 hex digits with at least one letter and one digit
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
# a wall time in prose: "12 s", "3.5 min", "40 minutes", "2 hours"
WALL_TIME = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:s|secs?|seconds?|mins?|minutes?|h|hours?)\b")
# the sections of docs/papers.md that a parameters cell may cite
SECTIONS = {"random transformers": {"model", "tasks", "training", "the authors' code beyond the text"},
            "miiii": {"model and task", "training", "the authors' code beyond the text"}}
CITATION = re.compile(r"\(docs/papers\.md, ([^:()]+): ([^()]+)\)")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(cell: dict) -> str:
    return "".join(cell["source"])


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 15


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_first_cell_states_the_claim_briefly(path):
    first = _cells(path)[0]
    assert first["cell_type"] == "markdown", "the first cell must be the markdown introduction"
    text = _text(first)
    words = len(re.findall(r"\S+", text))
    assert words <= MAX_WORDS, f"{path.name}: the first cell has {words} words (at most {MAX_WORDS})"
    hashes = [h for h in HEX.findall(text) if re.search(r"[a-f]", h) and re.search(r"\d", h)]
    assert not hashes, f"{path.name}: a commit hash in the first cell: {hashes}"
    times = [m.group(0) for m in WALL_TIME.finditer(text)]
    assert not times, f"{path.name}: a wall time in the first cell: {times}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_prose_stays_short(path):
    words = [len(re.findall(r"\S+", _text(c))) for c in _cells(path) if c["cell_type"] == "markdown"]
    assert sum(words) <= MAX_PROSE_WORDS, (f"{path.name}: {sum(words)} words of prose (at most "
                                           f"{MAX_PROSE_WORDS}); per markdown cell: {words}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_last_cell_is_markdown(path):
    last = _cells(path)[-1]
    assert last["cell_type"] == "markdown", f"{path.name}: the last cell must be markdown"
    assert _text(last).startswith("## "), f"{path.name}: the last cell should open with a '## ' heading"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_parameters_cell_cites_docs_papers(path):
    cells = [c for c in _cells(path) if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, f"{path.name}: one cell tagged parameters"
    text = _text(cells[0])
    for paper, section in CITATION.findall(text):
        assert section in SECTIONS.get(paper, set()), f"{path.name}: no section '{paper}: {section}'"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_imports_sit_in_the_first_code_cell_after_the_parameters(path):
    """A reader sees what a notebook uses at its top: no import further down."""
    code = [_text(c) for c in _cells(path) if c["cell_type"] == "code"]
    imports = re.compile(r"^\s*(?:from\s+\S+\s+import|import)\s", re.M)
    late = [i for i, text in enumerate(code) if i > 1 and imports.search(text)]
    assert imports.search(code[1]), "the code cell after the parameters holds the imports"
    assert not late, f"imports in code cells {late} (0 = parameters): move them to cell 1"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_cell_has_an_id_of_its_own(path):
    """nbformat 4.5 cells carry ids (a cell without one is a warning now, an error to come)."""
    ids = [c.get("id") for c in _cells(path)]
    assert None not in ids, f"cells {[i for i, x in enumerate(ids) if x is None]} have no id"
    assert len(set(ids)) == len(ids)
