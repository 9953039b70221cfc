"""The run store (rt_lib.runtime.store) and training through it (rt_lib.training.stored): a hit
is what a retrain gives, the key misses on what decides a run and hits on what does not, and a
damaged entry is retrained, never used."""

import json
import multiprocessing
import os
import shutil
from pathlib import Path

import pytest
import torch

from rt_lib.model import TransformerConfig, build_model
from rt_lib.runtime import store as run_store
from rt_lib.tasks import modular_addition
from rt_lib.training import stored
from rt_lib.training.grokfast import Grokfast
from rt_lib.training.train import TrainConfig, train


def task():
    return modular_addition(7, train_fraction=0.8, split_seed=0)


def model(seed=0, trainable="all"):
    return build_model(TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_heads=4,
                                         trainable=trainable), seed)


def cfg(**kw):
    return TrainConfig(**(dict(steps=6, batch_size=8, lr=1e-3, weight_decay=1e-3, warmup_steps=2,
                               eval_every=3, progress=False, threads=1) | kw))


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("RT_CACHE", str(tmp_path / "store"))
    monkeypatch.setenv("RT_CACHE_SESSION", "test")
    return run_store.current()


def same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def events(store):
    return store.stats("test").events


def test_a_run_trained_twice_from_nothing_is_bit_identical():
    a, b = train(model(), task(), cfg()), train(model(), task(), cfg())
    assert same_weights(a.model, b.model)
    cols = [c for c in a.history.columns if c != "time_s"]
    assert a.history[cols].equals(b.history[cols])


def test_a_hit_gives_what_the_retrain_gave(store):
    trained = stored.train_stored(model(), task(), cfg())
    assert events(store)["stored"] == 1 and events(store)["hit"] == 0
    loaded = stored.train_stored(model(), task(), cfg())
    assert events(store)["hit"] == 1 and events(store)["stored"] == 1
    assert same_weights(trained.model, loaded.model)
    assert trained.history.equals(loaded.history)  # its time_s too: the stored run's own
    assert loaded.steps_done == trained.steps_done == 6
    assert loaded.config == cfg()  # the caller's config, not the store's temporary checkpoint
    plain = train(model(), task(), cfg())
    assert same_weights(plain.model, loaded.model)


def test_snapshots_and_checkpoint_come_back_into_another_folder(store, tmp_path):
    def run(folder):
        c = cfg(checkpoint_path=str(folder / "last.pt"), resume=True, snapshot_steps=(2, 6),
                snapshot_dir=str(folder / "snapshots"))
        return stored.train_stored(model(), task(), c, grad_hook=Grokfast(0.98, 2.0))

    first = run(tmp_path / "a")
    second = run(tmp_path / "b")
    assert events(store)["hit"] == 1
    assert same_weights(first.model, second.model)
    for name in ("last.pt", "snapshots/step_2.pt", "snapshots/step_6.pt"):
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()


def test_a_run_finished_in_its_own_folder_is_found_not_trained_nor_hit(store, tmp_path):
    """Asked for again in the folder it finished in (``./run_all.sh --only 11,13`` after a run),
    a run is read from there: neither a hit nor a training, a ``found`` (the schedulers keep a
    re-recorded notebook's cold time by it)."""
    c = cfg(checkpoint_path=str(tmp_path / "a" / "last.pt"), resume=True)
    first = stored.train_stored(model(), task(), c)
    again = stored.train_stored(model(), task(), c)
    assert dict(events(store)) == {"miss": 1, "stored": 1, run_store.FOUND: 1}
    assert same_weights(first.model, again.model)


@pytest.mark.parametrize("change", [
    dict(seed=1), dict(lr=2e-3), dict(steps=7), dict(batch_size=4), dict(threads=2)])
def test_a_changed_setting_or_seed_misses(change):
    assert stored.run_key(model(), task(), cfg()) != stored.run_key(model(), task(), cfg(**change))


def test_the_model_init_the_trained_parts_the_task_and_the_hook_are_in_the_key():
    key = stored.run_key(model(), task(), cfg())
    assert key == stored.run_key(model(), task(), cfg())
    assert key != stored.run_key(model(seed=1), task(), cfg())
    assert key != stored.run_key(model(trainable="embeddings"), task(), cfg())
    assert key != stored.run_key(model(), modular_addition(7, train_fraction=0.7, split_seed=0), cfg())
    assert key != stored.run_key(model(), task(), cfg(), grad_hook=Grokfast(0.98, 2.0))
    assert (stored.run_key(model(), task(), cfg(), grad_hook=Grokfast(0.98, 2.0))
            != stored.run_key(model(), task(), cfg(), grad_hook=Grokfast(0.98, 1.0)))
    # where it is kept and how it is shown are not
    assert key == stored.run_key(model(), task(), cfg(progress=True, checkpoint_path="/x/y.pt",
                                                       checkpoint_every=2, resume=True))


@pytest.fixture
def rt_lib_copy(tmp_path):
    root = tmp_path / "rt_lib"
    shutil.copytree(stored.RT_LIB, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


ENTRIES = ("rt_lib.training.train", "rt_lib.tasks.modular", "rt_lib.tasks.miiii",
           "rt_lib.training.grokfast", "rt_lib.model.transformer")


@pytest.mark.parametrize("rel", ["model/transformer.py", "model/fast_paths.py", "tasks/modular.py",
                                 "tasks/miiii.py", "tasks/base.py", "training/train.py",
                                 "training/grokfast.py", "runtime/seeding.py", "primes.py"])
def test_an_edit_on_the_training_path_misses(rt_lib_copy, rel):
    before = stored.code_digest(ENTRIES, rt_lib_copy)
    assert rel in stored.training_sources(tuple(sorted(ENTRIES)), rt_lib_copy)
    path = rt_lib_copy / rel
    path.write_text(path.read_text() + "\n# an edit\n")
    stored._code_digest.cache_clear()
    assert stored.code_digest(ENTRIES, rt_lib_copy) != before


@pytest.mark.parametrize("rel", ["analysis/fourier.py", "claims/verdicts.py", "plots/figures.py",
                                 "site/pages.py", "experiments/modular_addition.py",
                                 "pipeline/runner.py", "runtime/store.py", "runtime/manifest.py"])
def test_an_edit_off_the_training_path_hits(rt_lib_copy, rel):
    before = stored.code_digest(ENTRIES, rt_lib_copy)
    path = rt_lib_copy / rel
    path.write_text(path.read_text() + "\n# an edit\n")
    stored._code_digest.cache_clear()
    assert stored.code_digest(ENTRIES, rt_lib_copy) == before
    # docs and tests are outside rt_lib altogether
    assert all(not s.startswith(("analysis/", "claims/", "plots/", "site/", "experiments/"))
               for s in stored.training_sources(tuple(sorted(ENTRIES)), rt_lib_copy))


@pytest.mark.parametrize("damage", ["flip", "truncate", "remove", "record"])
def test_a_damaged_entry_is_reported_and_retrained(store, capsys, damage):
    trained = stored.train_stored(model(), task(), cfg())
    (entry,) = store.entries()
    target = entry / "checkpoint.pt"
    if damage == "flip":
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF
        target.write_bytes(bytes(data))
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[:100])
    elif damage == "remove":
        target.unlink()
    else:
        (entry / "entry.json").write_text("{not json")
    again = stored.train_stored(model(), task(), cfg())
    assert "damaged" in capsys.readouterr().err
    e = events(store)
    assert e["damaged"] == 1 and e["hit"] == 0 and e["stored"] == 2
    assert same_weights(trained.model, again.model)
    stored.train_stored(model(), task(), cfg())  # the entry stored again is whole
    assert events(store)["hit"] == 1


def test_the_store_is_off_with_rt_cache_off(monkeypatch, tmp_path):
    monkeypatch.setenv("RT_CACHE", "off")
    assert run_store.current() is None
    monkeypatch.setenv("RT_CACHE", str(tmp_path / "s"))
    assert run_store.current().root == tmp_path / "s"
    monkeypatch.delenv("RT_CACHE")
    assert run_store.current().root == Path("~/.cache/rt-companion/runs").expanduser()
    monkeypatch.setenv("RT_CACHE", "")  # empty is unset: the default, not off
    assert run_store.current().root == Path("~/.cache/rt-companion/runs").expanduser()
    monkeypatch.setenv("RT_CACHE_MAX_GIB", "lots")
    with pytest.raises(run_store.StoreError, match="RT_CACHE_MAX_GIB"):
        run_store.current()


def test_least_recently_used_entries_go_beyond_the_cap(tmp_path):
    s = run_store.RunStore(tmp_path / "s", max_bytes=10**9)
    for i, name in enumerate("abc"):
        f = tmp_path / name
        f.write_bytes(bytes(1000))
        s.put(name * 64, {"checkpoint.pt": f})
        rec = s.entry_dir(name * 64) / "entry.json"
        os.utime(rec, (1000 + i, 1000 + i))
    assert s.fetch("a" * 64, lambda n: tmp_path / "out" / n)  # a is used: now the newest
    s.max_bytes = 2 * 1000 + 1500  # room for two entries and their records
    s.evict()
    assert sorted(p.name[0] for p in s.entries()) == ["a", "c"]  # b was the least recently used


def _train_in_process(folder, out):
    os.environ["RT_CACHE"] = folder
    os.environ["RT_CACHE_SESSION"] = "test"
    torch.set_num_threads(1)
    res = stored.train_stored(model(), task(), cfg(steps=30))
    torch.save(res.model.state_dict(), out)


def test_two_processes_asking_for_the_same_run_store_one_whole_entry(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_train_in_process, args=(str(tmp_path / "s"), str(tmp_path / f"{i}.pt")))
             for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    s = run_store.RunStore(tmp_path / "s")
    assert len(s.entries()) == 1
    ev = s.stats("test").events
    assert ev["stored"] == 1 and ev["hit"] == 1  # the second waited, then loaded
    a, b = (torch.load(tmp_path / f"{i}.pt") for i in range(2))
    assert all(torch.equal(a[k], b[k]) for k in a)
    record = json.loads((s.entries()[0] / "entry.json").read_text())
    assert set(record["files"]) == {"checkpoint.pt", "checkpoint.pt.sha256"}


@pytest.fixture(scope="module")
def environment_of_a_module_fixture() -> dict:
    """The environment a module fixture copies into the runs it starts (Slurm's cluster, the
    fault and smoke runs do)."""
    return dict(os.environ)


def test_a_module_fixtures_runs_see_the_store_off(environment_of_a_module_fixture):
    assert environment_of_a_module_fixture.get("RT_CACHE") == "off"
