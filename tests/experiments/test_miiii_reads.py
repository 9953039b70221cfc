"""Notebooks 12, 13 and 15 read notebook 11's runs through the folder the runner hands them.

``./run_all.sh --only 11,12 --set p=41`` hands 12 the folder ``11_miiii_training+p=41``: 12 must
analyse those runs (p = 41), not the profile's (p = 37) under a p = 41 label."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rt_lib.experiment import PARAMETERS_FILE
from rt_lib.experiments import miiii_common as mc
from rt_lib.experiments import miiii_training as mi
from rt_lib.experiments.miiii_embeddings import EmbeddingParams
from rt_lib.experiments.miiii_neurons import NeuronParams
from rt_lib.experiments.random_miiii import RandomMiiiiParams
from rt_lib.pipeline import runner
from rt_lib.runtime.context import CONFIGS

PROJECT = Path(runner.__file__).resolve().parents[2]


@pytest.fixture
def handed(results_tmp, monkeypatch, run_context):
    """Notebook 11's exploration folder at p = 41 (its parameters.yaml as notebook 11 writes it)
    and a function handing it to the readers: in the run context, as the runner does."""
    monkeypatch.setattr("rt_lib.runtime.io._folders", {})

    def explore(namespace: dict, profile: str | None = None) -> Path:
        if profile:
            run_context(profile=profile)
        _, out, _ = mi.EXPERIMENT.start(namespace)  # writes parameters.yaml as notebook 11 does
        monkeypatch.setattr("rt_lib.runtime.io._folders", {})  # forget it: handed over below
        run_context(folders={mi.NAME: out.name})
        return out

    return explore


def test_readers_load_the_runs_of_the_exploration_they_are_handed(handed, results_tmp,
                                                                  monkeypatch, run_context):
    folder = handed({"p": 41})
    assert folder == results_tmp / "11_miiii_training+p=41"
    assert yaml.safe_load((folder / PARAMETERS_FILE).read_text())["changes"] == {"p": 41}
    ran = mc.MiiiiParams(p=41)
    readers = {"12": EmbeddingParams().training(), "13": NeuronParams().training(),
               "15": RandomMiiiiParams().trained()}
    for name, training in readers.items():
        assert training.p == 41, name
        assert mc.runs_folder(training) == folder, name
        assert training.run_key("miiii", 2.0) == ran.run_key("miiii", 2.0), name  # its very runs
    random = RandomMiiiiParams().random(128)  # 15's own random transformers: at p = 41 too,
    # and as long as the runs they are compared with
    assert (random.p, random.epochs, random.trainable) == (41, ran.epochs, "embeddings")
    # handed through rt_lib.runtime.io.use_folder (a live session) it is the same
    run_context(None)
    monkeypatch.setattr("rt_lib.runtime.io._folders", {mi.NAME: folder.name})
    assert EmbeddingParams().training().p == 41
    # handed nothing (or the profile's folder): the profile's runs, p = 37
    monkeypatch.setattr("rt_lib.runtime.io._folders", {})
    training = EmbeddingParams().training()
    assert training.p == 37 and mc.runs_folder(training) == results_tmp / mi.NAME
    run_context(folders={mi.NAME: mi.NAME})
    assert NeuronParams().training().p == 37


def test_train_params_go_on_top_unless_they_contradict_the_runs_read(handed):
    handed({"p": 41, "epochs": 300})
    # the profile's own value (what a profile's config repeats) gives way to the run's
    assert EmbeddingParams(train_params={"p": 37, "lr": 0.003}).training().p == 41
    # a value the run has, or one that does not change a run, is taken
    same = EmbeddingParams(train_params={"epochs": 300, "threads": 1}).training()
    assert (same.p, same.epochs, same.threads) == (41, 300, 1)
    with pytest.raises(ValueError, match=r"train_params .*'p': 43.*11_miiii_training\+.*p=41"):
        EmbeddingParams(train_params={"p": 43})
    with pytest.raises(ValueError, match="train_params"):
        RandomMiiiiParams(train_params={"epochs": 20})


def test_the_paper_profiles_readers_follow_an_exploration_of_it(handed):
    """The paper configs of 12, 13 and 15 repeat notebook 11's paper train_params (p = 113):
    handed an exploration of it at p = 41, they read p = 41."""
    paper = yaml.safe_load((CONFIGS / "paper" / f"{mi.NAME}.yaml").read_text())
    folder = handed(paper | {"p": 41}, profile="paper")
    for cls, name in ((EmbeddingParams, "12_miiii_embeddings"), (NeuronParams, "13_miiii_neurons"),
                      (RandomMiiiiParams, "15_random_miiii")):
        config = yaml.safe_load((CONFIGS / "paper" / f"{name}.yaml").read_text())
        params = cls(**config)
        training = params.trained() if cls is RandomMiiiiParams else params.training()
        assert training.p == 41 and training.d_model == 256, name
        assert mc.runs_folder(training) == folder, name


@pytest.mark.parametrize("make", [False, True])
def test_a_handed_folder_without_its_parameters_is_refused_by_name(results_tmp, monkeypatch, make,
                                                                   run_context):
    missing = "11_miiii_training+p=43"
    if make:  # the folder exists, its parameters.yaml does not
        (results_tmp / missing).mkdir(parents=True)
    monkeypatch.setattr("rt_lib.runtime.io._folders", {mi.NAME: missing})
    with pytest.raises(FileNotFoundError, match=r"11_miiii_training\+p=43.*run notebook 11"):
        EmbeddingParams()
    with pytest.raises(FileNotFoundError, match=r"11_miiii_training\+p=43"):
        RandomMiiiiParams()


def test_run_all_only_11_12_with_a_changed_p_analyses_the_runs_of_that_p(tmp_path):
    """End to end through the runner, the real notebooks 11 and 12 at p = 17 for two epochs."""
    results = tmp_path / "results"
    results.mkdir()
    # the profile's folder of notebook 11 a file: reading or training the p = 37 runs instead
    # fails at once (it would train them for 10,000 epochs)
    (results / mi.NAME).write_text("not the runs to read\n")
    env = {**os.environ, "RT_RESULTS": str(results), "TQDM_DISABLE": "1", "RT_THREADS": "1"}
    for key in ("RT_RUN", "RT_NOTEBOOKS"):
        env.pop(key, None)
    sets = ["p=17", "epochs=2", "baseline_epochs=2"]
    done = subprocess.run([sys.executable, "-m", "rt_lib.pipeline.runner", "--jobs", "1", "--only", "11,12",
                           *(arg for s in sets for arg in ("--set", s))],
                          env=env, capture_output=True, text=True, timeout=300, cwd=PROJECT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    slug = "baseline_epochs=2,epochs=2,p=17"
    trained, reader = results / f"11_miiii_training+{slug}", results / f"12_miiii_embeddings+{slug}"
    record = yaml.safe_load((reader / PARAMETERS_FILE).read_text())
    assert record["reads"] == {mi.NAME: trained.name}
    assert (results / mi.NAME).is_file()  # nothing trained or read at the profile's p = 37
    runs = {p.name for p in (trained / "runs").iterdir()}
    executed = json.loads((reader / "12_miiii_embeddings.ipynb").read_text())
    printed = "".join("".join(o.get("text", "")) for c in executed["cells"]
                      for o in c.get("outputs", []))
    assert "p = 17; runs:" in printed, printed[:2000]
    used = {name for name in runs if f"'{name}'" in printed}
    assert {name.split("_lambda")[0] for name in used} == {"nanda", "miiii", "basis"}, printed
