"""Fault tests (marked ``fault``; the run ends with a count of them): interrupted runs,
damaged files, and the manifest that decides what ``./run_all.sh`` reruns."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import torch

from rt_lib.model import TransformerConfig, build_model
from rt_lib.pipeline import runner
from rt_lib.runtime.io import NOTEBOOKS, CorruptFileError, atomic_save_torch, load_torch
from rt_lib.runtime.manifest import Manifest, output_files
from rt_lib.tasks import modular_addition
from rt_lib.training.train import TrainConfig, train

pytestmark = pytest.mark.fault
PROJECT = Path(runner.__file__).resolve().parents[2]

# A "long training" notebook at a tiny profile: checkpoints, resumes, writes a table and a figure.
# For the interruption test its grad hook (a) appends "<first step> <steps>", the optimiser steps
# this process ran, to <results root>/steps_run.txt, and (b) at step HOLD_AT, whose checkpoint is
# on disk by then, while <results root>/hold exists, writes <results root>/reached and waits: a
# signal sent then lands mid-run for sure.  These files lie outside results/01_train/ (the files
# the manifest records and the tests compare): a run without a hold file writes the same results.
STEPS, CHECKPOINT_EVERY, HOLD_AT = 3000, 100, 1000
HOLD_LIMIT_S = 600  # a hold file never removed fails the notebook rather than hanging it
assert 0 < HOLD_AT < STEPS and HOLD_AT % CHECKPOINT_EVERY == 0  # held just after a checkpoint
TRAIN_PARAMS = f"steps = {STEPS}\nseed = 0\n"
TRAIN_CODE = (f"CHECKPOINT_EVERY, HOLD_AT, HOLD_LIMIT_S = {CHECKPOINT_EVERY}, {HOLD_AT}, "
              f"{HOLD_LIMIT_S}\n") + """\
import time
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from rt_lib.runtime.io import atomic_write_text, results_dir, results_root, save_csv, save_figure
from rt_lib.model import TransformerConfig, build_model
from rt_lib.tasks import modular_addition
from rt_lib.training.train import TrainConfig, train

out = results_dir("01_train")
task = modular_addition(11, train_fraction=0.8, split_seed=0)
model = build_model(TransformerConfig(d_vocab=11, n_ctx=2, d_model=16, n_heads=2), seed)
cfg = TrainConfig(steps=steps, batch_size=16, lr=1e-3, weight_decay=1e-3, warmup_steps=10,
                  eval_every=100, seed=seed,
                  checkpoint_path=str(out / "last.pt"), checkpoint_every=CHECKPOINT_EVERY,
                  resume=True, progress=False, threads=1)
root, ran = results_root(), []


def hook(model, step):  # reads and changes nothing: the same numbers as without it
    ran.append(step)
    if step == HOLD_AT and (root / "hold").exists():
        atomic_write_text(root / "reached", str(step))
        deadline = time.monotonic() + HOLD_LIMIT_S
        while (root / "hold").exists():
            if time.monotonic() > deadline:
                raise TimeoutError("the hold file was never removed")
            time.sleep(0.05)


result = train(model, task, cfg, grad_hook=hook)
with open(root / "steps_run.txt", "a") as f:
    f.write(f"{ran[0] if ran else None} {len(ran)}\\n")
save_csv(result.history.drop(columns="time_s"), out / "metrics.csv")
fig, ax = plt.subplots()
ax.plot(result.history["step"], result.history["test_acc"])
save_figure(fig, out / "curve.png")
"""
QUICK_CODE = """\
from rt_lib.runtime.io import results_dir, atomic_write_text
atomic_write_text(results_dir("02_quick") / "done.txt", "done")
"""


def _write_notebook(path: Path, params: str | None, code: str) -> None:
    cells = []
    if params is not None:
        cells.append(nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}))
    cells.append(nbformat.v4.new_code_cell(code))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


def _make_books(folder: Path) -> Path:
    folder.mkdir()
    _write_notebook(folder / "01_train.ipynb", TRAIN_PARAMS, TRAIN_CODE)
    _write_notebook(folder / "02_quick.ipynb", None, QUICK_CODE)
    return folder


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    """The two notebooks; tests that edit them make their own."""
    return _make_books(tmp_path_factory.mktemp("books") / "notebooks")


@pytest.fixture(scope="module")
def reference(books, tmp_path_factory):
    """Results of one uninterrupted run."""
    results = tmp_path_factory.mktemp("reference") / "results"
    done = _run_all(books, results)
    assert done.returncode == 0, done.stderr
    return results


def _env(books: Path, results: Path) -> dict:
    return {**os.environ, "RT_NOTEBOOKS": str(books), "RT_RESULTS": str(results),
            "TQDM_DISABLE": "1", "RT_THREADS": "1"}


def _run_all(books: Path, results: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rt_lib.pipeline.runner", "--jobs", "2", *args],
                          env=_env(books, results), capture_output=True, text=True, timeout=600,
                          cwd=PROJECT)


def _descendants(pid: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {c for c, p in parents.items() if p in frontier} - found
        found |= frontier
    return found


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


def _temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob(".*") if p.is_file() and ".tmp" in p.name]


def _steps_run(results: Path) -> list[tuple[int | None, int]]:
    """(first step, steps) of each training process that ran through, from the hook's log."""
    lines = (results / "steps_run.txt").read_text().splitlines()
    return [(None if a == "None" else int(a), int(b)) for a, b in (line.split() for line in lines)]


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM],
                         ids=lambda s: s.name)
def test_run_all_killed_then_rerun_finishes_only_what_was_left(books, reference, tmp_path, how):
    results = tmp_path / "interrupted"
    results.mkdir()
    hold, reached = results / "hold", results / "reached"
    hold.touch()  # 01_train waits at step HOLD_AT until the test removes it
    # The runner's output goes to a file, not a pipe: waiting for the runner must not also wait
    # for every process that inherited its stdout (a notebook or kernel that outlives it is
    # reported below, by pid, instead of as a timeout).
    log, family = tmp_path / "runner.log", []
    with open(log, "w") as out:
        # Started with SIGINT ignored, as a command started with `&` from a script is: Ctrl-C
        # (kill -INT) must unwind the run all the same.
        proc = subprocess.Popen([sys.executable, "-m", "rt_lib.pipeline.runner", "--jobs", "2"],
                                env=_env(books, results), cwd=PROJECT, stdout=out,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                preexec_fn=_ignore_sigint)
    try:
        ckpt = results / "01_train" / "last.pt"
        manifest = results / "manifest.json"
        deadline = time.time() + 300
        # 01_train held mid-run, 02_quick (run beside it) finished and recorded
        while not (reached.exists() and manifest.exists()
                   and "02_quick" in manifest.read_text()):
            if proc.poll() is not None:
                pytest.fail(f"the run ended before it could be interrupted:\n"
                            f"{log.read_text()[-3000:]}")
            if time.time() > deadline:
                recorded = manifest.exists() and "02_quick" in manifest.read_text()
                pytest.fail(f"after 300 s: 01_train held at step {HOLD_AT}: {reached.exists()}; "
                            f"02_quick recorded: {recorded}")
            time.sleep(0.05)
        family = _descendants(proc.pid)
        assert family  # its notebook processes and kernels
        os.kill(proc.pid, how)  # the runner alone (its own session), as `kill` would
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGUSR1)  # where it is stuck (faulthandler, into the log)
            time.sleep(2)
            pytest.fail(f"the runner did not exit within 120 s of {how.name}:\n{log.read_text()[-6000:]}")
        output = log.read_text()
        # The hold stays until every notebook process is gone: after SIGKILL the kernel learns of
        # its parent's death by ipykernel's parent poller, up to a second later, and released
        # early it would train (and checkpoint) past HOLD_AT in that second.
        deadline = time.time() + 30
        while any(_alive(p) for p in family) and time.time() < deadline:
            time.sleep(0.2)
        survivors = [p for p in family if _alive(p)]
    finally:
        if proc.poll() is None:  # the test failed before its signal: leave nothing running
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        for pid in family:  # a survivor (reported below) must not train on past the hold
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        hold.unlink(missing_ok=True)
    # Ctrl-C and SIGTERM unwind (notebooks stopped, temporaries removed) and exit with 130
    assert proc.returncode == (-signal.SIGKILL if how == signal.SIGKILL else 130), output
    assert not survivors, f"a notebook process outlived the runner: {survivors}"
    done_before = set(json.loads(manifest.read_text())["notebooks"])
    assert "02_quick" in done_before and "01_train" not in done_before
    assert not (results / "steps_run.txt").exists()  # 01_train never ran through
    saved = load_torch(ckpt)  # the checkpoint the kill left: the one just before the hold
    assert saved["step"] == HOLD_AT and not saved["finished"]

    again = _run_all(books, results)
    assert again.returncode == 0, again.stderr
    assert "02_quick is up to date" in again.stdout and "01_train started" in again.stdout
    assert "02_quick started" not in again.stdout
    # resumed, not retrained: the one training that ran through began at the checkpoint's step
    # and ran only the steps left (the uninterrupted run: all of them, from 0)
    assert _steps_run(reference) == [(0, STEPS)]
    assert _steps_run(results) == [(HOLD_AT, STEPS - HOLD_AT)]
    assert not _temporaries(results)
    final = Manifest(results)
    assert not final.problems
    for name in ("01_train", "02_quick"):
        assert final.stale_reason(name, final.entries[name].key) is None
    # the resumed run ends where the uninterrupted one did: same table, byte for byte the same
    # figure (fixed metadata)
    for rel in ("01_train/metrics.csv", "01_train/curve.png", "02_quick/done.txt"):
        assert (results / rel).read_bytes() == (reference / rel).read_bytes(), rel
    assert len(pd.read_csv(results / "01_train/metrics.csv")) == STEPS // 100


def test_a_run_ends_by_building_its_profiles_site_with_a_page_per_notebook(reference):
    site = reference / "site"  # the CPU profile's root is results/ itself
    assert sorted(p.name for p in site.glob("*.html")) == ["01_train.html", "02_quick.html",
                                                          "index.html"]
    index = (site / "index.html").read_text()
    assert 'href="01_train.html"' in index and 'href="02_quick.html"' in index


def test_a_no_change_rerun_skips_everything_and_a_changed_notebook_reruns(reference, tmp_path):
    books = _make_books(tmp_path / "notebooks")  # the same notebooks: this test edits one
    results = tmp_path / "results"
    shutil.copytree(reference, results)  # results of the same sources: up to date here too
    before = (results / "01_train" / "metrics.csv").stat().st_mtime_ns
    again = _run_all(books, results)
    assert again.returncode == 0 and again.stdout.count("is up to date") == 2
    assert (results / "01_train" / "metrics.csv").stat().st_mtime_ns == before
    forced = _run_all(books, results, "--force", "--only", "02")
    assert "02_quick started" in forced.stdout and "01_train" not in forced.stdout
    # a change of the notebook's source (not of its outputs) makes it stale
    _write_notebook(books / "02_quick.ipynb", None, QUICK_CODE + "\n# edited\n")
    edited = _run_all(books, results)
    assert "02_quick: its inputs changed" in edited.stdout
    assert "01_train is up to date" in edited.stdout


def test_a_damaged_output_and_a_damaged_manifest_entry_are_rebuilt(books, reference, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(reference, results)  # the manifest's paths are relative to its folder
    (results / "01_train" / "curve.png").write_bytes(b"not a png")
    out = _run_all(books, results)
    assert "01_train: 01_train/curve.png does not match its recorded hash" in out.stdout
    assert "02_quick is up to date" in out.stdout
    rebuilt = (results / "01_train" / "curve.png").read_bytes()
    assert rebuilt == (reference / "01_train" / "curve.png").read_bytes()  # the figure itself

    data = json.loads((results / "manifest.json").read_text())
    data["notebooks"]["02_quick"]["key"] = "0" * 64  # edited by hand: its own hash disagrees
    (results / "manifest.json").write_text(json.dumps(data))
    out = _run_all(books, results)
    assert "the entry of 02_quick does not match its hash" in out.stderr
    assert "02_quick: not run yet" in out.stdout and "01_train is up to date" in out.stdout

    (results / "manifest.json").write_text('{"format": 1, "noteb')  # cut short
    out = _run_all(books, results)
    assert "is unreadable" in out.stderr and out.stdout.count("not run yet") == 2
    assert not Manifest(results).problems  # written back whole


def _files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


@pytest.mark.parametrize("how", ["ctrl-c", "bad value"])
def test_a_stopped_or_failed_rerun_leaves_the_previous_results_byte_for_byte(books, reference,
                                                                            tmp_path, how):
    results = tmp_path / "results"
    shutil.copytree(reference, results)
    # without its finished checkpoint, the forced rerun trains (and so can be stopped mid-run)
    for name in ("last.pt", "last.pt.sha256"):
        (results / "01_train" / name).unlink()
    before, entry = _files_of(results / "01_train"), \
        json.loads((results / "manifest.json").read_text())["notebooks"]["01_train"]
    if how == "bad value":  # its parameters cell edited to a value the run refuses
        books = _make_books(tmp_path / "notebooks")
        _write_notebook(books / "01_train.ipynb", TRAIN_PARAMS.replace(f"{STEPS}", "0"), TRAIN_CODE)
        out = _run_all(books, results, "--only", "01")
        assert out.returncode == 1 and "steps must be a positive integer" in out.stderr
        assert "its previous results are back" in out.stderr
    else:
        hold, reached = results / "hold", results / "reached"
        hold.touch()
        log = tmp_path / "runner.log"
        with open(log, "w") as stream:
            proc = subprocess.Popen([sys.executable, "-m", "rt_lib.pipeline.runner", "--force",
                                     "--only", "01"], env=_env(books, results), cwd=PROJECT,
                                    stdout=stream, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=True)
        try:
            deadline = time.time() + 300
            while not reached.exists():
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.time() < deadline, "the rerun never reached its hold"
                time.sleep(0.05)
            # mid-run: the notebook has begun replacing the folder's files (its checkpoint)
            assert (results / "01_train" / "last.pt").exists()
            before_signal = len(log.read_text().splitlines())
            os.killpg(proc.pid, signal.SIGINT)  # as Ctrl-C: every process of the terminal's group
            assert proc.wait(timeout=120) == 130, log.read_text()[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            hold.unlink(missing_ok=True)
        reached.unlink()
        said = log.read_text().splitlines()[before_signal:]
        assert "its previous results are back" in "\n".join(said)
        # a few lines, no traceback from the notebook's processes
        assert len(said) <= 4 and not any("Traceback" in line for line in said), said
    after = _files_of(results / "01_train")
    after.pop("01_train.failed.ipynb", None)  # the failed run's notebook, kept beside them
    assert after.keys() == before.keys() and after == before
    assert json.loads((results / "manifest.json").read_text())["notebooks"]["01_train"] == entry
    assert not (results / ".previous").exists() or not any((results / ".previous").iterdir())


def test_a_second_run_on_the_same_results_is_refused(books, tmp_path):
    import fcntl

    results = tmp_path / "results"
    results.mkdir()
    with open(results / ".run_all.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = _run_all(books, results)
    assert out.returncode == 2 and "another ./run_all.sh is writing to" in out.stderr


def test_unfinished_temporary_files_are_removed_before_a_run(books, tmp_path):
    results = tmp_path / "results"
    stale = results / "01_train" / ".metrics.csv.abc123.tmp.csv"
    stale.parent.mkdir(parents=True)
    stale.write_text("half a ta")
    out = _run_all(books, results, "--only", "02")
    assert out.returncode == 0 and "removed 1 temporary file(s)" in out.stdout
    assert not stale.exists()


def _tiny(steps=40, **kw):
    cfg = dict(steps=steps, batch_size=8, lr=1e-3, weight_decay=1e-3, warmup_steps=2,
               eval_every=10, progress=False, threads=1, seed=3)
    return TrainConfig(**{**cfg, **kw})


def _model():
    return build_model(TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_heads=2), 0)


def test_a_damaged_checkpoint_is_detected_and_training_restarts(tmp_path):
    task = modular_addition(7, train_fraction=0.8, split_seed=0)
    ckpt = tmp_path / "last.pt"
    reference = train(_model(), task, _tiny())
    train(_model(), task, _tiny(steps=40, checkpoint_path=str(ckpt), stop_metric="step",
                                stop_value=20))  # stopped at step 20: a mid-run checkpoint
    raw = bytearray(ckpt.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte inside the tensors
    ckpt.write_bytes(bytes(raw))
    with pytest.raises(CorruptFileError, match="do not match"):
        load_torch(ckpt)
    with pytest.warns(UserWarning, match="not resumed from it; training from step 0"):
        again = train(_model(), task, _tiny(checkpoint_path=str(ckpt), resume=True))
    cols = [c for c in reference.history.columns if c != "time_s"]
    assert again.history[cols].equals(reference.history[cols])  # rebuilt from scratch
    assert load_torch(ckpt)["step"] == 40  # and its new checkpoint verifies


def test_a_checkpoint_without_its_recorded_hash_is_not_trusted(tmp_path):
    path = tmp_path / "model.pt"
    atomic_save_torch({"w": torch.ones(2)}, path)
    assert torch.equal(load_torch(path)["w"], torch.ones(2))
    Path(f"{path}.sha256").unlink()
    with pytest.raises(CorruptFileError, match="no recorded sha256"):
        load_torch(path)


def test_a_checkpoint_pickled_before_the_modules_moved_still_loads(tmp_path, monkeypatch):
    """A results folder of an earlier run pickled classes under rt_lib's flat module names
    (rt_lib.train before rt_lib/training/train.py): load_torch reads them under the new ones."""
    import rt_lib.training.train as moved

    config = TrainConfig(steps=3, batch_size=None, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.98),
                         warmup_steps=0, schedule="constant", grad_clip=None)
    with monkeypatch.context() as m:  # pickle it as the old module named it
        m.setattr(TrainConfig, "__module__", "rt_lib.train")
        m.setitem(sys.modules, "rt_lib.train", moved)
        atomic_save_torch({"config": config}, tmp_path / "old.pt")
    assert "rt_lib.train" not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="rt_lib.train"):  # the old name is in the bytes
        torch.load(tmp_path / "old.pt", weights_only=False)
    assert load_torch(tmp_path / "old.pt")["config"] == config


def test_output_files_leave_out_temporaries_and_failures(tmp_path):
    for name in ("a.csv", "sub/b.png", ".a.csv.x1.tmp.csv", "n.failed.ipynb"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    found = [p.relative_to(tmp_path).as_posix() for p in output_files(tmp_path)]
    assert found == ["a.csv", "sub/b.png"]


def test_an_interrupted_grid_resumes_and_ends_as_the_uninterrupted_one(tmp_path):
    from rt_lib.experiments.common import train_grid
    from rt_lib.experiments.modular_addition import ModularAdditionParams

    task = modular_addition(7, train_fraction=0.8, split_seed=0)
    params = ModularAdditionParams(p=7, train_fraction=0.8, models=["random transformer",
                                   "trained transformer"], widths=[16], restarts=1, steps=30,
                                   batch_size=8, warmup_steps=2, eval_every=5, n_heads=2,
                                   lstm_steps=None, trained_steps=None, threads=1)
    reference = train_grid(task, params)

    calls = []
    original = task.get_batch

    def counting(step, batch_size, seed, stop_at=None):
        calls.append(step)
        if stop_at is not None and len(calls) == stop_at:
            raise KeyboardInterrupt  # killed in the middle of the second model's steps
        return original(step, batch_size, seed)

    task.get_batch = lambda *a: counting(*a, stop_at=30 + 17)
    with pytest.raises(KeyboardInterrupt):
        train_grid(task, params, resume_dir=str(tmp_path / "resume"))
    calls.clear()
    task.get_batch = lambda *a: counting(*a)
    resumed = train_grid(task, params, resume_dir=str(tmp_path / "resume"))
    # the first model had finished: not retrained; the second went on from its step-15 checkpoint
    assert calls == list(range(15, 30))
    timing = ["wall_time_s"]
    pd.testing.assert_frame_equal(resumed.metrics.drop(columns=timing),
                                  reference.metrics.drop(columns=timing))
    for key, history in reference.histories.items():
        pd.testing.assert_frame_equal(resumed.histories[key].drop(columns="time_s"),
                                      history.drop(columns="time_s"))


def test_a_finished_run_that_is_reused_is_left_byte_for_byte(tmp_path):
    task = modular_addition(7, train_fraction=0.8, split_seed=0)
    ckpt = tmp_path / "last.pt"
    train(_model(), task, _tiny(checkpoint_path=str(ckpt), resume=True))
    before = ckpt.read_bytes()
    again = train(_model(), task, _tiny(checkpoint_path=str(ckpt), resume=True))
    assert again.steps_done == 40 and ckpt.read_bytes() == before  # else notebook 11 looks stale


def test_a_real_notebook_run_twice_writes_identical_tables(tmp_path):
    # Notebook 05 at a small profile: large enough for its own claim (trained >= 2x random bits
    # per parameter; at n = 16, width 8 it fails and the notebook stops), small enough for seconds.
    tiny = ["--only", "05", "--set", "n=64", "--set", "widths=[16]", "--set", "steps=150",
            "--set", "eval_every=50", "--set", "warmup_steps=10"]
    first, second = [_run_all(NOTEBOOKS, tmp_path / run, *tiny) for run in "ab"]
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:]
    # an exploration run: its own folder, named after the changes (a hash when they are long)
    (a,) = (tmp_path / "a").glob("05_memorisation+*")
    b = tmp_path / "b" / a.name
    assert not (tmp_path / "a" / "05_memorisation").exists()
    tables = sorted(p.relative_to(a) for p in a.rglob("*.csv")
                    if not p.name.endswith(".timings.csv"))  # wall times differ, by design
    assert Path("metrics.csv") in tables
    for rel in tables:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel
    # and the table holds what the small profile trained: both models, 150 steps each
    table = pd.read_csv(a / "metrics.csv")
    assert set(table["model"]) == {"random transformer", "trained transformer"}
    assert (table["steps"] == 150).all()
