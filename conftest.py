"""Test-run wiring: parallel workers, and the fault-case summary line.

Parallel runs (``./run_tests.sh``: pytest-xdist with the scheduler below):

The cells of a notebook must run in order on one worker (nbval keeps one kernel per notebook),
and notebooks that read each other's results (``rt_lib.runner.needs``) must share a worker, in
name order, like ``./run_all.sh`` runs them.  Each such chain is one unit of work, and the
chains come first, longest first, so the two long ones start at once; unit tests fill in.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def _chain_of() -> dict[str, tuple[int, str]]:
    """{notebook: (rank of its chain, the chain's first notebook)}, longest chain first."""
    from rt_lib.runner import available_notebooks, chains

    return {name: (i, chain[0]) for i, chain in enumerate(chains(list(available_notebooks())))
            for name in chain}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Notebook chains first, longest first (cells keep their order: a stable sort), then the
    unit tests: the order in which xdist hands out the work."""
    if not any(item.path.suffix == ".ipynb" for item in items):
        return
    rank = _chain_of()
    items.sort(key=lambda item: rank[item.path.stem][0] if item.path.suffix == ".ipynb"
               else len(rank))


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Hand out a whole notebook chain to one worker, and a test module to one worker."""
    from xdist.scheduler import LoadScopeScheduling

    rank = _chain_of()

    class ChainScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            # nbval's ids reach the controller as "notebooks/01_x::ipynb::Cell 0"
            first = nodeid.split("::", 1)[0]
            stem = Path(first).name.removesuffix(".ipynb")
            if stem in rank:
                return f"notebooks from {rank[stem][1]}"
            return first  # a test module: its module-scoped fixtures are built once

    return ChainScheduling(config, log)


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
