"""What a run reports at its end: the claims' counts, a smoke test's step footprints, the site;
and ``--list``, the runs under the results roots."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from rt_lib.claims import ledger as claims
from rt_lib.pipeline.plan import CHUNK_COMMAND, available_notebooks, chunks, profile_notebooks
from rt_lib.pipeline.registry import profile_step_shapes, runs
from rt_lib.runtime.context import DEFAULT_PROFILE, available_profiles, default_results_root
from rt_lib.runtime.io import DamagedFileError, shown
from rt_lib.runtime.seeding import default_jobs
from rt_lib.site.evidence import kept_runs


def report_claims(folders: dict[str, Path]) -> None:
    """The closing summary: the four counts (holds, fails, not shown, not checked) over the
    papers' claims recorded by the runs given, ours apart, and a line per claim not holding."""
    try:
        got = claims.summary(folders)
    except DamagedFileError as err:  # the results stand; the summary cannot be made
        print(f"run_all.sh: warning: no claims summary: {err}", file=sys.stderr, flush=True)
        return
    n_papers, n_ours = sum(got.papers.values()), sum(got.ours.values())
    if not n_papers + n_ours:
        return
    print(f"claims of the papers ({n_papers} recorded, {len(claims.ledger())} in the ledger): "
          f"{claims.counts_line(got.papers, got.papers_why)}")
    print(f"  holding, per paper (only a claim measured on the paper's task holds at its scale): "
          f"{got.holds_line()}")
    if n_ours:
        print(f"claims of our own ({n_ours}, counted apart): {claims.counts_line(got.ours, got.ours_why)}")
    if got.lines:
        print("not holding (a claim not shown names the scale expected to show it; one not "
              "checked says why):")
    for line in got.lines:
        print(f"  {line}")


def report_footprints(profile: str, names: list[str], root: Path) -> None:
    """After a smoke test: peak memory and FLOPs of one step at ``profile``'s own batch, per
    training step of each notebook (:mod:`rt_lib.training.footprint`), printed and kept in
    ``<root>/footprint.csv``."""
    from rt_lib.training.footprint import GIB, profile_footprints

    print(f"one training step at the {profile} profile's batch (rt_lib.training.footprint: the peak "
          "resident memory of a process taking it, 'estimated' where the step was run on the "
          "meta device at that batch and taken here at a smaller one):", flush=True)
    start = time.perf_counter()
    # Steps cheaper than 5e10 FLOPs are taken whole here, dearer ones estimated: a minute or two
    # (benchmarks/paper_plan.py measures more of them whole, for the planning table in docs/profiles.md).
    table = profile_footprints(profile_step_shapes(profile, names), max_flops=5e10,
                               jobs=default_jobs())
    if table.empty:
        return
    table.to_csv(root / "footprint.csv", index=False)
    for row in table.itertuples():
        print(f"  {row.notebook:<24} {row.step:<44} batch {row.batch:>6}  peak "
              f"{row.peak_GiB:7.2f} GiB {row.peak:<9}  {row.GFLOP_per_step:11,.1f} GFLOP/step")
    print(f"  ({time.perf_counter() - start:.0f} s; {root / 'footprint.csv'}; "
          f"largest {table.peak_GiB.max():.1f} GiB against {_memory_bytes() / GIB:.0f} GiB here)")


def _memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def list_runs(profile: str | None = None) -> int:
    """--list: notebooks, profiles, and every run folder under the results roots; returns how
    many runs have a damaged record (each listed with the file and the notebook to rerun).  With
    a ``profile`` that comes in chunks (the GPU profile), its chunks first, each one job of
    scripts/gpu_run.sh."""
    from rt_lib.runtime.fingerprint import status_line

    print("notebooks:", ", ".join(available_notebooks()))
    print(status_line())
    print("profiles: ", ", ".join(available_profiles()))
    pieces = chunks(profile) if profile else []
    problems: list[str] = []
    kept = [r for r in kept_runs(problems=problems) if r.profile == profile] if pieces else []
    for i, chunk in enumerate(pieces, 1):
        if i == 1:
            print(f"the {profile} profile in chunks, in order "
                  f"({CHUNK_COMMAND.get(profile, 'one job each')}), each with its latest kept evidence:")
        have = [r.folder.name for r in kept if set(chunk.notebooks) <= set(r.claims)]
        print(f"  {i}. {','.join(n[:2] for n in chunk.notebooks):<8} ~{chunk.minutes:g} min  "
              f"{', '.join(chunk.notebooks)}  [{'kept: ' + have[-1] if have else 'no evidence yet'}]")
    if pieces:
        inside = {n for chunk in pieces for n in chunk.notebooks}
        left = [n for n in profile_notebooks(profile) if n not in inside]
        if left:
            print(f"  in no chunk: {', '.join(left)} (configs/{profile}_chunks.yaml says why)")
    for problem in problems:
        print(f"  warning: {problem}", file=sys.stderr)
    base = default_results_root()
    n_damaged = 0
    for profile in available_profiles():
        root = base if profile == DEFAULT_PROFILE else base / profile
        found = runs(root) if root.is_dir() else []
        print(f"runs of the {profile} profile ({root}): {len(found) or 'none'}")
        for run in found:
            kind = "exploration" if run["exploration"] else "profile"
            if run["damaged"]:
                n_damaged += 1
                print(f"  {run['folder']:<44} {kind}, DAMAGED: {run['damaged']}")
                continue
            claim = f", claims held {run['claims']}" if run["claims"] else ""
            if run["failed"]:  # what it recorded before failing is not the run's outcome
                print(f"  {run['folder']:<44} {kind}, FAILED (its last run: {run['failed']})"
                      f"{claim.replace('claims held', 'claims recorded before it failed held')}")
                continue
            print(f"  {run['folder']:<44} {kind}{claim}")
    return n_damaged


def build_site_of(root: Path, profile: str, executed: dict[str, Path],
                  picture: bool = False) -> None:
    """The profile's site (:mod:`rt_lib.site.pages`) over every notebook of it under ``root``,
    those just run included; a site that cannot be built is reported, the run's results stand.
    ``picture``: also redraw the README's picture of its claims table (docs/site_claims.png)."""
    from rt_lib.site import pages as site

    start = time.perf_counter()
    try:
        index = site.build_site(root, profile, list(available_notebooks()), executed)
    except Exception as err:  # noqa: BLE001 - any renderer error: the results are still there
        print(f"run_all.sh: warning: the site was not built ({type(err).__name__}: {err})",
              file=sys.stderr, flush=True)
        return
    size = sum(p.stat().st_size for p in index.parent.rglob("*") if p.is_file())  # MathJax too
    print(f"site: {index} ({len(list(index.parent.glob('*.html'))) - 1} notebooks, "
          f"{size / 2**20:.1f} MiB, built in {time.perf_counter() - start:.0f} s; open it in "
          "any browser, nothing is fetched)", flush=True)
    if not picture:
        return
    if site.chromium() is None:
        print(f"{shown(site.PICTURE)} not redrawn: no Chromium (scripts/setup_browser.sh installs "
              "it, as root; or set RT_CHROMIUM)", flush=True)
        return
    try:
        site.picture(index, site.PICTURE)
    except Exception as err:  # noqa: BLE001 - a picture that fails leaves the old one
        print(f"run_all.sh: warning: {shown(site.PICTURE)} not redrawn "
              f"({type(err).__name__}: {err})", file=sys.stderr, flush=True)
        return
    print(f"{shown(site.PICTURE)}: the README's picture of the claims table, redrawn", flush=True)
