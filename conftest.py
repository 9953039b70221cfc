"""Test-run wiring: parallel workers, and the fault-case summary line.

Parallel runs (``./run_tests.sh``: pytest-xdist, ``--dist loadgroup``):

The cells of a notebook must run in order on one worker (nbval keeps one kernel per notebook),
and notebooks that read each other's results (``rt_lib.runner.needs``) must share a worker, in
name order, like ``./run_all.sh`` runs them.  Each such chain becomes one xdist group, and the
chains come first, longest first, so the two long ones start at once; unit tests fill in.
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    books = [item for item in items if item.path.suffix == ".ipynb"]
    if not books:
        return
    from rt_lib.runner import chains

    rank = {}
    for i, chain in enumerate(chains(sorted({item.path.stem for item in books}))):
        for name in chain:
            rank[name] = (i, chain[0])
    for item in books:
        item.add_marker(pytest.mark.xdist_group(f"notebooks-{rank[item.path.stem][1]}"))
    # Stable sort: chains in rank order (cells keep their order), then everything else.
    items.sort(key=lambda item: rank[item.path.stem][0] if item.path.suffix == ".ipynb"
               else len(rank))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fault: a fault case (bad input, interruption, damaged "
                                       "file); counted in the summary line")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """One line: how many fault cases ran and passed (issue 7's report)."""
    counts = {}
    for category in ("passed", "failed", "error", "skipped"):
        reports = [r for r in terminalreporter.stats.get(category, [])
                   if "fault" in getattr(r, "keywords", {})]
        counts[category] = len({r.nodeid for r in reports})
    ran = counts["passed"] + counts["failed"] + counts["error"]
    if ran or counts["skipped"]:
        terminalreporter.write_line(
            f"fault cases: {ran} ran, {counts['passed']} passed, {counts['failed']} failed, "
            f"{counts['error']} errors, {counts['skipped']} skipped")
