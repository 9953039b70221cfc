"""The runner's parallel schedule: notebooks overlap, but one that reads another's results waits."""

import nbformat
import pytest

from rt_lib.pipeline import plan as planning
from rt_lib.pipeline import runner
from rt_lib.runtime import seeding


def test_the_test_run_hands_out_each_notebook_after_those_it_reads():
    """The dispatch order of ./run_all.sh and of the parallel test run (conftest.py): every
    notebook ranks after the notebooks it reads (a reader's critical path is part of theirs);
    the reads are the experiments' own declarations (07 reads 01-04, 09 reads 01-05 and 08,
    12, 13 and 15 read 11)."""
    deps, order = planning.schedule(list(runner.available_notebooks()))
    rank = {n: i for i, n in enumerate(order)}
    assert deps["07_table1"] == {"01_modular_addition", "02_needle_in_a_haystack",
                                 "03_decimal_addition", "04_parentheses"}
    assert deps["09_subspace"] == {"01_modular_addition", "02_needle_in_a_haystack",
                                   "03_decimal_addition", "04_parentheses", "05_memorisation",
                                   "08_tinystories"}
    assert {n for n, d in deps.items() if "11_miiii_training" in d} == {
        "12_miiii_embeddings", "13_miiii_neurons", "15_random_miiii"}
    for name, reads in deps.items():
        assert all(rank[r] < rank[name] for r in reads), name
    assert sorted(order) == sorted(runner.available_notebooks())
    # from the cold wall times the committed notebooks record (a re-record over a warm run store
    # keeps them): 11 and its reader 13 are the longest chain (docs/measurements.md), and go
    # first, not last as when 11 recorded the 11 s of a warm re-record
    assert order[0] == "11_miiii_training"


def _notebook(path, code):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)
    return path


def _stamp(name, stamps, wait_for=None, fail=False):
    """Cell code that records when it started (``<name>.started``, written first) and ended;
    with ``wait_for``, it ends only once that notebook has started (a timeout error after 5
    minutes: it never ran alongside)."""
    started = f"pathlib.Path({str(stamps / (name + '.started'))!r}).write_text(str(t0))\n"
    wait = "" if wait_for is None else (
        f"while not pathlib.Path({str(stamps / (wait_for + '.started'))!r}).exists():\n"
        f"    assert time.time() < t0 + 300, '{wait_for} never ran beside {name}'\n"
        "    time.sleep(0.05)\n")
    return ("import time, pathlib\nt0 = time.time()\n" + started + wait
            + ("raise RuntimeError('boom')\n" if fail else "")
            + f"pathlib.Path({str(stamps / name)!r}).write_text(f'{{t0}} {{time.time()}}')\n")


@pytest.fixture
def three_jobs(tmp_path, monkeypatch):
    """a and c each end only once the other has started, so they finish only if the runner runs
    them at the same time (however slowly either kernel starts); b reads a's results."""
    stamps = tmp_path / "stamps"
    stamps.mkdir()

    def make(fail_a=False):
        jobs = []
        for name, wait_for in (("a", "c"), ("b", None), ("c", "a")):
            nb = _notebook(tmp_path / f"{name}.ipynb",
                           _stamp(name, stamps, wait_for, fail=fail_a and name == "a"))
            jobs.append(runner.Job(name, nb, {}, tmp_path / "results" / name))
        return jobs, {j.name: j.output_dir / f"{j.name}.ipynb" for j in jobs}

    monkeypatch.setattr(planning, "needs", lambda: {"b": frozenset({"a"})})
    return make, stamps


def _times(stamps, name):
    start, end = map(float, (stamps / name).read_text().split())
    return start, end


def test_parallel_run_respects_what_a_notebook_reads(three_jobs):
    make, stamps = three_jobs
    jobs, outputs = make()
    out = runner.run_jobs(jobs, outputs, n_jobs=2)
    assert out.failed == [] and sorted(n for n, _ in out.done) == ["a", "b", "c"]
    assert all(path.exists() for path in outputs.values())
    a, b, c = (_times(stamps, n) for n in "abc")
    assert b[0] >= a[1]  # b started after a finished
    assert a[0] < c[1] and c[0] < a[1]  # a and c overlapped: two at a time


def test_a_failed_notebook_is_kept_and_its_readers_skipped(three_jobs):
    make, stamps = three_jobs
    jobs, outputs = make(fail_a=True)
    out = runner.run_jobs(jobs, outputs, n_jobs=2)
    assert sorted(out.failed) == ["a", "b"] and [n for n, _ in out.done] == ["c"]
    kept = jobs[0].output_dir / "a.failed.ipynb"
    assert "boom" in kept.read_text() and not outputs["a"].exists()
    assert not (stamps / "b").exists()


def test_bad_jobs_count_is_rejected(capsys):
    assert runner.main(["--jobs", "0", "--only", "07"]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err


def test_default_jobs_divides_cores_by_threads(monkeypatch):
    monkeypatch.setattr(seeding.os, "sched_getaffinity", lambda _: set(range(2)), raising=False)
    monkeypatch.setenv("RT_THREADS", "1")
    assert runner.default_jobs() == 2
    monkeypatch.setenv("RT_THREADS", "2")
    assert runner.default_jobs() == 1
    monkeypatch.setattr(seeding.os, "sched_getaffinity", lambda _: set(range(64)), raising=False)
    monkeypatch.setenv("RT_THREADS", "1")
    assert runner.default_jobs() == 4


class _Node:
    """A stand-in for an xdist worker: records what it is sent, runs it when asked."""

    def __init__(self, name):
        self.gateway = type("Gateway", (), {"id": name})()
        self.shutting_down = False
        self.queue: list[int] = []

    def send_runtest_some(self, indices):
        self.queue.extend(indices)

    def shutdown(self):
        self.shutting_down = True


def _scheduler(collection: list[str]):
    """conftest's NotebookScheduling, made as xdist makes it for ./run_tests.sh, with two
    workers that both collected ``collection``, scheduled: (the scheduler, its two nodes)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("root_conftest", Path(runner.__file__).parents[2] / "conftest.py")
    root = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root)
    option = type("Option", (), {"loadscopereorder": False})()  # run_tests.sh: --no-loadscope-reorder
    config = type("Config", (), {"getvalue": lambda self, key: ["2*popen"], "option": option})()
    sched = root.pytest_xdist_make_scheduler(config, None)
    nodes = [_Node("gw0"), _Node("gw1")]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        sched.add_node_collection(node, collection)
    sched.schedule()
    return sched, nodes


def test_the_test_scheduler_starts_a_reader_only_after_what_it_reads_and_uses_both_workers():
    """conftest's NotebookScheduling driven by hand, as xdist would: two workers, every notebook
    of the project and two test modules; a step runs one item per busy worker.  The notebooks
    that others read get far more cells than the rest, so their readers come up for a free
    worker while they still run."""
    books = list(runner.available_notebooks())
    deps, order = planning.schedule(books)
    read = set().union(*deps.values())
    cells = {b: 300 if b in read else 3 for b in books}
    collection = [f"notebooks/{b}.ipynb::Cell {c}" for b in order for c in range(cells[b])]
    collection += ["tests/test_a.py::test_1", "tests/test_b.py::test_1"]
    sched, nodes = _scheduler(collection)
    started, finished, users = {}, set(), set()
    for tick in range(10_000):
        busy = [n for n in nodes if n.queue]
        if not busy:
            break
        for node in busy:
            nodeid = collection[node.queue.pop(0)]
            book = nodeid.split("::")[0].removeprefix("notebooks/").removesuffix(".ipynb")
            started.setdefault(book, tick)
            users.add(node.gateway.id)
            assert all(d in finished for d in deps.get(book, ())), (book, "started early")
            sched.mark_test_complete(node, collection.index(nodeid))
            if nodeid.endswith(f"Cell {cells.get(book, 0) - 1}"):
                finished.add(book)
    assert finished == set(books) and sched.tests_finished
    assert users == {"gw0", "gw1"}


def test_a_selection_of_a_notebook_and_its_readers_alone_runs_to_the_end():
    """A real xdist worker runs a test only once it holds the next one (or is shut down): with
    notebook 11 and its readers selected and nothing else (./run_tests.sh notebooks/1[1-5]*),
    11's last cell must not wait for a reader that waits for it.  Driven by hand with that rule."""
    deps, order = planning.schedule(list(runner.available_notebooks()))
    books = [b for b in order if b == "11_miiii_training" or "11_miiii_training" in deps.get(b, ())]
    assert len(books) >= 3  # 11 and at least two of its readers
    collection = [f"notebooks/{b}.ipynb::Cell {c}" for b in books for c in range(4)]
    sched, nodes = _scheduler(collection)
    finished, ran = set(), []
    for _ in range(1_000):
        runnable = [n for n in nodes if len(n.queue) >= 2 or (n.queue and n.shutting_down)]
        if not runnable:
            break
        for node in runnable:
            nodeid = collection[node.queue.pop(0)]
            book = nodeid.split("::")[0].removeprefix("notebooks/").removesuffix(".ipynb")
            assert all(d in finished for d in deps.get(book, ()) if d in books), (book, "started early")
            ran.append(nodeid)
            sched.mark_test_complete(node, collection.index(nodeid))
            if nodeid.endswith("Cell 3"):
                finished.add(book)
    assert sorted(ran) == sorted(collection), f"stalled after {len(ran)} of {len(collection)}"
    assert sched.tests_finished


def test_a_notebook_is_recorded_with_the_commit_it_started_on(three_jobs, tmp_path, monkeypatch, capsys):
    """A commit made while a notebook runs (its kernel imported the code before it) does not
    become its record's commit: the manifest names the one it started on, and the run says so."""
    from rt_lib.pipeline import schedule
    from rt_lib.runtime.manifest import Manifest

    make, _ = three_jobs
    jobs, outputs = make()
    heads = iter(["a" * 40, "b" * 40 + "+dirty"] + ["b" * 40] * 10)  # HEAD moves once b starts
    monkeypatch.setattr(schedule, "head_commit", lambda: next(heads))
    manifest = Manifest(tmp_path / "results")
    out = runner.run_jobs(jobs[1:2], outputs, n_jobs=1, manifest=manifest, profile="cpu")  # b waits for none
    assert [n for n, _ in out.done] == ["b"] and not out.failed
    assert manifest.entries["b"].commit == "a" * 40
    assert "the code changed while it ran (started on aaaaaaaaaaaa, now bbbbbbbbbbbb)" in capsys.readouterr().out
