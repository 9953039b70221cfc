"""The GPU profile (configs/gpu/): the claims the CPU cannot show, at what one GPU reaches in
minutes.  It covers some notebooks only; its smoke test runs them end to end on the CPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rt_lib.experiments import miiii_common, miiii_training
from rt_lib.pipeline import plan as planning
from rt_lib.pipeline import runner
from rt_lib.pipeline.registry import registry
from rt_lib.runtime.context import CONFIGS
from rt_lib.runtime.io import PROJECT_ROOT

COVERED = sorted(p.stem for p in (CONFIGS / "gpu").glob("*.yaml"))


def test_the_gpu_profile_runs_the_notebooks_it_has_configs_for_each_naming_every_parameter():
    jobs = runner.plan("gpu", None, {})
    assert [job.name for job in jobs] == COVERED
    for job in jobs:  # every parameter named: none falls back to the CPU profile's unseen
        assert set(job.parameters) == runner.notebook_parameters(job.notebook), job.name
        registry()[job.name].params(**job.parameters)  # raises on a bad value
        assert job.folder == job.name
        assert job.output_dir.parent.name == "gpu"


def test_each_gpu_config_states_its_expected_minutes():
    for name in COVERED:
        text = (CONFIGS / "gpu" / f"{name}.yaml").read_text()
        assert "Expected:" in text and ("estimate" in text or "measured" in text), name


def test_the_gpu_profiles_readers_read_its_own_runs():
    """07 reads the GPU profile's 01-04; 13 asks for exactly notebook 11's GPU run of T_miiii
    (else it would train it again)."""
    jobs = {job.name: job for job in runner.plan("gpu", None, {})}
    assert {"01_modular_addition", "02_needle_in_a_haystack", "03_decimal_addition",
            "04_parentheses"} <= set(jobs)  # what 07 reads
    main = miiii_common.MiiiiParams(**jobs[miiii_training.NAME].parameters)
    for job in jobs.values():
        if "train_params" in job.parameters:
            again = miiii_common.training_params(job.parameters["train_params"], ("miiii",))
            key = main.run_key("miiii", main.grokfast_lambda)
            assert again.run_key("miiii", main.grokfast_lambda) == key, job.name


def test_a_notebook_the_gpu_profile_does_not_cover_is_refused_by_name():
    uncovered = next(n for n in registry() if n not in COVERED)
    with pytest.raises(runner.RunError, match=f"no config for {uncovered}"):
        runner.plan("gpu", [uncovered[:2]], {})
    assert runner.main(["--profile", "gpu", "--only", uncovered[:2]]) == 2


def test_a_covered_notebook_reading_an_uncovered_one_is_refused(tmp_path, monkeypatch):
    """A profile config for 07 without 01-04's would read results that never exist."""
    configs = tmp_path / "configs"
    (configs / "partial").mkdir(parents=True)
    (configs / "partial" / "07_table1.yaml").write_text("widths: null\n")
    monkeypatch.setattr(planning, "CONFIGS", configs)
    with pytest.raises(runner.RunError, match="07_table1 reads 01_modular_addition"):
        planning.covered(planning.select(None), "partial", explicit=False)


def test_gpu_profile_claims_are_recorded_without_failing_the_run():
    """Between the CPU profile (nbval) and the papers' scale, a GPU run is evidence: a claim
    that does not show there is recorded, not an error."""
    from rt_lib.experiment import STRICT_PROFILES

    assert "gpu" not in STRICT_PROFILES and {"cpu", "paper"} <= set(STRICT_PROFILES)


@pytest.mark.long
def test_the_gpu_profile_smoke_test_runs_end_to_end(tmp_path):
    """``./run_all.sh --profile gpu --smoke``: every covered notebook at the GPU profile's shapes
    for a handful of steps, readers reading the smoke runs; 11 and 13 run in
    tests/jobs/test_gpu_job.py, as a GPU job runs them (scripts/gpu_run.sh --smoke 11,13)."""
    if os.environ.get("RT_TEST_SMOKE") == "0":
        pytest.skip("RT_TEST_SMOKE=0: the smoke runs left out")
    here = [n for n in COVERED if n[:2] not in ("11", "13")]
    env = {**os.environ, "RT_RESULTS": str(tmp_path / "results"), "TQDM_DISABLE": "1"}
    proc = subprocess.run([sys.executable, "-m", "rt_lib.pipeline.runner", "--profile", "gpu", "--smoke",
                           "--jobs", "1", "--no-footprints", "--only", ",".join(n[:2] for n in here)],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    root = tmp_path / "results" / "gpu-smoke"
    assert sorted(p.name for p in root.iterdir() if p.name[:2].isdigit()) == here
    for name in here:
        assert (root / name / f"{name}.ipynb").exists() and (root / name / "claims.csv").exists()


def test_measured_gpu_hours_are_the_step_times_steps_and_runs_and_blank_elsewhere():
    import pandas as pd

    from rt_lib.training.footprint import measured_hours

    table = pd.DataFrame({"notebook": ["01_x", "01_x"], "step": ["a d=8", "b d=8"],
                          "steps": [50_000, 10], "runs": [10.0, 2.0]})
    out = measured_hours(table, [{"gpu": "H200", "ms_per_step": {"01_x": {"a d=8": 12.2}}}])
    assert out["H200_hours_measured"][0] == pytest.approx(0.0122 * 50_000 * 10 / 3600)
    assert out["H200_hours_measured"].isna().tolist() == [False, True]


def test_every_measured_gpu_step_names_a_step_of_the_paper_profile():
    """benchmarks/gpu_step_times.yaml's keys are rt_lib.training.footprint's labels of the paper
    profile's steps (a renamed label would silently leave a row an estimate)."""
    import yaml

    for entry in yaml.safe_load((PROJECT_ROOT / "benchmarks" / "gpu_step_times.yaml").read_text()):
        for name, steps in entry["ms_per_step"].items():
            exp = registry()[name]
            labels = {shape.label for shape in exp.step_shapes(exp.profile_params("paper"))}
            assert set(steps) <= labels, (name, set(steps) - labels)


def test_the_chunk_listing_names_each_chunks_latest_kept_evidence(tmp_path, monkeypatch, capsys,
                                                                  results_tmp):
    """--list --profile gpu marks a chunk with the latest kept run of that profile holding all
    its notebooks: a later run holding only some of them, or another profile's, does not
    count."""
    import shutil

    from rt_lib.pipeline.report import list_runs
    from rt_lib.site import evidence

    (kept,) = (PROJECT_ROOT / "evidence" / "gpu").glob("2026-11-27T1914-h100")
    root = tmp_path / "evidence"
    shutil.copytree(kept, root / "gpu" / "2026-11-27T1914-h100")
    shutil.copytree(kept, root / "gpu" / "2026-11-29T0900-h200")
    shutil.rmtree(root / "gpu" / "2026-11-29T0900-h200" / "13_miiii_neurons")
    other = shutil.copytree(kept, root / "paper" / "2026-11-30T0900-h200") / "provenance.yaml"
    other.write_text(other.read_text().replace("profile: gpu\n", "profile: paper\n"))
    monkeypatch.setattr(evidence, "EVIDENCE_DIR", root)

    def chunk_lines() -> list[str]:
        list_runs("gpu")
        return [line for line in capsys.readouterr().out.splitlines() if "~" in line]

    assert [r.profile for r in evidence.kept_runs()] == ["gpu", "gpu", "paper"]
    lines = chunk_lines()
    assert "11_miiii_training, 13_miiii_neurons  [kept: 2026-11-27T1914-h100]" in lines[0]
    assert all("[no evidence yet]" in line for line in lines[1:]) and len(lines) > 1
    shutil.copytree(kept, root / "gpu" / "2026-11-30T1000-h100")
    assert "[kept: 2026-11-30T1000-h100]" in chunk_lines()[0]


def test_the_chunk_listing_names_the_notebooks_in_no_chunk(capsys):
    """A notebook with a GPU config that no chunk runs (a reader, or one taken out until it is
    planned again) is named, so that nobody takes the chunk list for the whole profile."""
    import yaml

    from rt_lib.pipeline.report import list_runs

    listed = yaml.safe_load((CONFIGS / "gpu_chunks.yaml").read_text())
    numbers = {int(n) for entry in listed for n in entry["notebooks"]}
    expected = [name for name in COVERED if int(name[:2]) not in numbers]
    list_runs("gpu")
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "in no chunk:" in x]
    assert expected and line.split("in no chunk: ")[1].split(" (")[0] == ", ".join(expected)
