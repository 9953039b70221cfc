"""Test-run wiring: parallel workers, and the fault-case summary line.

Parallel runs (``./run_tests.sh``: pytest-xdist with the scheduler below):

The cells of a notebook must run in order on one worker (nbval keeps one kernel per notebook),
so each notebook is one unit of work.  A notebook that reads others' results
(``rt_lib.pipeline.plan.needs``) is handed out only once they have finished, on whichever worker is
free, as ``./run_all.sh`` runs them: the notebooks 07 and 09 read no longer tie 01-05 and 08 to
one worker.  Notebooks go first, longest critical path first (their recorded times plus those
of the notebooks that read them); unit tests fill in.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

#: What a test marked ``long`` takes on one worker, for its place in the hand-out order (the
#: paper-profile smoke run beside a notebook: docs/measurements.md has its time).
LONG_TEST_SECONDS = 900.0


@cache
def _plan() -> tuple[dict[str, frozenset[str]], dict[str, int], int]:
    """({notebook: the notebooks it reads}, {notebook: its rank}, the rank of a ``long`` test):
    notebooks as ./run_all.sh orders them (longest critical path first); a long test goes after
    the notebooks whose critical path is longer than it, so that nothing long is handed out last
    (a long test handed out after every notebook ran alone at the end of the run)."""
    from rt_lib.pipeline.plan import available_notebooks, recorded_seconds, schedule

    books = available_notebooks()
    deps, order = schedule(list(books))
    seconds = {n: recorded_seconds(books[n]) for n in order}

    @cache
    def critical(name: str) -> float:
        return seconds[name] + max((critical(m) for m in order if name in deps[m]), default=0.0)

    long_rank = sum(critical(n) > LONG_TEST_SECONDS for n in order)
    return deps, {n: i for i, n in enumerate(order)}, long_rank


def _notebook_of(nodeid: str) -> str | None:
    # nbval's ids reach the controller as "notebooks/01_x.ipynb::Cell 0"
    first = nodeid.split("::", 1)[0]
    return Path(first).name.removesuffix(".ipynb") if first.endswith(".ipynb") else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Notebooks by rank (cells keep their order: a stable sort), the unit-test modules that
    hold a test marked ``long`` (the smoke run) among them by its expected time, then the other
    unit tests: the order in which the scheduler hands out the work (longest first, so that the
    two workers end together)."""
    if not any(item.path.suffix == ".ipynb" for item in items):
        return
    _, rank, long_rank = _plan()
    long_modules = {item.path for item in items if item.get_closest_marker("long")}

    def key(item: pytest.Item) -> tuple[float, int]:
        if item.path.suffix == ".ipynb":
            return rank.get(item.path.stem, len(rank)), 1
        if item.path in long_modules:
            return long_rank, 0  # before the notebook of the same rank: it is the longer
        return len(rank), 2

    items.sort(key=key)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """A notebook or a test module to one worker; a notebook only after those it reads."""
    from xdist.scheduler import LoadScopeScheduling

    deps, _, _ = _plan()

    class NotebookScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            book = _notebook_of(nodeid)
            return f"notebook {book}" if book else nodeid.split("::", 1)[0]

        def _finished(self, scope: str) -> bool:
            if scope in self.workqueue:
                return False
            units = [w[scope] for w in self.assigned_work.values() if scope in w]
            return all(all(unit.values()) for unit in units)  # not collected: nothing to wait for

        def _queued_on(self, scope: str, node) -> bool:
            """Whether every cell of ``scope`` not yet run is queued on ``node`` (a worker runs
            its queue in order: what it is sent next runs after them)."""
            return scope not in self.workqueue and all(
                n is node or all(unit.values())
                for n, w in self.assigned_work.items() if (unit := w.get(scope)) is not None)

        def _ready(self, scope: str, node=None) -> bool:
            """Whether ``scope`` may start: every notebook it reads has finished, or (given a
            ``node``) has its cells left queued on that node, ahead of it."""
            book = scope.removeprefix("notebook ") if scope.startswith("notebook ") else None
            return book is None or all(
                self._finished(f"notebook {d}") or (node is not None and self._queued_on(f"notebook {d}", node))
                for d in deps.get(book, ()))

        def _assign_work_unit(self, node) -> None:
            # A worker runs a test only once it holds the next one (or is shut down): with nothing
            # else ready, a reader of the notebook this worker is running goes behind it on the
            # same worker, else that notebook's last cell, and every reader with it, would wait
            # for ever (only notebooks and their readers selected: ./run_tests.sh notebooks/11_*)
            scope = (next((s for s in self.workqueue if self._ready(s)), None)
                     or next((s for s in self.workqueue if self._ready(s, node)), None))
            if scope is None:
                return  # every unit left waits for a notebook running on another worker
            work_unit = self.workqueue.pop(scope)
            self.assigned_work.setdefault(node, {})[scope] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some([collection.index(nodeid)
                                    for nodeid, done in work_unit.items() if not done])

        def _reschedule(self, node) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work.get(node, {})) > 2:
                return
            self._assign_work_unit(node)

        def mark_test_complete(self, node, item_index: int, duration: float = 0) -> None:
            super().mark_test_complete(node, item_index, duration)
            for other in self.nodes:  # a finished notebook may free a reader for an idle worker
                if other is not node:
                    self._reschedule(other)

    return NotebookScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    # nbval: bit for bit where this machine's numeric platform matches the recording's, else the
    # portable comparison (rt_lib/claims/portable.py); RT_PLATFORM=strict|portable forces one
    from rt_lib.claims.portable import install

    config.rt_comparison_line = install(config)
    if getattr(config.option, "nbval", False):  # a kernel that lost its port starts again
        import nbval.kernel

        from rt_lib.pipeline.kernel import retrying

        if not getattr(nbval.kernel.start_new_kernel, "__wrapped_by_rt__", False):
            nbval.kernel.start_new_kernel = retrying(nbval.kernel.start_new_kernel)
            nbval.kernel.start_new_kernel.__wrapped_by_rt__ = True
    config.addinivalue_line("markers", "fault: a fault case (bad input, interruption, damaged "
                                       "file); counted in the summary line")
    config.addinivalue_line("markers", "long: a test of minutes (an end-to-end run): its module "
                                       "is handed out before the other unit tests")


def pytest_report_header(config: pytest.Config) -> str | None:
    return getattr(config, "rt_comparison_line", "") or None


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """One line: how many fault cases ran and passed; which way the notebooks were compared."""
    if getattr(config, "rt_comparison_line", ""):
        terminalreporter.write_line(config.rt_comparison_line)
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
