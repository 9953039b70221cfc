"""Notebook 14's Optuna search: validation, and a real two-process study on one SQLite file."""

import json
import subprocess
import sys

import optuna
import pytest

from rt_lib.experiments.miiii_search import SearchParams, objective, open_study, run_until, trials_table
from rt_lib.training.train import train

SPACE = {"dropout": [0.0, 0.1], "lr": [1e-2, 3e-3]}
FIXED = {"p": 5, "epochs": 8, "eval_points": 2, "d_model": 8, "n_heads": 2, "threads": 1}


def test_bad_search_parameters():
    with pytest.raises(ValueError, match="unknown hyperparameters"):
        SearchParams(space={"learning_rate": [1e-3]})
    with pytest.raises(ValueError, match="both searched"):
        SearchParams(space={"lr": [1e-3]}, fixed={"lr": 1e-3})
    with pytest.raises(ValueError, match="not divisible"):
        SearchParams(space={"n_heads": [3]}, fixed={"d_model": 8})
    with pytest.raises(ValueError, match="objective"):
        SearchParams(objective="accuracy")


def test_two_workers_share_one_sqlite_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    worker = [sys.executable, "-m", "rt_lib.experiments.miiii_search", "--storage", url,
              "--study", "pair", "--trials", "2", "--space", json.dumps(SPACE),
              "--fixed", json.dumps(FIXED)]
    procs = [subprocess.Popen(worker + ["--worker", str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    study = optuna.load_study(study_name="pair", storage=url)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(t.number for t in done) == [0, 1, 2, 3]
    assert len({t.user_attrs["worker"] for t in done}) == 2  # both processes wrote trials
    for t in done:
        assert t.value == t.user_attrs["valid_loss_last10"] > 0  # the authors' objective, minimised
        assert t.params["lr"] in SPACE["lr"] and t.params["dropout"] in SPACE["dropout"]
    # the notebook's call tops the study up to n_trials and reuses it when it has enough
    params = SearchParams(space=SPACE, fixed=FIXED, storage=url, study_name="pair", n_trials=4)
    assert len(trials_table(run_until(params))) == 4
    params = SearchParams(space=SPACE, fixed=FIXED, storage=url, study_name="pair", n_trials=5)
    table = trials_table(run_until(params))
    assert len(table) == 5 and table["value"].is_monotonic_increasing  # best (lowest) first


def test_a_study_with_other_settings_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    open_study(SearchParams(space=SPACE, fixed=FIXED, storage=url, study_name="s"))
    with pytest.raises(ValueError, match="choose another study_name"):
        open_study(SearchParams(space=SPACE, fixed=FIXED | {"p": 7}, storage=url, study_name="s"))


def test_the_authors_objective_is_the_mean_validation_loss_of_the_last_10_epochs():
    fixed = FIXED | {"epochs": 15}
    params = SearchParams(space=SPACE, fixed=fixed)
    point = {"dropout": 0.1, "lr": 1e-2}
    value = objective(params, optuna.trial.FixedTrial(point))
    # the same run evaluated after every epoch: epochs 6..15 are the last ten
    run = params.trial_params(point)
    task = run.task("miiii")
    config = run.train_config(run.grokfast_lambda, None)
    config = type(config)(**{**config.__dict__, "eval_log_points": None, "eval_every": 1})
    h = train(run.model(task), task, config, grad_hook=run.grokfast(run.grokfast_lambda)).history
    assert value == pytest.approx(h.loc[h["step"] >= 6, "valid_loss"].mean(), rel=1e-6)
    assert len(h.loc[h["step"] >= 6]) == 10
