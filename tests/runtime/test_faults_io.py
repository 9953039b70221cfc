"""Faults of the storage and of the files notebooks hand each other (marked ``fault``): a full
disk or a read-only folder during a write, results damaged on disk before another notebook reads
them, and two ``./run_all.sh`` started at the same instant.  None of them loses what was there.

A full disk is simulated by letting a writer write its file, cutting that file to half and
raising ENOSPC, as a disk that fills up mid-write does, for every writer and every step of it;
as root, one test also fills a real tmpfs and bind-mounts a real read-only folder, each in a
mount namespace of its own (nothing outside the test is touched)."""

from __future__ import annotations

import errno
import hashlib
import multiprocessing
import os
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from rt_lib.model import TransformerConfig, build_model
from rt_lib.pipeline import runner
from rt_lib.runtime.io import (
    CorruptFileError,
    DamagedFileError,
    WriteFailedError,
    atomic_path,
    atomic_save_torch,
    atomic_write_text,
    load_torch,
    save_csv,
    save_figure,
    use_folder,
)
from rt_lib.runtime.manifest import Manifest
from rt_lib.tasks import modular_addition
from rt_lib.training.train import TrainConfig, train

pytestmark = pytest.mark.fault
ROOT = os.geteuid() == 0  # root writes into folders whose mode forbids it: chmod proves nothing


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (temporaries included) and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def _fills_the_disk(real, after_calls: int = 0):
    """``real``, a method that writes a file (``Path.write_text``, ``DataFrame.to_csv``, ...),
    as on a disk that fills up: from call ``after_calls + 1`` on it writes its file, cuts it to
    half and raises ENOSPC."""
    calls = []

    def write(self, *args, **kwargs):
        calls.append(1)
        target = self if isinstance(self, Path) else Path(args[0])
        real(self, *args, **kwargs)
        if len(calls) <= after_calls:
            return None
        with open(target, "r+b") as f:
            f.truncate(target.stat().st_size // 2)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    return write


def _table(version: int) -> pd.DataFrame:
    return pd.DataFrame({"model": ["a", "b"], "width": [16, 32], "test_acc": [0.5, version / 10]})


def _figure(version: int) -> Figure:
    fig = Figure()  # no pyplot: no backend, nothing left open
    fig.subplots().plot([0, 1], [0, version])
    return fig


# writer -> (what a results folder gets written with, the file, the low-level write that fails)
WRITERS = {
    "text": (lambda path, v: atomic_write_text(path, f"version {v}\n" * 100), "notes.txt",
             (Path, "write_text")),
    "csv": (lambda path, v: save_csv(_table(v), path), "metrics.csv", (pd.DataFrame, "to_csv")),
    "figure": (lambda path, v: save_figure(_figure(v), path), "curve.png", (Figure, "savefig")),
    "torch": (lambda path, v: atomic_save_torch({"w": torch.full((64,), float(v))}, path),
              "model.pt", (Path, "write_bytes")),
    "torch sha256": (lambda path, v: atomic_save_torch({"w": torch.full((64,), float(v))}, path),
                     "model.pt", (Path, "write_text")),  # its checksum, written beside it
}


@pytest.mark.parametrize("writer", WRITERS)
def test_a_full_disk_mid_write_names_the_file_and_keeps_the_previous_version(
        writer, tmp_path, monkeypatch):
    write, name, (owner, method) = WRITERS[writer]
    folder = tmp_path / "results" / "01_modular_addition"
    path = folder / name
    write(path, 1)
    before = _files(folder)
    with monkeypatch.context() as m:
        m.setattr(owner, method, _fills_the_disk(getattr(owner, method)))
        with pytest.raises(WriteFailedError) as caught:
            write(path, 2)
    err = caught.value
    assert isinstance(err, OSError) and err.errno == errno.ENOSPC
    target = path.with_name(path.name + ".sha256") if writer == "torch sha256" else path
    assert str(err).startswith(f"no space left on device while writing {target}: its previous "
                               "version, if any, is left as it was; free some space")
    assert _files(folder) == before  # byte for byte, and no temporary beside them
    if writer.startswith("torch"):
        assert torch.equal(load_torch(path)["w"], torch.full((64,), 1.0))  # still a pair
    write(path, 2)  # the disk has room again: the rerun writes it
    assert _files(folder) != before and set(_files(folder)) == set(before)
    if writer.startswith("torch"):
        assert torch.equal(load_torch(path)["w"], torch.full((64,), 2.0))


# Run as root in a mount namespace of its own: a 256 KiB tmpfs filled to the last page (a real
# ENOSPC), then the same folder bind-mounted read-only (a real EROFS).  Each writer saves
# version 1, is refused version 2, and must leave version 1 byte for byte.
_REAL_FAULTS = r"""
import errno, json, os, subprocess, sys
from pathlib import Path
import pandas as pd, torch
from rt_lib.runtime.io import WriteFailedError, atomic_save_torch, atomic_write_text, load_torch, save_csv

folder = Path(sys.argv[1])
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], check=True)
writers = {
    "text": lambda v: atomic_write_text(folder / "notes.txt", f"version {v}\n" * 100),
    "csv": lambda v: save_csv(pd.DataFrame({"a": [v] * 50}), folder / "metrics.csv"),
    "torch": lambda v: atomic_save_torch({"w": torch.full((64,), float(v))}, folder / "model.pt"),
}
def files():
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.name != "filler"}
for write in writers.values():
    write(1)
before = files()
out = {}
fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT)  # every free page, unbuffered
try:
    while True:
        os.write(fd, bytes(4096))
except OSError as err:
    assert err.errno == errno.ENOSPC, err
os.close(fd)
def refused(code):
    got = {}
    for name, write in writers.items():
        try:
            write(2)
            got[name] = "written"
        except WriteFailedError as err:
            got[name] = [err.errno == code, str(err).split(" while writing ")[0]]
    return got
out["ENOSPC"] = refused(errno.ENOSPC)
out["ENOSPC unchanged"] = files() == before
out["ENOSPC loads"] = load_torch(folder / "model.pt")["w"][0].item()
os.remove(folder / "filler")
subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)
out["EROFS"] = refused(errno.EROFS)
out["EROFS unchanged"] = files() == before
print(json.dumps(out))
"""


def test_a_real_full_disk_and_a_real_read_only_mount_leave_every_result_as_it_was(tmp_path):
    import json
    import shutil
    import subprocess
    import sys

    if not ROOT or not shutil.which("unshare"):
        pytest.skip("needs root and unshare for a tmpfs and a read-only bind mount of its own "
                    "(the simulated faults above run everywhere)")
    folder = tmp_path / "results"
    folder.mkdir()
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "mount", "-t", "tmpfs",
                            "tmpfs", str(folder)], capture_output=True, text=True)
    if probe.returncode:
        pytest.skip(f"this machine refuses a mount namespace: {probe.stderr.strip()}")
    child = subprocess.run(["unshare", "-m", "--propagation", "private", sys.executable, "-c",
                            _REAL_FAULTS, str(folder)], capture_output=True, text=True,
                           timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert child.returncode == 0, child.stderr
    got = json.loads(child.stdout.strip().splitlines()[-1])
    for code, cause in (("ENOSPC", "no space left on device"), ("EROFS", "read-only file system")):
        assert got[code] == {name: [True, cause] for name in ("text", "csv", "torch")}, got
        assert got[f"{code} unchanged"] is True
    assert got["ENOSPC loads"] == 1.0


class _Killed(BaseException):
    """The process killed at this instant (not an Exception: nothing may catch it)."""


@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_checkpoint_save_killed_between_its_renames_leaves_a_pair_that_loads(at, tmp_path,
                                                                              monkeypatch):
    """atomic_save_torch renames three times (the .sha256 listing both, the .pt, the .sha256
    alone): killed before rename ``at``, the .pt on disk still matches its .sha256."""
    path = tmp_path / "last.pt"
    atomic_save_torch({"w": torch.zeros(4)}, path)
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == at:
            raise _Killed
        return real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(_Killed):
        atomic_save_torch({"w": torch.ones(4)}, path)
    monkeypatch.undo()
    assert len(calls) == at
    got = load_torch(path)["w"]  # no CorruptFileError, whichever of the two it is
    assert torch.equal(got, torch.zeros(4) if at <= 2 else torch.ones(4))
    atomic_save_torch({"w": torch.full((4,), 2.0)}, path)  # the next save leaves one sha256
    assert torch.equal(load_torch(path)["w"], torch.full((4,), 2.0))
    assert len(path.with_name("last.pt.sha256").read_text().split()) == 1


def test_saves_killed_twice_in_a_row_before_the_pt_moves_still_load_the_first(tmp_path,
                                                                             monkeypatch):
    """Each killed save adds its sha256 to the list (the .pt never moved); the original loads
    throughout, and the next whole save leaves one sha256 again."""
    path = tmp_path / "last.pt"
    atomic_save_torch({"w": torch.zeros(4)}, path)
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: real(src, dst)
                        if str(dst).endswith(".sha256") else (_ for _ in ()).throw(_Killed()))
    for value in (1.0, 2.0):
        with pytest.raises(_Killed):
            atomic_save_torch({"w": torch.full((4,), value)}, path)
    monkeypatch.undo()
    assert len(path.with_name("last.pt.sha256").read_text().split()) == 3
    assert torch.equal(load_torch(path)["w"], torch.zeros(4))
    atomic_save_torch({"w": torch.full((4,), 3.0)}, path)
    assert path.with_name("last.pt.sha256").read_text().split() == [
        hashlib.sha256(path.read_bytes()).hexdigest()]


def test_a_damaged_checkpoint_stays_refused_when_saved_over_and_killed(tmp_path, monkeypatch):
    """A damaged .pt's own sha256 was never recorded: the first rename lists what was, and
    the damaged file, still on disk after the kill, matches none of it."""
    path = tmp_path / "last.pt"
    atomic_save_torch({"w": torch.zeros(4)}, path)
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size // 2)
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda src, dst: real(src, dst)
                        if str(dst).endswith(".sha256") else (_ for _ in ()).throw(_Killed()))
    with pytest.raises(_Killed):
        atomic_save_torch({"w": torch.ones(4)}, path)
    monkeypatch.undo()
    with pytest.raises(CorruptFileError):
        load_torch(path)


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES], ids=["read-only", "no-permission"])
def test_a_read_only_results_folder_names_the_file_and_changes_nothing(code, tmp_path,
                                                                       monkeypatch):
    folder = tmp_path / "results" / "01_modular_addition"
    save_csv(_table(1), folder / "metrics.csv")
    before = _files(folder)
    real = code == errno.EACCES and not ROOT
    if real:
        folder.chmod(0o555)  # the OS refuses to create the temporary file
    else:
        # Running as root, which writes whatever the mode says, or for a read-only mount, which
        # a test cannot make: the refusal is simulated where the OS gives it first, creating
        # the temporary file beside the target.
        def refuse(*args, **kwargs):
            raise OSError(code, os.strerror(code))
        monkeypatch.setattr("tempfile.mkstemp", refuse)
    try:
        with pytest.raises(WriteFailedError) as caught:
            save_csv(_table(2), folder / "metrics.csv")
    finally:
        folder.chmod(0o755)
        monkeypatch.undo()
    cause = "read-only file system" if code == errno.EROFS else "permission denied"
    assert str(caught.value).startswith(f"{cause} while writing {folder / 'metrics.csv'}")
    assert "make the folder writable (or point RT_RESULTS at one that is)" in str(caught.value)
    assert caught.value.errno == code
    assert _files(folder) == before
    save_csv(_table(2), folder / "metrics.csv")  # writable again: the rerun writes it
    assert pd.read_csv(folder / "metrics.csv")["test_acc"].tolist() == [0.5, 0.2]


def test_an_error_that_is_not_the_storages_passes_unchanged(tmp_path):
    with pytest.raises(FileNotFoundError):  # not a storage fault: not relabelled
        with atomic_path(tmp_path / "x.txt"):
            raise FileNotFoundError(errno.ENOENT, "elsewhere")
    assert not list(tmp_path.iterdir())


def _tiny(**kw) -> TrainConfig:
    return TrainConfig(**{"steps": 40, "batch_size": 8, "lr": 1e-3, "weight_decay": 1e-3,
                          "warmup_steps": 2, "eval_every": 10,
                          "progress": False, "threads": 1, "seed": 3, **kw})


def _model():
    return build_model(TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_heads=2), 0)


def test_a_full_disk_at_a_checkpoint_keeps_the_last_one_and_the_rerun_resumes(tmp_path,
                                                                              monkeypatch):
    task = modular_addition(7, train_fraction=0.8, split_seed=0)
    reference = train(_model(), task, _tiny())
    ckpt = tmp_path / "01_modular_addition" / "last.pt"
    cfg = _tiny(checkpoint_path=str(ckpt), checkpoint_every=10, resume=True)
    with monkeypatch.context() as m:  # the checkpoints of steps 10 and 20 fit, step 30's not
        m.setattr(Path, "write_bytes", _fills_the_disk(Path.write_bytes, after_calls=2))
        with pytest.raises(WriteFailedError, match=f"^no space left on device while writing "
                                                   f"{ckpt}"):
            train(_model(), task, cfg)
    assert sorted(p.name for p in ckpt.parent.iterdir()) == ["last.pt", "last.pt.sha256"]
    assert load_torch(ckpt)["step"] == 20  # step 20's, whole: it matches its sha256
    steps = []
    again = train(_model(), task, cfg, grad_hook=lambda model, step: steps.append(step))
    assert steps[0] == 20 and again.steps_done == 40  # resumed, not retrained
    cols = [c for c in reference.history.columns if c != "time_s"]
    assert again.history[cols].equals(reference.history[cols])


def test_a_full_disk_while_recording_the_manifest_keeps_the_previous_one(tmp_path,
                                                                         monkeypatch):
    root = tmp_path / "results"
    for name in ("01_a", "02_b"):
        atomic_write_text(root / name / "out.txt", name)
    manifest = Manifest(root)
    manifest.record("01_a", "k1", "cpu", {}, root / "01_a", 1.0)
    before = (root / "manifest.json").read_bytes()
    with monkeypatch.context() as m:
        m.setattr(Path, "write_text", _fills_the_disk(Path.write_text))
        with pytest.raises(WriteFailedError, match=f"^no space left on device while writing "
                                                   f"{root / 'manifest.json'}"):
            manifest.record("02_b", "k2", "cpu", {}, root / "02_b", 1.0)
    assert (root / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in root.iterdir()) == ["01_a", "02_b", "manifest.json"]
    reread = Manifest(root)
    assert not reread.problems and list(reread.entries) == ["01_a"]
    manifest.record("02_b", "k2", "cpu", {}, root / "02_b", 1.0)  # room again
    assert list(Manifest(root).entries) == ["01_a", "02_b"]


def test_run_all_stops_with_the_message_when_the_manifest_cannot_be_written(tmp_path,
                                                                           monkeypatch, capsys):
    books, root = tmp_path / "notebooks", tmp_path / "results"
    books.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(nb, books / "01_quick.ipynb")
    atomic_write_text(root / "01_quick" / "done.txt", "done")
    Manifest(root).record("01_quick", "0" * 64, "cpu", {}, root / "01_quick", 1.0)  # stale
    before = _files(root)
    # The stale entry is dropped (a manifest write) before the notebook reruns: on a full disk
    # that write fails, and the runner stops there, in this process (no notebook starts).
    real = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name.startswith(".manifest.json."):
            return _fills_the_disk(real)(self, *args, **kwargs)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    for key, value in (("RT_NOTEBOOKS", str(books)), ("RT_RESULTS", str(root)),
                       ("TQDM_DISABLE", "1"), ("RT_THREADS", "1")):
        monkeypatch.setenv(key, value)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        assert runner.main(["--jobs", "1"]) == 1
    finally:
        for sig, handler in handlers.items():  # main() installs its own: pytest's come back
            signal.signal(sig, handler)
    err = capsys.readouterr().err
    assert (f"run_all.sh: error: no space left on device while writing {root / 'manifest.json'}"
            in err)
    assert _files(root) == before | {".run_all.lock": b""}  # the lock, released


def test_a_results_folder_that_cannot_be_written_is_refused_before_anything_runs(tmp_path,
                                                                                 monkeypatch):
    root = tmp_path / "results"
    real_open = os.open

    def refuse(path, *args, **kwargs):  # a read-only mount (as root, chmod would not do)
        if str(path).endswith(runner.LOCK):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(runner.RunError, match=f"cannot take the lock {root / runner.LOCK} "
                                              r"\(Read-only file system\): the results folder"):
        with runner.exclusive(root):
            pytest.fail("ran without the lock")


# ---- results damaged on disk before another notebook reads them -----------------------------

def _metrics(results: Path, notebook: str, column: str = "test_acc") -> Path:
    table = pd.DataFrame({"model": ["random transformer"] * 2, "width": [16, 16],
                          "restart": [0, 1], "test_acc": [0.99, 1.0], "test_exact": [0.9, 1.0],
                          "train_acc": [1.0, 1.0]})
    return save_csv(table, results / notebook / "metrics.csv")


DAMAGES = {  # how a table is damaged -> (new bytes from its bytes, a fragment of the cause)
    "cut mid-row": (lambda raw: raw[: len(raw) - 7], "cut short: its last line is incomplete"),
    "cut in the header": (lambda raw: raw[:10], "cut short"),
    "a row cut at a comma": (lambda raw: raw[: raw.rindex(b",")] + b"\n", "line 3 has 5 fields"),
    "empty": (lambda raw: b"", "empty"),
    "not text": (lambda raw: bytes(range(256)) + b"\n", "can't decode byte 0x80"),
    "another table": (lambda raw: b"a,b\n1,2\n", "no column model"),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_table1_names_a_damaged_metrics_file_and_the_notebook_to_rerun(damage, results_tmp):
    from rt_lib.experiments import table1

    for notebook, *_ in table1.SOURCES.values():
        path = _metrics(results_tmp, notebook)
    assert len(table1.load_metrics()) == 10  # whole: two restarts of each, decimal's twice
    path = results_tmp / "01_modular_addition" / "metrics.csv"
    cut, cause = DAMAGES[damage]
    path.write_bytes(cut(path.read_bytes()))
    with pytest.raises(DamagedFileError) as caught:
        table1.load_metrics()
    message = str(caught.value)
    assert message.startswith(f"{path} is damaged (") and cause in message
    assert message.endswith("); rerun ./run_all.sh --only 01 --force")


def test_subspace_names_a_damaged_metrics_file_and_a_damaged_checkpoint(results_tmp):
    from rt_lib.experiments import subspace

    path = _metrics(results_tmp, "02_needle_in_a_haystack")
    assert subspace.random_solves("needle-in-a-haystack", 16) is True
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(DamagedFileError, match=r"metrics.csv is damaged \(cut short.*\); rerun "
                                               r"./run_all.sh --only 02 --force$"):
        subspace.random_solves("needle-in-a-haystack", 16)

    ckpt = results_tmp / "02_needle_in_a_haystack" / "models" / "random_transformer_d16_r0.pt"
    atomic_save_torch({"params": None, "config": None}, ckpt)
    assert subspace.checkpoints("02_needle_in_a_haystack", "random transformer") == {16: {0: ckpt}}
    raw = bytearray(ckpt.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte
    ckpt.write_bytes(bytes(raw))
    with pytest.raises(DamagedFileError, match=r"random_transformer_d16_r0.pt is damaged \("
                                               r"contents do not match the sha256 recorded when "
                                               r"saved\); rerun ./run_all.sh --only 02 --force$"):
        subspace.checkpoints("02_needle_in_a_haystack", "random transformer")


def _snapshot_run(folder: Path) -> SimpleNamespace:
    """What :func:`rt_lib.experiments.miiii_common.snapshot_models` reads of a run: its model's
    config and its folder, with two weight snapshots saved as training saves them."""
    cfg = TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_heads=2)
    for step in (10, 20):
        atomic_save_torch({"step": step, "state_dict": build_model(cfg, step).state_dict()},
                          folder / "snapshots" / f"step_{step}.pt")
    return SimpleNamespace(result=SimpleNamespace(model=SimpleNamespace(cfg=cfg)), folder=folder)


def _with_its_sha256(path: Path, raw: bytes) -> None:
    """``raw`` written to ``path`` with a matching sha256: damage the checksum cannot see."""
    import hashlib

    path.write_bytes(raw)
    Path(f"{path}.sha256").write_text(hashlib.sha256(raw).hexdigest() + "\n")


@pytest.mark.parametrize("damage", ["cut short", "cut short, its sha256 too", "not a snapshot"])
def test_miiii_neurons_names_a_damaged_snapshot_of_notebook_11(damage, results_tmp):
    from rt_lib.experiments.miiii_common import snapshot_models

    run = _snapshot_run(results_tmp / "11_miiii_training" / "runs" / "miiii_l0.5")
    assert sorted(snapshot_models(run)) == [10, 20]
    path = run.folder / "snapshots" / "step_20.pt"
    raw = path.read_bytes()
    if damage == "cut short":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "cut short, its sha256 too":
        _with_its_sha256(path, raw[: len(raw) // 2])
    else:  # a whole checkpoint of another kind, saved under a snapshot's name
        atomic_save_torch({"step": 20, "weights": {}}, path)
    with pytest.raises(DamagedFileError) as caught:
        snapshot_models(run)
    assert str(caught.value).startswith(f"{path} is damaged (")
    assert str(caught.value).endswith("); rerun ./run_all.sh --only 11 --force")


def test_a_damaged_tokenizer_cache_is_trained_again(tmp_path):
    from rt_lib.tasks.tokenizer import cached_tokenizer

    stories = ["Once upon a time a cat sat on a mat.", "The dog ran to the park and played.",
               "A little girl found a red ball under the tree."] * 3
    first = cached_tokenizer(stories, 300, tmp_path)
    (cache,) = tmp_path.glob("*.json")
    whole = cache.read_bytes()
    cache.write_bytes(whole[: len(whole) // 2])
    with pytest.warns(UserWarning, match=f"{cache} is damaged .*: training the tokenizer again"):
        again = cached_tokenizer(stories, 300, tmp_path)
    assert cache.read_bytes() == whole  # rebuilt: the same training gives the same file
    assert again.encode(stories[2]) == first.encode(stories[2])


SPACE = {"dropout": [0.0, 0.1], "lr": [1e-2, 3e-3]}
FIXED = {"p": 5, "epochs": 8, "eval_points": 2, "d_model": 8, "n_heads": 2, "threads": 1}


@pytest.mark.parametrize("damage", ["not a database", "cut short", "journal"])
def test_miiii_search_names_a_damaged_study_and_leaves_its_bytes(damage, results_tmp,
                                                                 monkeypatch):
    from rt_lib.experiments import miiii_search
    from rt_lib.experiments.miiii_search import SearchParams, open_study

    folder = results_tmp / "14_miiii_search"
    folder.mkdir(parents=True)
    if damage == "journal":
        path = folder / "study.log"
        storage = f"journal:{path}"
    else:
        path = folder / "study.db"
        storage = f"sqlite:///{path}"
    params = SearchParams(space=SPACE, fixed=FIXED, storage=storage, study_name="s")
    open_study(params)  # a study made and stored
    raw = path.read_bytes()
    path.write_bytes({"not a database": b"not a database" * 100,
                      "cut short": raw[: len(raw) // 2],
                      "journal": raw + b"{not json\n" + raw}[damage])
    damaged = path.read_bytes()
    waits = []
    monkeypatch.setattr(miiii_search.time, "sleep", waits.append)
    with pytest.raises(DamagedFileError) as caught:
        open_study(params)
    assert waits == []  # refused at once, not retried as a schema race between workers
    assert str(caught.value).startswith(f"{path} is damaged (")
    assert str(caught.value).endswith("); move it aside (it holds the trials run so far), "
                                      "then rerun ./run_all.sh --only 14 --force")
    assert path.read_bytes() == damaged  # the trials in it are the user's to recover


def test_a_damaged_parameters_file_of_notebook_11_is_named_by_its_readers(results_tmp,
                                                                          monkeypatch):
    from rt_lib.experiments.miiii_common import explored_train_params

    monkeypatch.setattr("rt_lib.runtime.io._folders", {})
    monkeypatch.delenv("RT_RUN", raising=False)
    folder = results_tmp / "11_miiii_training+p=41"
    use_folder("11_miiii_training", folder.name)
    path = folder / "parameters.yaml"
    folder.mkdir(parents=True)
    for raw, cause in (("changes: {p: 41\n", "not YAML"), ("- p\n- 41\n", "a list, not a mapping"),
                       ("notebook: 11_miiii_training\n", "it records no parameters")):
        path.write_text(raw)
        with pytest.raises(DamagedFileError) as caught:
            explored_train_params({})
        assert str(caught.value).startswith(f"{path} is damaged ({cause}")
        assert str(caught.value).endswith(
            "rerun ./run_all.sh --only 11 --force with the --set of that run "
            "(11_miiii_training+p=41/parameters.yaml lists its changes)")


def test_run_all_list_names_damaged_claims_and_parameters_and_lists_the_rest(results_tmp,
                                                                             capsys):
    save_csv(pd.DataFrame({"id": ["a"], "status": ["holds"]}), results_tmp / "02_ok" / "claims.csv")
    bad = save_csv(pd.DataFrame({"id": ["a", "b"], "status": ["holds", "fails"]}),
                   results_tmp / "01_modular_addition" / "claims.csv")
    bad.write_bytes(bad.read_bytes()[:-4])  # cut short
    params = results_tmp / "paper" / "03_decimal_addition+n=3" / "parameters.yaml"
    params.parent.mkdir(parents=True)
    params.write_text("changes: [unclosed\n")
    assert runner.main(["--list"]) == 1
    out, err = capsys.readouterr()
    assert "  02_ok" in out and "claims held 1/1" in out  # the others are listed
    assert (f"DAMAGED: {bad} is damaged (cut short: its last line is incomplete); rerun "
            "./run_all.sh --only 01 --force\n") in out
    assert (f"DAMAGED: {params} is damaged (not YAML: while parsing a flow sequence); rerun "
            "./run_all.sh --only 03 --force --profile paper with the --set of that run") in out
    assert "runs with damaged records are listed above" in err


def test_run_all_list_shows_a_failed_run_as_failed_whatever_it_recorded(results_tmp, capsys):
    """A notebook that failed after recording two claims that held (13 on another CPU, say) is
    listed as failed, not as "claims held 2/2"; its platform line comes first."""
    folder = results_tmp / "13_miiii_neurons"
    save_csv(pd.DataFrame({"id": ["a", "b"], "status": ["holds", "holds"]}), folder / "claims.csv")
    (folder / "13_miiii_neurons.failed.ipynb").write_text("{}")
    save_csv(pd.DataFrame({"id": ["a"], "status": ["holds"]}), results_tmp / "02_ok" / "claims.csv")
    assert runner.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "platform: " in out and "comparison: " in out
    line = next(x for x in out.splitlines() if "13_miiii_neurons" in x and "profile" in x)
    assert "FAILED" in line and "13_miiii_neurons.failed.ipynb" in line
    assert "claims held 2/2" not in line
    assert "02_ok" in out and "claims held 1/1" in out


def test_the_site_builder_names_a_damaged_claims_file(tmp_path):
    from rt_lib.site.pages import build_site

    root = tmp_path / "results"
    (root / "01_quick").mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Quick")])
    nbformat.write(nb, root / "01_quick" / "01_quick.ipynb")
    (root / "01_quick" / "claims.csv").write_text("id,status\nx,holds\ny,maybe\n")
    with pytest.raises(DamagedFileError, match=r"01_quick/claims.csv is damaged \(unknown "
                                               r"statuses \['maybe'\]\); rerun ./run_all.sh "
                                               r"--only 01 --force$"):
        build_site(root, "cpu", ["01_quick"])


# ---- two runners started at the same instant -------------------------------------------------

def _race(root: Path, rounds: int) -> list[list[str]]:
    """``rounds`` times, two threads take :func:`runner.exclusive` at the same instant (a
    barrier); the winner holds it until the other has tried.  What each got, per round."""
    outcomes: list[list[str]] = []
    # a thread stuck past the timeout breaks the barrier: the test fails, it does not hang
    start, tried = threading.Barrier(2, timeout=60), threading.Barrier(2, timeout=60)

    def attempt(got: list[str]) -> None:
        start.wait()
        try:
            with runner.exclusive(root):
                got.append("ran")
                tried.wait()
        except runner.RunError as err:
            got.append(str(err))
            tried.wait()

    for _ in range(rounds):
        got: list[str] = []
        threads = [threading.Thread(target=attempt, args=(got,)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
            assert not t.is_alive(), "a thread neither ran nor was refused"
        outcomes.append(got)
    return outcomes


def test_two_runs_started_at_the_same_instant_exactly_one_runs(tmp_path):
    root = tmp_path / "results"
    for got in _race(root, 200):
        assert sorted(got, key=lambda g: g != "ran")[0] == "ran" and got.count("ran") == 1, got
        (refused,) = [g for g in got if g != "ran"]
        assert refused.startswith("another ./run_all.sh")
        assert refused.endswith(f"is writing to {root} (it holds {root / runner.LOCK}); wait "
                                "for it or stop it")
    with runner.exclusive(root):  # released by both
        pass


def _hold(root: Path, ready) -> None:
    with runner.exclusive(root):
        ready.set()
        time.sleep(120)  # until killed


def _race_process(root: Path, barrier, wins) -> None:
    # a stuck sibling breaks the barrier after 60 s: this child exits non-zero, the test fails
    barrier.wait(60)
    try:
        with runner.exclusive(root):
            wins.put(os.getpid())
            barrier.wait(60)  # hold it until the other process has tried
    except runner.RunError:
        wins.put(None)
        barrier.wait(60)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forks the runner's lock holders")
def test_two_processes_race_for_the_lock_and_a_killed_holder_leaves_none(tmp_path):
    ctx = multiprocessing.get_context("fork")  # no re-import: a child starts in milliseconds
    root = tmp_path / "results"
    for _ in range(20):  # separate processes, as two ./run_all.sh are
        barrier, wins = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_race_process, args=(root, barrier, wins)) for _ in range(2)]
        for p in procs:
            p.start()
        got = [wins.get(timeout=300) for _ in procs]  # each child reports, won or refused
        for p in procs:
            p.join(300)
        assert [p.exitcode for p in procs] == [0, 0]
        winners = [w for w in got if w is not None]
        assert len(winners) == 1 and winners[0] in {p.pid for p in procs}
    ready = ctx.Event()
    holder = ctx.Process(target=_hold, args=(root, ready))
    holder.start()
    try:
        assert ready.wait(300)
        with pytest.raises(runner.RunError, match=rf"another ./run_all.sh \(pid {holder.pid}\) "
                                                  "is writing to"):
            with runner.exclusive(root):
                pass
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # as a run killed with kill -9
        holder.join(20)
    assert (root / runner.LOCK).read_text() == f"{holder.pid}\n"  # its lock file stays behind
    with runner.exclusive(root):  # and holds nothing: the next run goes ahead
        assert (root / runner.LOCK).read_text() == f"{os.getpid()}\n"
