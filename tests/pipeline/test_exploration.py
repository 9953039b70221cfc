"""Exploration runs: changed parameters never overwrite the profile's results.

The runner runs stand-ins for notebooks 01 and 07 (same names, so the registry's parameters,
reads and folders apply; tiny code, so a run takes seconds): 01 writes a table from its
parameters, 07 reads 01's table and records a claim that holds only for the profile's values."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml

from rt_lib.claims.ledger import ledger
from rt_lib.experiment import PARAMETERS_FILE
from rt_lib.pipeline import runner

PROJECT = Path(runner.__file__).resolve().parents[2]

# The real notebooks' parameters cells (the stand-ins must validate as they do).
P01 = "".join(c["source"] for c in nbformat.read(PROJECT / "notebooks/01_modular_addition.ipynb", 4).cells
              if "parameters" in c.metadata.get("tags", []))
P07 = "widths = None\n"
CODE01 = """\
import pandas as pd
from rt_lib.claims.ledger import ledger_of
from rt_lib.experiments.modular_addition import EXPERIMENT
from rt_lib.runtime.io import save_csv
params, out, claims = EXPERIMENT.start(globals())
save_csv(pd.DataFrame({"p": [params.p], "lr": [params.lr]}), out / "metrics.csv")
claims.ours("p-is-59", "p = 59", f"p = {params.p}", params.p == 59)
for i in ledger_of("01_modular_addition"):
    claims.not_checked(i, "a stand-in notebook")
claims.done()
"""
CODE07 = """\
import pandas as pd
from rt_lib.claims.ledger import ledger_of
from rt_lib.experiments.table1 import EXPERIMENT
from rt_lib.runtime.io import results_dir, save_csv
params, out, claims = EXPERIMENT.start(globals())
read = pd.read_csv(results_dir("01_modular_addition") / "metrics.csv")
save_csv(read, out / "table1.csv")
claims.ours("reads-p-59", "p = 59", f"p = {int(read.p[0])}", int(read.p[0]) == 59)
for i in ledger_of("07_table1"):
    claims.not_checked(i, "a stand-in notebook")
claims.done()
"""


def _notebook(path: Path, params: str, code: str) -> None:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture(scope="module")
def books(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("explore") / "notebooks"
    folder.mkdir()
    _notebook(folder / "01_modular_addition.ipynb", P01, CODE01)
    _notebook(folder / "07_table1.ipynb", P07, CODE07)
    return folder


def _run_all(books: Path, results: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RT_NOTEBOOKS": str(books), "RT_RESULTS": str(results),
           "TQDM_DISABLE": "1", "RT_THREADS": "1"}
    env.pop("RT_RUN", None)
    return subprocess.run([sys.executable, "-m", "rt_lib.pipeline.runner", "--jobs", "2", *args],
                          env=env, capture_output=True, text=True, timeout=600, cwd=PROJECT)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_an_exploration_run_leaves_the_profile_byte_for_byte_and_reports_its_claims(books, tmp_path):
    results = tmp_path / "results"
    profile = _run_all(books, results)
    assert profile.returncode == 0, profile.stderr
    assert (f"claims of the papers (5 recorded, {len(ledger())} in the ledger): 0 holds, 0 fails, "
            "0 not shown, 5 not checked") in profile.stdout
    assert "claims of our own (2, counted apart): 2 holds, 0 fails" in profile.stdout
    before = {name: _snapshot(results / name) for name in ("01_modular_addition", "07_table1")}
    manifest_before = (results / "manifest.json").read_bytes()

    explored = _run_all(books, results, "--set", "p=61", "--set", "lr=0.02")
    # a claim that fails in an exploration run is reported, and the run finishes
    assert explored.returncode == 0, explored.stderr
    assert "claims of our own (2, counted apart): 0 holds, 2 fails" in explored.stdout
    assert ("01_modular_addition+lr=0.02,p=61: fails (ours): p-is-59 (reduced task: p = 61 of 97): "
            "p = 61") in explored.stdout
    for name in ("01_modular_addition", "07_table1"):
        assert _snapshot(results / name) == before[name], name  # the profile's, untouched
    mine = results / "01_modular_addition+lr=0.02,p=61"
    assert pd.read_csv(mine / "metrics.csv").to_dict("list") == {"p": [61], "lr": [0.02]}
    record = yaml.safe_load((mine / PARAMETERS_FILE).read_text())
    assert record["changes"] == {"lr": 0.02, "p": 61} and record["parameters"]["p"] == 61
    # 07 read the exploration's table, not the profile's, and is an exploration run itself
    reader = results / "07_table1+lr=0.02,p=61"
    assert pd.read_csv(reader / "table1.csv")["p"].tolist() == [61]
    assert yaml.safe_load((reader / PARAMETERS_FILE).read_text())["reads"][
        "01_modular_addition"] == mine.name
    assert not (results / "07_table1" / PARAMETERS_FILE).exists()
    assert (results / "manifest.json").read_bytes() != manifest_before  # its own entries added

    again = _run_all(books, results)  # the profile is still up to date: nothing reruns
    assert again.returncode == 0 and again.stdout.count("is up to date") == 2, again.stdout
    listing = _run_all(books, results, "--list")
    assert "01_modular_addition+lr=0.02,p=61" in listing.stdout and "exploration" in listing.stdout


def test_a_failing_claim_fails_a_profile_run(books, tmp_path):
    """The profile's own run asserts its claims (nbval and run_all catch a regression): here
    07 runs alone and reads a profile table of 01 that says p = 61."""
    results = tmp_path / "results"
    (results / "01_modular_addition").mkdir(parents=True)
    pd.DataFrame({"p": [61], "lr": [0.003]}).to_csv(results / "01_modular_addition" / "metrics.csv",
                                                   index=False)
    out = _run_all(books, results, "--only", "07")
    assert out.returncode == 1 and "ClaimsFailed" in out.stderr, out.stderr
    assert "claims of our own" not in out.stdout  # a failed notebook is not summarised as done
    assert (results / "07_table1" / "07_table1.failed.ipynb").exists()


def test_a_live_notebook_with_changed_parameters_writes_to_its_own_folder(results_tmp,
                                                                         monkeypatch):
    from rt_lib.experiments.table1 import EXPERIMENT

    monkeypatch.delenv("RT_RUN", raising=False)
    monkeypatch.setattr("rt_lib.runtime.io._folders", {})
    params, out, claims = EXPERIMENT.start({"widths": [16]})
    assert out == results_tmp / "07_table1+widths=[16]" and not claims.strict
    assert (out / PARAMETERS_FILE).exists()
    params, out, claims = EXPERIMENT.start({"widths": None})
    assert out == results_tmp / "07_table1" and claims.strict
