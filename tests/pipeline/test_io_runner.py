import json
import os
import subprocess
import time

import pandas as pd
import pytest

from rt_lib.pipeline import runner
from rt_lib.pipeline import schedule as scheduling
from rt_lib.runtime.io import PROJECT_ROOT, atomic_path, results_dir, save_csv


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path):
    target = tmp_path / "metrics.csv"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half a fi")
            raise RuntimeError("killed")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.csv"]  # no temp file left


def test_save_csv_round_trip(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": [0.1, 0.25]})
    save_csv(df, tmp_path / "x.csv")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "x.csv"), df)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.csv"]


def test_save_csv_keeps_timings_out_of_the_table(tmp_path):
    df = pd.DataFrame({"model": ["a", "b"], "acc": [0.5, 1.0], "wall_time_s": [3.2, 4.1]})
    save_csv(df, tmp_path / "metrics.csv")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "metrics.csv"), df[["model", "acc"]])
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "metrics.timings.csv"), df)


def test_results_dir_follows_environment(results_tmp):
    assert results_dir("01_x") == results_tmp / "01_x" and (results_tmp / "01_x").is_dir()


def test_results_dir_is_anchored_on_the_package(monkeypatch, tmp_path):
    """From any working directory, results go beside notebooks/ and run_all.sh (the checkout),
    named without creating anything."""
    monkeypatch.delenv("RT_RESULTS", raising=False)
    monkeypatch.delenv("RT_RUN", raising=False)
    monkeypatch.delenv("RT_NOTEBOOKS", raising=False)
    monkeypatch.chdir(tmp_path)
    path = results_dir("01_x", create=False)
    assert path.is_absolute() and tmp_path not in path.parents
    checkout = path.parent.parent
    assert path.parent.name == "results"
    assert (checkout / "run_all.sh").is_file() and (checkout / "notebooks").is_dir()
    assert runner.notebooks_dir() == checkout / "notebooks"


def test_unknown_profile_is_rejected_and_nothing_written(results_tmp):
    with pytest.raises(runner.RunError, match="unknown profile .tpu.*cpu, gpu, long, paper"):
        runner.plan("tpu", None, {})
    assert not results_tmp.exists()


def test_unknown_notebook_is_rejected():
    with pytest.raises(runner.RunError, match="no notebook '99'"):
        runner.plan("cpu", ["99"], {})


def test_only_accepts_number_or_name():
    by_number = runner.plan("cpu", ["1"], {})
    by_name = runner.plan("cpu", ["01_modular_addition"], {})
    assert [j.name for j in by_number] == [j.name for j in by_name] == ["01_modular_addition"]


def test_unknown_parameter_is_rejected():
    with pytest.raises(runner.RunError, match=r"unknown parameter\(s\) \['modulus'\]"):
        runner.plan("cpu", ["01"], {"modulus": 5})
    # a parameter goes to the selected notebooks that declare it, and only to them
    by_name = {j.name: j for j in runner.plan("cpu", ["01", "07"], {"p": 61})}
    assert by_name["01_modular_addition"].parameters == {"p": 61}
    assert by_name["07_table1"].parameters == {}


def test_paper_profile_injects_its_config(tmp_path):
    (job,) = runner.plan("paper", ["01"], {}, results_root=tmp_path)
    assert job.parameters["p"] == 199 and job.parameters["widths"] == [16, 1024]
    assert job.output_dir == tmp_path / "paper" / "01_modular_addition"


def test_the_paper_profile_trains_three_runs_a_side_wherever_a_notebook_trains_several():
    """A comparison holds only on MIN_RUNS runs a side (DEVELOPERS.md, "Margins, not ties"), and
    the paper profile is the scale that claims not shown on the CPU name: every restart count
    and every list of seeds in it gives that many."""
    from rt_lib.claims.verdicts import MIN_RUNS

    counted = set()
    for job in runner.plan("paper", None, {}):
        p = job.parameters
        counts = {"restarts": p.get("restarts"),
                  "extra_seeds": None if "extra_seeds" not in p else 1 + len(p["extra_seeds"]),
                  "train_params.extra_seeds": None if "extra_seeds" not in (p.get("train_params") or {})
                  else 1 + len(p["train_params"]["extra_seeds"]),
                  "trained_seeds": None if "trained_seeds" not in p else len(p["trained_seeds"]),
                  "seeds": None if "seeds" not in p else len(p["seeds"])}
        for name, n in counts.items():
            if n is not None:
                assert n >= MIN_RUNS, f"{job.name}: {name} gives {n} runs a side"
                counted.add(job.name)
    # the notebooks that train runs to compare all name their count
    assert {"01", "02", "03", "04", "05", "06", "08", "10", "11", "12", "13", "15"} <= {
        name[:2] for name in counted}


def test_every_paper_config_names_only_known_parameters_and_validates():
    from rt_lib.experiments import miiii_common, miiii_training
    from rt_lib.pipeline.registry import registry

    jobs = runner.plan("paper", None, {})
    assert {job.name for job in jobs} == set(registry())  # every notebook has a paper config
    for job in jobs:  # every parameter named: none falls back to the CPU profile's value unseen
        assert set(job.parameters) == runner.notebook_parameters(job.notebook), job.name
    for job in jobs:
        params = registry()[job.name].params(**job.parameters)  # raises on a bad value
        assert job.folder == job.name  # the profile's own run: its own folder
        if hasattr(params, "trained_steps"):  # no CPU-profile caps at paper scale
            assert params.trained_steps is None and params.lstm_steps is None, job.name
    # notebooks 12, 13 and 15 must ask for exactly notebook 11's paper runs (else they retrain)
    main = miiii_common.MiiiiParams(
        **next(j for j in jobs if j.name == miiii_training.NAME).parameters)
    for job in jobs:
        if "train_params" in job.parameters:
            again = miiii_common.training_params(job.parameters["train_params"], ("miiii",))
            assert again.run_key("miiii", 0.5) == main.run_key("miiii", 0.5), job.name


def test_a_failing_notebook_is_kept_beside_the_results(tmp_path, monkeypatch):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("raise RuntimeError('boom')")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "notebooks" / "99_broken.ipynb"
    src.parent.mkdir()
    nbformat.write(nb, src)
    before = src.read_bytes()
    job = runner.Job("99_broken", src, {}, tmp_path / "results" / "99_broken")
    with pytest.raises(Exception, match="boom"):
        scheduling.execute(job, src)  # as with --update-notebooks: output = the notebook itself
    assert (job.output_dir / "99_broken.failed.ipynb").exists()
    assert sorted(p.name for p in src.parent.iterdir()) == ["99_broken.ipynb"]
    assert src.read_bytes() == before  # the committed notebook is left as it was


def test_main_reports_bad_arguments_with_exit_code_2(capsys, results_tmp):
    assert runner.main(["--profile", "nope"]) == 2
    assert "unknown profile 'nope'" in capsys.readouterr().err
    assert runner.main(["--set", "p"]) == 2
    assert not results_tmp.exists()


def test_set_values_are_parsed_as_yaml():
    assert runner.parse_sets(["p=59", "widths=[64, 128]", "batch_size=null"]) == {
        "p": 59, "widths": [64, 128], "batch_size": None}


@pytest.mark.parametrize("typed, value", [
    ("1e-3", 0.001), ("3E5", 300_000), ("1_000", 1000), ("1.0e9", 1e9), ("-2e-4", -2e-4),
    (".5e2", 50.0), ("1.5", 1.5), ("[1e3, 2E3]", [1000, 2000])])
def test_set_values_take_pythons_notation_for_numbers(typed, value):
    (parsed,) = runner.parse_sets([f"lr={typed}"]).values()
    assert parsed == value and type(parsed) is type(value)


def test_a_set_value_that_is_no_number_still_gets_its_error(capsys, results_tmp):
    assert runner.parse_sets(["lr='1e-3'"]) == {"lr": "1e-3"}  # quoted: a string, as typed
    for typed in ("abc", "1e", "'1e-3'"):
        assert runner.main(["--only", "01", "--set", f"lr={typed}"]) == 2
        assert "lr must be a number" in capsys.readouterr().err
    assert not results_tmp.exists()


def test_committed_notebooks_have_parameters_cell_and_outputs():
    for path in runner.available_notebooks().values():
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3"
        first_code = next(c for c in nb["cells"] if c["cell_type"] == "code")
        assert "parameters" in first_code["metadata"].get("tags", []), path.name
        assert any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), path.name


@pytest.mark.parametrize("fmt", ["png", "pdf", "svg"])
def test_a_figure_saved_twice_is_byte_identical(tmp_path, fmt):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rt_lib.runtime.io import save_figure

    paths = []
    for i in range(2):
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [1, 0, 2], label="x")
        ax.legend()
        paths.append(save_figure(fig, tmp_path / f"f{i}.{fmt}"))
        plt.close(fig)
        time.sleep(1.1 if i == 0 else 0)  # a timestamp in the file would now differ
    assert paths[0].read_bytes() == paths[1].read_bytes()


def test_ci_forces_one_thread_and_the_recorded_cpu_kernels(tmp_path):
    """.ci/run sources scripts/ci_env.sh before the test command, whose kernel_env.sh would
    otherwise keep whatever the environment set (the recorded outputs hold only under these)."""
    env = {**os.environ, "RT_THREADS": "4", "ATEN_CPU_CAPABILITY": "avx512", "MKL_CBWR": "AVX512",
           "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "OPENBLAS_CORETYPE": "SkylakeX"}
    shown = "echo $RT_THREADS $ATEN_CPU_CAPABILITY ${MKL_CBWR:--} $ONEDNN_MAX_CPU_ISA $OPENBLAS_CORETYPE"
    cpuinfo = tmp_path / "cpuinfo"
    for vendor, mkl in (("AuthenticAMD", "AVX2"), ("GenuineIntel", "-")):
        cpuinfo.write_text(f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: 25\n")
        out = subprocess.run(["bash", "-c", f"source scripts/ci_env.sh; source scripts/kernel_env.sh; "
                              f"{shown}"], cwd=PROJECT_ROOT, env=env | {"RT_CPUINFO": str(cpuinfo)},
                             capture_output=True, text=True)
        # MKL's pin only where it can give the recording's bits (an AMD CPU); on Intel it is unset
        assert out.stdout.split() == ["1", "avx2", mkl, "AVX2", "Haswell"], vendor
    # nothing that turns tests into skips or forces a comparison survives into CI
    env |= {"RT_TEST_SMOKE": "0", "RT_REGENERATE_FIGURES": "1", "RT_PLATFORM": "portable"}
    out = subprocess.run(["bash", "-c", "source scripts/ci_env.sh; echo \"$RT_TEST_SMOKE|"
                          "$RT_REGENERATE_FIGURES|$RT_PLATFORM|$RT_REQUIRE_DATA\""],
                         cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "|||1"
    ci = (PROJECT_ROOT / ".ci" / "run").read_text().splitlines()
    steps = [line.split("#")[0].strip() for line in ci]
    assert steps.index("source scripts/ci_env.sh") < steps.index("exec ./run_tests.sh")


def test_list_checks_result_files_against_the_manifest_before_counting_claims(tmp_path):
    """A claims.csv edited (or cut short) after its run is no run's outcome: --list reports the
    folder as damaged, naming the file, instead of counting its claims."""
    from rt_lib.claims.ledger import Claims
    from rt_lib.pipeline.registry import runs
    from rt_lib.runtime.manifest import Manifest

    folder = tmp_path / "01_modular_addition"
    record = Claims(folder, strict=False)
    record.check("rt-t1-modular", "1.000", False)
    manifest = Manifest(tmp_path)
    manifest.record("01_modular_addition", "k" * 64, "cpu", {}, folder, 1.0)
    assert runs(tmp_path)[0]["claims"] == "0/1" and runs(tmp_path)[0]["damaged"] is None
    text = (folder / "claims.csv").read_text()
    (folder / "claims.csv").write_text(text.replace("fails", "holds"))  # edited by hand
    (got,) = runs(tmp_path)
    assert got["claims"] is None
    assert "01_modular_addition/claims.csv does not match its recorded hash" in got["damaged"]


def _store_notebook(tmp_path, event: str | None):
    """A notebook whose one cell logs ``event`` in the run store as a training run would (a
    "hit": loaded; "stored": trained), and a job for it."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    code = "x = 1" if event is None else (
        "from rt_lib.runtime import store\n"
        f"store.current().log({event!r}, 'k' * 64, 'a run')")
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell(code)]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    src = tmp_path / "notebooks" / "98_store.ipynb"
    src.parent.mkdir(exist_ok=True)
    nbformat.write(nb, src)
    return runner.Job("98_store", src, {}, tmp_path / "results" / "98_store"), src


@pytest.mark.parametrize("event, kept", [("hit", True), ("found", True), ("stored", False),
                                         (None, False)])
def test_a_rerun_over_a_warm_store_keeps_the_notebooks_cold_seconds(tmp_path, monkeypatch,
                                                                    event, kept):
    """Re-recorded with every run loaded from the store, or found finished in its results
    folder (``found``: ``./run_all.sh --only 11,13`` after a run), a notebook keeps what its
    last cold run took (the schedulers start notebook 11 first by it); one that trained, or
    trains nothing, records its own wall time."""
    import nbformat

    from rt_lib.pipeline.plan import COLD_KEY, recorded_duration

    monkeypatch.setenv("RT_CACHE", str(tmp_path / "store"))
    monkeypatch.setenv("RT_CACHE_SESSION", "tests-1")
    job, src = _store_notebook(tmp_path, event)
    old = nbformat.read(str(src), as_version=4)
    old.metadata[COLD_KEY] = 877.5  # as the committed notebook 11 records its cold run
    nbformat.write(old, src)
    seconds = scheduling.execute(job, src)  # as with --update-notebooks: output = the notebook
    recorded = nbformat.read(str(src), as_version=4).metadata[COLD_KEY]
    assert recorded == (877.5 if kept else round(seconds, 1)) and seconds < 100
    assert recorded_duration(src) == recorded  # what the schedulers read
    # counted as a part of the command's session, which counts it too
    from rt_lib.runtime.store import RunStore

    store = RunStore(tmp_path / "store")
    assert store.stats("tests-1/98_store").events == store.stats("tests-1").events
    assert sum(store.stats("tests-1").events.values()) == (event is not None)
    assert sum(store.stats("tests-").events.values()) == 0  # a prefix is no session
    assert os.environ["RT_CACHE_SESSION"] == "tests-1"  # the command's own, given back


def test_the_schedulers_read_the_cold_seconds_before_papermills_duration(tmp_path):
    from rt_lib.pipeline.plan import COLD_KEY, recorded_duration

    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps({"metadata": {"papermill": {"duration": 11.2}}}))
    assert recorded_duration(path) == 11.2
    path.write_text(json.dumps({"metadata": {"papermill": {"duration": 11.2}, COLD_KEY: 877.5}}))
    assert recorded_duration(path) == 877.5
