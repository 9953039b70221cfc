"""The companion site: a profile's run as pages a reader opens without a kernel.

``./run_all.sh`` ends by building ``<profile root>/site/`` (``results/site/`` for the CPU
profile, ``results/paper/site/`` for the paper's, ``results/paper-smoke/site/`` for its smoke
run): every notebook of the profile's own run rendered as HTML (outputs, figures, tables; the
code behind a switch) and ``index.html`` with the claims overview (one row per claim every
notebook recorded: paper, section, the paper's value, ours, whether it holds, the scale that
would show it) and a link to each notebook with its wall time, profile and commit.  Each run
kept as evidence (:mod:`rt_lib.site.evidence`, ``evidence/<profile>/<date>-<device>/``, e.g. the paper
profile on an H100) adds a column beside the profile's own status: the claim's status in that
run, so that a claim reads across: this profile, the kept runs, the paper's value.

Rendering is nbconvert's (its lab template, :data:`TEMPLATE`, with every fetch from a CDN left
out), the index included: it is built as a notebook of markdown and tables and rendered alike.
Formulas (``$...$`` inline, ``$$...$$`` displayed, as in Jupyter) are typeset by MathJax 3, the
copy that the pinned ``django-static-mathjax`` ships, copied once into ``site/_static/mathjax/``
(:func:`copy_mathjax`: its TeX-to-CommonHTML build, its fonts, its licence) and loaded by a path
relative to the page.  Nothing is fetched at build or view time; a page needs only its folder.
The kernel-free explorers (:mod:`rt_lib.plots.static_explorers`) are plain outputs of their notebooks, so they
come along.  Exploration runs (folders with changes in their names) are not part of a profile's
site.
"""

from __future__ import annotations

import filecmp
import html
import importlib.util
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pandas as pd

from rt_lib.claims import ledger as claims
from rt_lib.runtime.io import PROJECT_ROOT, atomic_path, atomic_write_text, shown
from rt_lib.runtime.manifest import FILENAME as MANIFEST
from rt_lib.site.evidence import EVIDENCE_DIR, KeptRun, kept_runs, oldest_first

SITE = "site"  # <profile root>/site/
TEMPLATE_DIR = Path(__file__).parent / "template"
TEMPLATE = "rt_site"  # nbconvert's lab template, nothing fetched (template/rt_site)
COLOURS = {"holds": "#166534", "fails": "#b91c1c", "not shown": "#92400e",
           "not checked": "#475569"}  # status -> its colour in the claims table
NOT_RECORDED = "—"  # a kept run's cell for a claim that run did not record
MATHJAX = "_static/mathjax"  # the site's copy of MathJax, relative to the site folder
#: MathJax's script, relative to a page of the site (every page lies in the site folder)
MATHJAX_SCRIPT = f"{MATHJAX}/tex-chtml-full.js"
MATHJAX_PACKAGE = "django-static-mathjax"  # requirements.txt: MathJax 3.2.2's browser build
MATHJAX_FONTS = "output/chtml/fonts/woff-v2"  # CommonHTML's fonts, beside the script


@dataclass(frozen=True)
class Page:
    """One rendered notebook of the run."""

    name: str  # e.g. "01_modular_addition"
    title: str  # its first heading
    file: str  # the page, relative to the site folder
    wall_seconds: float | None  # from the manifest; None when the run left no entry
    commit: str
    finished: str


def _exporter(code: bool = True):
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name=TEMPLATE, extra_template_basedirs=[str(TEMPLATE_DIR)])
    exporter.embed_images = True
    exporter.exclude_input = not code  # the index has outputs only
    exporter.exclude_input_prompt = exporter.exclude_output_prompt = not code
    return exporter


def title_of(nb: nbformat.NotebookNode, default: str) -> str:
    """The text of the notebook's first markdown heading."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return default


def render(nb: nbformat.NotebookNode, out: Path, nav: dict | None = None,
           code: bool = True, mathjax: str | None = None) -> None:
    """``nb`` as one self-contained HTML page at ``out`` (images inline); ``code=False`` leaves
    the code cells' inputs out; ``mathjax``: MathJax's script relative to ``out``
    (:func:`copy_mathjax`), which typesets the formulas (without it they show as TeX)."""
    resources = {"metadata": {"name": out.stem}}
    if nav is not None:
        resources["rt_nav"] = nav
    if mathjax is not None:
        resources["rt_mathjax"] = mathjax
    body, _ = _exporter(code).from_notebook_node(nb, resources=resources)
    atomic_write_text(out, body)


def mathjax_files() -> dict[str, Path]:
    """{path in the site's copy, relative to :data:`MATHJAX`: the installed file}: MathJax's
    TeX input with CommonHTML output in one script (every TeX extension in it: no further
    loads), CommonHTML's fonts and MathJax's licence, from :data:`MATHJAX_PACKAGE`."""
    spec = importlib.util.find_spec("mathjax")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    source = Path(folders[0]) / "static" / "mathjax" if folders else None
    if source is None or not (source / "es5" / "tex-chtml-full.js").is_file():
        raise FileNotFoundError(f"MathJax for the site's formulas is not installed: "
                                f"{MATHJAX_PACKAGE} (requirements.txt; scripts/setup.sh "
                                "installs it)")
    files = {"LICENSE": source / "LICENSE",
             "tex-chtml-full.js": source / "es5" / "tex-chtml-full.js"}
    for font in sorted((source / "es5" / MATHJAX_FONTS).glob("*.woff")):
        files[f"{MATHJAX_FONTS}/{font.name}"] = font
    return files


def copy_mathjax(site: Path) -> str:
    """MathJax's files (:func:`mathjax_files`) into ``site/_static/mathjax/``, once per site: a
    file already there with the same bytes is left alone, any other file in that folder is
    removed.  Returns the script's path relative to the site's pages (:data:`MATHJAX_SCRIPT`)."""
    folder = Path(site) / MATHJAX
    files = mathjax_files()
    for name, source in files.items():
        target = folder / name
        if not (target.is_file() and filecmp.cmp(source, target, shallow=False)):
            with atomic_path(target) as tmp:
                shutil.copyfile(source, tmp)
    for stale in folder.rglob("*"):
        if stale.is_file() and stale.relative_to(folder).as_posix() not in files:
            stale.unlink()
    return MATHJAX_SCRIPT


def _manifest_entries(root: Path) -> dict:
    try:
        return json.loads((root / MANIFEST).read_text())["notebooks"]
    except (OSError, ValueError, KeyError):
        return {}


def own_runs(root: Path, names: list[str],
             executed: Mapping[str, Path] | None = None) -> dict[str, Path]:
    """{notebook: its executed copy} for each of ``names`` that the profile's own run (folder =
    name) left under ``root``; ``executed`` names copies written elsewhere (``--update-notebooks``
    writes them to notebooks/)."""
    found = {}
    for name in names:
        path = (executed or {}).get(name) or Path(root) / name / f"{name}.ipynb"
        if Path(path).is_file():
            found[name] = Path(path)
    return found


def claims_table(root: Path, names: list[str]) -> pd.DataFrame:
    """One row per claim recorded by the runs of ``names`` under ``root``: the papers' claims
    first (in notebook order), then ours."""
    rows = []
    for name in names:
        table = claims.read(root / name)
        if table is None:
            continue
        for row in table.itertuples():
            paper, _, section = str(row.source).partition(", ")
            rows.append({"notebook": name, "claim": row.id,
                         "paper": "ours" if row.own else paper, "section": section,
                         "paper's value": row.paper, "measured": row.measured,
                         "status": row.status, "why not shown": row.reason,
                         # the paper's task, or a reduced one: never the paper's scale
                         "task": (f"reduced: {row.reduction}" if row.task_size == "reduced"
                                  else row.task_size),
                         "scale or why": row.scale})
    columns = ["notebook", "claim", "paper", "section", "paper's value", "measured", "status",
               "why not shown", "task", "scale or why"]
    table = pd.DataFrame(rows, columns=columns)
    return table.sort_values("paper", key=lambda p: p == "ours", kind="stable",
                             ignore_index=True)


#: a column's companions in :func:`with_evidence`: the kept job each of its statuses came from,
#: and the task that job measured it on
JOB = " · job"
TASK = " · task"


def with_evidence(table: pd.DataFrame, runs: list[KeptRun]) -> pd.DataFrame:
    """``table`` (:func:`claims_table`) with a column per rung of kept evidence (profile and
    device, :func:`columns_of`) right after ``status``: the claim's status in the latest job of
    that rung that recorded it, :data:`NOT_RECORDED` where none did; beside each, its companions
    (``<column>`` + :data:`JOB`, + :data:`TASK`) name that job's folder and the task it measured
    the claim on (:meth:`KeptRun.task`).  Claims only a kept run recorded get
    no row: the rows are this profile's (the index says how many were left out)."""
    out = table.copy()
    at = list(out.columns).index("status") + 1
    for label, jobs in columns_of(runs).items():
        statuses, sources, tasks = [], [], []
        for notebook, claim in zip(out["notebook"], out["claim"]):
            found = next(((job.status(notebook, claim), job) for job in reversed(jobs)
                          if job.status(notebook, claim) is not None), None)
            statuses.append(found[0] if found else NOT_RECORDED)
            sources.append(found[1].folder.name if found else "")
            tasks.append(found[1].task(notebook, claim) if found else "")
        out.insert(at, label, statuses)
        out.insert(at + 1, label + JOB, sources)
        out.insert(at + 2, label + TASK, tasks)
        at += 3
    return out


def columns_of(runs: list[KeptRun]) -> dict[str, list[KeptRun]]:
    """{column header: its kept jobs, oldest first}: one column per rung (``gpu · H100``)."""
    out: dict[str, list[KeptRun]] = {}
    for run in oldest_first(runs):
        out.setdefault(run.rung, []).append(run)
    return out


def _run_note(run: KeptRun) -> str:
    """What a kept run is, in one line (its column header's tooltip)."""
    p = run.provenance
    return (f"{run.device_name}; torch {p.get('torch', '?')}; commit {run.commit}; "
            f"{p.get('command', '?')}")


def _minutes(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


#: the claims table's columns behind each row's click (``<details>``), in this order
DETAILS = ("paper's value", "measured", "why not shown", "scale or why")


def _status_cell(status: str, reason: str = "", title: str = "", task: str = "") -> str:
    """A status as a cell coloured by :data:`COLOURS` (white text on it), with its reason and,
    small below it, the task it was measured on (``paper``, or the reduction)."""
    text = html.escape(status + (f": {reason}" if reason else ""))
    if status in COLOURS:
        text = f'<b style="color:#ffffff">{text}</b>'
        style = f' style="background:{COLOURS[status]}"'
    else:
        style = ""
    if task:
        shade = "#ffffff" if status in COLOURS else "inherit"
        text += (f'<br><small class="rt-task" style="color:{shade}">'
                 f'{html.escape("paper task" if task == "paper" else task)}</small>')
    tip = f' title="{html.escape(title)}"' if title else ""
    return f'<td class="rt-status"{style}{tip}>{text}</td>'


def _short_task(task: str) -> str:
    """A cell's task line: ``paper``, or the reduction of the claim's own task (for a notebook
    of several tasks, the part of the run's reduction that names it is not picked out here:
    the whole of it, which the details hold too, is too long for a cell)."""
    if task.startswith("reduced: "):
        reduction = task.removeprefix("reduced: ")
        return "reduced: " + (reduction if len(reduction) <= 40 else reduction[:37] + "...")
    return task if task in ("paper", "reduced") else ""


def _claims_html(table: pd.DataFrame, pages: dict[str, Page],
                 kept: Mapping[str, str] | None = None, profile: str = "") -> str:
    """The claims table at a glance: one short row per claim (its notebook, id and the paper's
    section), a coloured status cell for this profile's run and one per kept run (``kept``:
    {column of a kept run: its tooltip}, :func:`with_evidence`), and the paper's value, the
    measured text with its margin, why it is not shown and the scale behind a click."""
    kept = dict(kept or {})
    runs = [c for c in table.columns if c in kept]
    head = ["<th>notebook</th>", "<th>claim</th>", "<th>paper</th>",
            f"<th>status · {html.escape(profile)}</th>" if profile else "<th>status</th>"]
    head += [f'<th class="rt-kept" title="{html.escape(kept[c])}">{html.escape(c)}</th>'
             for c in runs]
    head.append("<th>details</th>")
    body = []
    for row in table.to_dict("records"):
        notebook = html.escape(str(row["notebook"]))
        if row["notebook"] in pages:
            notebook = f'<a href="{pages[row["notebook"]].file}">{notebook}</a>'
        paper = " ".join(str(row[c]) for c in ("paper", "section") if row.get(c))
        cells = [f"<td>{notebook}</td>", f"<td><code>{html.escape(str(row['claim']))}</code></td>",
                 f"<td>{html.escape(paper)}</td>",
                 _status_cell(str(row["status"]), str(row.get("why not shown") or ""),
                              str(row.get("scale or why") or ""),
                              _short_task(str(row.get("task") or "")))]
        cells += [_status_cell(str(row[c]), title=f"job {row[c + JOB]}: {kept[c]}"
                               if row.get(c + JOB) else kept[c],
                               task=_short_task(str(row.get(c + TASK) or ""))) for c in runs]
        details = "".join(f"<dt>{html.escape(c)}</dt><dd>{html.escape(str(row[c]))}</dd>"
                          for c in DETAILS if str(row.get(c) or ""))
        cells.append(f"<td><details><summary>measured</summary><dl>{details}</dl></details></td>"
                     if details else "<td></td>")
        body.append(f'<tr class="rt-claim">{"".join(cells)}</tr>')
    return (f'<table class="rt-claims"><thead><tr>{"".join(head)}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _kept_html(runs: list[KeptRun], table: pd.DataFrame, problems: list[str]) -> str:
    """The kept runs' provenance, one row each, and what could not be read."""
    shown_claims = set(zip(table["notebook"], table["claim"]))
    rows = ['<table class="rt-kept-runs"><thead><tr><th>column</th><th>device</th>'
            "<th>torch</th><th>python</th><th>commit</th><th>finished</th><th>wall time</th>"
            "<th>command</th><th>claims</th><th>folder</th></tr></thead><tbody>"]
    for label, run in ((label, run) for label, jobs in columns_of(runs).items() for run in jobs):
        p = run.provenance
        recorded = {(nb, c) for nb, t in run.claims.items() for c in t["id"]}
        left_out = len(recorded - shown_claims)
        claims_cell = f"{len(recorded)}" + (f" ({left_out} not in this table: notebooks "
                                            "this profile did not run)" if left_out else "")
        cells = [label, run.device_name, str(p.get("torch", "?")), str(p.get("python", "?")),
                 run.commit, str(p.get("date", "?")),
                 _minutes(p.get("wall_seconds")), str(p.get("command", "?")), claims_cell,
                 shown(run.folder)]
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    rows.append("</tbody></table>")
    rows += [f'<p class="rt-kept-problem"><b>Left out:</b> {html.escape(p)}</p>'
             for p in problems]
    return "".join(rows)


def index_notebook(profile: str, pages: list[Page], table: pd.DataFrame,
                   runs: list[KeptRun] | None = None,
                   problems: list[str] | None = None) -> nbformat.NotebookNode:
    """The index as a notebook (markdown and HTML tables), rendered like every page; ``runs``:
    the kept evidence runs, a column each in the claims table and a table of their own
    (``problems``: kept runs left out, each with its error)."""
    runs, problems = list(runs or []), list(problems or [])
    own = table["paper"] == "ours"
    why = table["status"] == "not shown"
    papers = claims.counts_line(Counter(table.loc[~own, "status"]),
                                Counter(table.loc[~own & why, "why not shown"]))
    ours = claims.counts_line(Counter(table.loc[own, "status"]),
                              Counter(table.loc[own & why, "why not shown"]))
    holding = table["status"] == "holds"
    at_scale = []
    for key, name in (("Zhong & Andreas", "random transformers"), ("Syrkis & Søgaard", "miiii")):
        mine = ~own & holding & table["paper"].str.startswith(key)
        at_scale.append(f"{name}: {int((mine & (table['task'] == 'paper')).sum())} at the "
                        f"paper's scale, {int((mine & table['task'].str.startswith('reduced')).sum())}"
                        " on a reduced task")
    total = sum(p.wall_seconds or 0.0 for p in pages)
    intro = (f"# rt-companion: the {profile} profile\n\n"
             "Companion to Zhong & Andreas (2024), *Algorithmic Capabilities of Random "
             "Transformers*, and Syrkis & Søgaard (2024), *Mechanistic Interpretability on "
             "Irreducible Integer Identifiers*.\n\n"
             f"{len(pages)} notebooks"
             + (f", {_minutes(total)} of notebook wall time in all" if total else "") + ". "
             f"The papers' claims ({int((~own).sum())} recorded): {papers}; holding, "
             f"{'; '.join(at_scale)} (a claim holds at the paper's scale only on the paper's "
             "task: its p, digits, pairs, keys and data). "
             f"Claims of our own, counted apart ({int(own.sum())}): {ours}. "
             "A claim not shown says why (runs: fewer than 3 usable a side; budget: cut "
             "short; contrary: the measurement went against the paper at this scale; noise: "
             "inside the runs' spread) and which scale is expected to show it; one not checked "
             f"says why. Built {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.")
    listing = ['<table class="rt-pages"><thead><tr><th>notebook</th><th>title</th>'
               "<th>wall time</th><th>profile</th><th>commit</th><th>finished</th></tr></thead>"
               "<tbody>"]
    for p in pages:
        listing.append(f'<tr><td><a href="{p.file}">{html.escape(p.name)}</a></td>'
                       f"<td>{html.escape(p.title)}</td><td>{_minutes(p.wall_seconds)}</td>"
                       f"<td>{html.escape(profile)}</td><td>{html.escape(p.commit[:10])}</td>"
                       f"<td>{html.escape(p.finished)}</td></tr>")
    listing.append("</tbody></table>")

    def html_cell(markup: str) -> nbformat.NotebookNode:
        cell = nbformat.v4.new_code_cell("")
        cell.outputs = [nbformat.v4.new_output("display_data", data={"text/html": markup})]
        return cell

    nb = nbformat.v4.new_notebook()
    kept = {label: f"{len(jobs)} kept job(s), the latest {jobs[-1].folder.name}: "
                   f"{_run_note(jobs[-1])}" for label, jobs in columns_of(runs).items()}
    glance = "## Claims at a glance"
    if runs:
        glance += (f"\n\nThe status column is this ({profile}) profile's run; each column after "
                   "it, a profile and device of the runs kept as evidence (`evidence/`, "
                   "described below): the claim's status in the latest kept job that recorded "
                   f"it (the job's folder in the cell's tooltip), {NOT_RECORDED} where none did.")
    nb.cells = [nbformat.v4.new_markdown_cell(intro),
                nbformat.v4.new_markdown_cell(glance),
                html_cell(_claims_html(with_evidence(table, runs), {p.name: p for p in pages},
                                       kept, profile)),
                nbformat.v4.new_markdown_cell("## Notebooks"),
                html_cell("".join(listing))]
    if runs or problems:
        nb.cells += [nbformat.v4.new_markdown_cell(
                         "## Kept evidence runs\n\nFinished runs kept in the repository "
                         "(`python -m rt_lib.site.evidence keep`): where and how each ran."),
                     html_cell(_kept_html(runs, table, problems))]
    return nb


def evidence_links(notebook: str, runs: list[KeptRun], site: Path) -> list[dict[str, str]]:
    """The kept evidence of ``notebook`` on every rung, oldest first, for its page's header:
    {label, href (its kept notebook, relative to ``site``), counts (its claims' statuses as
    kept, stale ones said so)}."""
    links = []
    for run in oldest_first(runs):
        if notebook not in run.claims:
            continue
        kept = run.folder / notebook / f"{notebook}.ipynb"
        statuses = Counter(run.status(notebook, c) or NOT_RECORDED for c in run.claims[notebook]["id"])
        links.append({"label": run.label,
                      "href": Path(os.path.relpath(kept, site)).as_posix(),
                      "counts": ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))})
    return links


def build_site(root: Path, profile: str, names: list[str],
               executed: Mapping[str, Path] | None = None,
               evidence: Path | None = None) -> Path:
    """Render the profile's own runs of ``names`` (:func:`own_runs`) and the index into
    ``root/site/`` (``root``: the profile's results root), with MathJax for their formulas in
    ``site/_static/mathjax/`` (:func:`copy_mathjax`); returns the index's path.  Pages of
    notebooks that are no longer there are removed.  The runs kept under ``evidence`` (default
    ``evidence/``; none when it does not exist) are columns of the claims table; one that does
    not read is left out and named on the index."""
    root = Path(root)
    site = root / SITE
    site.mkdir(parents=True, exist_ok=True)
    mathjax = copy_mathjax(site)
    entries = _manifest_entries(root)
    problems: list[str] = []
    runs = kept_runs(EVIDENCE_DIR if evidence is None else evidence, problems)
    pages = []
    for name, path in own_runs(root, names, executed).items():
        nb = nbformat.read(path, as_version=4)
        entry = entries.get(name, {})
        page = Page(name, title_of(nb, name), f"{name}.html", entry.get("wall_seconds"),
                    entry.get("commit", "?"), entry.get("finished", "?"))
        run = f"{profile} profile, {_minutes(page.wall_seconds)}, commit {page.commit[:10]}"
        render(nb, site / page.file, {"index": "index.html", "run": run,
                                      "evidence": evidence_links(name, runs, site)},
               mathjax=mathjax)
        pages.append(page)
    for stale in site.glob("*.html"):
        if stale.name != "index.html" and stale.stem not in {p.name for p in pages}:
            stale.unlink()
    index = site / "index.html"
    render(index_notebook(profile, pages, claims_table(root, [p.name for p in pages]), runs,
                          problems), index, code=False, mathjax=mathjax)
    return index


# ---- the README's picture of the site ----------------------------------------------------------

PICTURE = PROJECT_ROOT / "docs" / "site_claims.png"  # redrawn by every full CPU-profile run
# The flags this sandbox needs (root, no GPU, a closed network): as tests/site/test_browser.py.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> Path | None:
    """The Chromium to draw with: ``$RT_CHROMIUM``, else ``chromium`` on the PATH (Debian's
    package, as scripts/setup_browser.sh installs it); None when there is none."""
    found = os.environ.get("RT_CHROMIUM") or shutil.which("chromium")
    path = Path(found) if found else None
    return path if path is not None and path.is_file() and os.access(path, os.X_OK) else None


def picture(index: Path, png: Path, width: int = 1400, height: int = 1000,
            colors: int = 64) -> Path:
    """The site's first screen (``index``: its index.html) as headless Chromium draws it in a
    ``width`` x ``height`` window: the title, the claims' counts and the first rows of the claims
    table.  Into ``png`` (atomically) with a palette of ``colors`` (0: full colour; the picture
    lives in git, and a palette keeps it a third of the size with the text sharp)."""
    from PIL import Image  # matplotlib's dependency
    from playwright.sync_api import sync_playwright

    browser_path = chromium()
    if browser_path is None:
        raise FileNotFoundError("no Chromium: set RT_CHROMIUM, or put chromium on the PATH "
                                "(scripts/setup_browser.sh installs it, as root)")
    png.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(png) as tmp:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(browser_path), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(Path(index).resolve().as_uri())
            page.screenshot(path=str(tmp), type="png")  # the window: what a reader sees first
            browser.close()
        if colors:
            with Image.open(tmp) as shot:
                # octree keeps the statuses' few coloured pixels (median cut greys them)
                small = shot.convert("RGB").quantize(colors=colors,
                                                     method=Image.Quantize.FASTOCTREE)
            small.save(tmp, format="PNG", optimize=True)
    return png
