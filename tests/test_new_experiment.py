"""scripts/new_experiment.py: a new experiment's module, notebook and paper config, scaffolded into
a checkout of their own, run as the runner would run them in the paper profile's smoke test."""

from __future__ import annotations

import importlib.util
import json
import sys

import pandas as pd
import pytest
import yaml

import rt_lib.experiment
from rt_lib.runtime.io import PROJECT_ROOT
from rt_lib.runtime.params import cell_fields, parameters_cell


@pytest.fixture
def scaffolded(tmp_path, monkeypatch, load_script):
    """The experiment 16_probe_grid written into an empty checkout, its module importable as
    rt_lib.experiments.probe_grid, configs/ that checkout's."""
    root = tmp_path / "checkout"
    (root / "notebooks").mkdir(parents=True)
    module, notebook, config = load_script("new_experiment").scaffold(16, "probe_grid", "a probe", root)
    spec = importlib.util.spec_from_file_location("rt_lib.experiments.probe_grid", module)
    loaded = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "rt_lib.experiments.probe_grid", loaded)
    spec.loader.exec_module(loaded)
    monkeypatch.setattr(rt_lib.experiment, "CONFIGS", root / "configs")
    return {"root": root, "module": loaded, "notebook": notebook, "config": config}


def _cells(path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def test_the_scaffold_writes_the_module_the_notebook_and_a_paper_config_naming_every_parameter(
        scaffolded):
    root, module = scaffolded["root"], scaffolded["module"]
    assert scaffolded["notebook"] == root / "notebooks" / "16_probe_grid.ipynb"
    cls = module.EXPERIMENT.params
    assert module.EXPERIMENT.name == "16_probe_grid" and cls.__name__ == "ProbeGridParams"
    cells = _cells(scaffolded["notebook"])
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# 16 · a probe")
    assert cells[-1]["cell_type"] == "markdown" and "".join(cells[-1]["source"]).startswith("## ")
    tagged = [c for c in cells if "parameters" in c["metadata"].get("tags", [])]
    assert len(tagged) == 1 and cells[1] is tagged[0]
    # the cell scripts/parameters_cells.py writes (a test fails on a committed cell that differs)
    assert "".join(tagged[0]["source"]) == parameters_cell(cls, "rt_lib/experiments/probe_grid.py")
    assert len({c["id"] for c in cells}) == len(cells)
    config = yaml.safe_load(scaffolded["config"].read_text())
    assert list(config) == cell_fields(cls)  # every parameter the notebook shows, named
    assert cls(**config) == cls()  # the CPU profile's values, valid, until set to the paper's


def test_the_scaffolded_experiment_runs_in_its_smoke_profile(scaffolded, results_tmp,
                                                             run_context):
    exp = scaffolded["module"].EXPERIMENT
    injected = exp.profile_config("paper-smoke")  # what papermill injects after the cell
    assert injected["restarts"] == 1 and injected["steps"] == 2  # the smoke cuts applied
    run_context(profile="paper-smoke", results_root=results_tmp / "paper-smoke")
    namespace: dict = {}
    code = ["".join(c["source"]) for c in _cells(scaffolded["notebook"]) if c["cell_type"] == "code"]
    exec(code[0], namespace)  # the parameters cell, then the profile's values, then the rest
    namespace.update(injected)
    for source in code[1:]:
        exec(source, namespace)
    out = namespace["out"]
    assert out == results_tmp / "paper-smoke" / "16_probe_grid"
    metrics = pd.read_csv(out / "metrics.csv")
    assert sorted(metrics["model"].unique()) == ["random transformer", "trained transformer"]
    claims = pd.read_csv(out / "claims.csv", keep_default_na=False)
    (row,) = claims.itertuples()
    # one restart a side in the smoke test: the comparison is not shown, as the verdicts say
    assert row.id == "probe-grid-trained-beats-random" and row.status == "not shown"


@pytest.mark.parametrize("args, message", [
    (["15", "other"], "notebook number 15 is taken: 15_random_miiii.ipynb"),
    (["16", "Bad-Name"], "name must be a module name in snake_case"),
    (["16", "class"], "name must be a module name"),
    (["16", "miiii"], "rt_lib/tasks/miiii.py exists"),
    (["100", "x"], "NN must be a notebook number from 01 to 99"),
])
def test_a_taken_number_or_a_bad_name_is_refused_before_anything_is_written(args, message, capsys,
                                                                           load_script):
    before = sorted(p.name for p in (PROJECT_ROOT / "notebooks").iterdir())
    assert load_script("new_experiment").main(args) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in (PROJECT_ROOT / "notebooks").iterdir()) == before
