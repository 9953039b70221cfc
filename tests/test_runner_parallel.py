"""The runner's parallel schedule: notebooks overlap, but one that reads another's results waits."""

import nbformat
import pytest

from rt_lib import runner


def test_chains_join_notebooks_that_read_each_other():
    names = list(runner.available_notebooks())
    chains = runner.chains(names)
    as_sets = sorted(sorted(c) for c in chains)
    # Written out by hand from what each notebook reads: 07 reads 01-04's restarts, 09 reads the
    # checkpoints of 01, 02, 05, 08, and 12, 13, 15 read 11's runs.
    expected = sorted(sorted(c) for c in [
        ["01_modular_addition", "02_needle_in_a_haystack", "03_decimal_addition",
         "04_parentheses", "05_memorisation", "07_table1", "08_tinystories", "09_subspace"],
        ["11_miiii_training", "12_miiii_embeddings", "13_miiii_neurons", "15_random_miiii"],
        ["06_embedding_ablations"], ["10_circuit_imitation"], ["14_miiii_search"]])
    assert as_sets == expected
    for chain in chains:  # each chain in an order that runs what is read first
        for i, name in enumerate(chain):
            assert runner.needs().get(name, frozenset()) & set(chain) <= set(chain[:i])
    cost = [sum(runner.recorded_seconds(runner.available_notebooks()[n]) for n in c)
            for c in chains]
    assert cost == sorted(cost, reverse=True)


def _notebook(path, code):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)
    return path


def _stamp(name, seconds, stamps, fail=False):
    return (f"import time, pathlib\nt0 = time.time()\ntime.sleep({seconds})\n"
            + ("raise RuntimeError('boom')\n" if fail else "")
            + f"pathlib.Path({str(stamps / name)!r}).write_text(f'{{t0}} {{time.time()}}')\n")


@pytest.fixture
def three_jobs(tmp_path, monkeypatch):
    """a (slow) and c run at once; b reads a's results."""
    stamps = tmp_path / "stamps"
    stamps.mkdir()

    def make(fail_a=False):
        jobs = []
        for name, seconds in (("a", 3), ("b", 0), ("c", 0)):
            nb = _notebook(tmp_path / f"{name}.ipynb",
                           _stamp(name, seconds, stamps, fail=fail_a and name == "a"))
            jobs.append(runner.Job(name, nb, {}, tmp_path / "results" / name))
        return jobs, {j.name: j.output_dir / f"{j.name}.ipynb" for j in jobs}

    monkeypatch.setattr(runner, "needs", lambda: {"b": frozenset({"a"})})
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
    assert c[0] < a[1]  # c did not wait for a: two at a time


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
    monkeypatch.setattr(runner.os, "sched_getaffinity", lambda _: set(range(2)), raising=False)
    monkeypatch.setenv("RT_THREADS", "1")
    assert runner.default_jobs() == 2
    monkeypatch.setenv("RT_THREADS", "2")
    assert runner.default_jobs() == 1
    monkeypatch.setattr(runner.os, "sched_getaffinity", lambda _: set(range(64)), raising=False)
    monkeypatch.setenv("RT_THREADS", "1")
    assert runner.default_jobs() == 4
