"""docs/papers.md is where the papers' settings are written down, and what the code cites.

Over the project's code, configs, tests, benchmarks and scripts, the ledger included: every
citation of docs/papers.md, written as
``(docs/papers.md, <paper>: <section>)`` (the format is described at the top of that file), names
a ``##`` heading and one of its ``###`` headings that exist there.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAPERS = ROOT / "docs" / "papers.md"
SCANNED = ("rt_lib", "configs", "tests", "benchmarks", "scripts")
SUFFIXES = {".py", ".yaml", ".yml", ".sh", ".cfg", ".toml", ".md", ".j2"}
#: not scanned: the tests that parse citations (they name the form, not a section)
SKIPPED = {Path(__file__).resolve(), ROOT / "tests" / "test_notebook_intros.py"}
#: the headings citations rely on: (paper, section), lower case
REQUIRED = {
    ("random transformers", "model"), ("random transformers", "tasks"),
    ("random transformers", "training"),
    ("random transformers", "the authors' code beyond the text"),
    ("miiii", "model and task"), ("miiii", "training"),
    ("miiii", "the authors' code beyond the text"),
}

CITED_FILE = "docs/papers.md"
# what follows "docs/papers.md" in a citation: ", <paper>: <section>", then ) ; , . or the line's end
CITATION = re.compile(r", ([A-Za-z][A-Za-z ]*?): ([A-Za-z][A-Za-z' ]*?)\s*(?=[);,.]|$)")


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def scanned_files() -> list[Path]:
    files = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*")):
            if (path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts
                    and path.resolve() not in SKIPPED):
                files.append(path)
    return files


def headings() -> set[tuple[str, str]]:
    """(paper, section) of every ``###`` heading of docs/papers.md, paper being its ``##``
    heading without a trailing parenthesis, both normalised to lower case."""
    found, paper = set(), None
    for line in PAPERS.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            paper = _norm(re.sub(r"\s*\([^)]*\)\s*$", "", line[3:]))
        elif line.startswith("### ") and paper is not None:
            found.add((paper, _norm(line[4:])))
    return found


def citations() -> list[tuple[str, str | None]]:
    """(file:line, "paper: section" or None where the text after docs/papers.md is not a
    well-formed citation) for every mention of docs/papers.md in the scanned files."""
    out = []
    for path in scanned_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for hit in re.finditer(re.escape(CITED_FILE), line):
                where = f"{path.relative_to(ROOT)}:{number}"
                m = CITATION.match(line, hit.end())
                out.append((where, f"{_norm(m[1])}: {_norm(m[2])}" if m else None))
    return out


def test_docs_papers_has_the_headings_citations_use():
    missing = REQUIRED - headings()
    assert not missing, f"docs/papers.md lacks the headings {sorted(missing)}"


def test_every_docs_papers_citation_names_an_existing_section():
    found = citations()
    assert len(found) > 40  # the code cites it throughout; far fewer means the scan broke
    known = {f"{paper}: {section}" for paper, section in headings()}
    bad = [f"{where}: {cited or 'not of the form (docs/papers.md, <paper>: <section>)'}"
           for where, cited in found if cited not in known]
    assert not bad, ("citations of docs/papers.md that name no heading of it (known: "
                     + "; ".join(sorted(known)) + "):\n" + "\n".join(bad))
