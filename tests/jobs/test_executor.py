"""rt_lib.jobs.executor: runs as submitit jobs (local here; Slurm as far as sbatch's input)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import cloudpickle
import nbformat
import pandas as pd
import pytest
import torch

from rt_lib.experiments.common import train_grid
from rt_lib.experiments.modular_addition import ModularAdditionParams
from rt_lib.jobs import executor as ex
from rt_lib.runtime.io import PROJECT_ROOT

# The job functions below live in this test module, which a job's process cannot import: they
# travel by value, as a notebook's own functions would.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

LOCAL = ex.ExecutorConfig(kind="local", local_parallelism=2, poll_s=0.1, time_min=5)


def _square_unless_told_to_die(x: int, folder: str) -> int:
    """x², recording each run that got that far; the job of x = 1 kills itself (SIGKILL, as an
    out-of-memory kill or a pre-emption would) while ``<folder>/die`` exists."""
    if x == 1 and Path(folder, "die").exists():
        os.kill(os.getpid(), signal.SIGKILL)
    with open(Path(folder, "ran.txt"), "a") as f:
        f.write(f"{x}\n")
    return x * x


def test_inline_runs_in_this_process_and_stores_nothing(tmp_path):
    jobs = [ex.Job(f"j{x}", _square_unless_told_to_die, (x, str(tmp_path))) for x in (2, 3)]
    assert ex.run_jobs(jobs, tmp_path / "store", ex.ExecutorConfig()) == [4, 9]
    assert not (tmp_path / "store").exists()


def test_a_killed_local_job_fails_by_name_and_a_rerun_resubmits_only_it(tmp_path):
    (tmp_path / "die").touch()
    store = tmp_path / "store"
    jobs = [ex.Job(f"x{x}", _square_unless_told_to_die, (x, str(tmp_path))) for x in (0, 1, 2)]
    with pytest.raises(ex.JobsFailed, match=r"1 of 3 job\(s\)[\s\S]*x1: job \d+ failed"):
        ex.run_jobs(jobs, store, LOCAL)
    assert sorted((tmp_path / "ran.txt").read_text().split()) == ["0", "2"]
    assert ex.is_stored(store, "x0") and ex.is_stored(store, "x2") and not ex.is_stored(store, "x1")

    (tmp_path / "die").unlink()
    assert ex.run_jobs(jobs, store, LOCAL) == [0, 1, 4]
    # x0 and x2 were not run again: only the killed job was resubmitted
    assert sorted((tmp_path / "ran.txt").read_text().split()) == ["0", "1", "2"]
    assert ex.run_jobs(jobs, store, LOCAL) == [0, 1, 4]  # all stored: nothing submitted
    assert (tmp_path / "ran.txt").read_text().count("\n") == 3


def _pid(_x: int) -> int:
    return os.getpid()


def test_runs_per_job_trains_several_runs_in_one_job_process(tmp_path):
    jobs = [ex.Job(f"p{x}", _pid, (x,)) for x in range(3)]
    pids = ex.run_jobs(jobs, tmp_path / "store", ex.ExecutorConfig(
        kind="local", local_parallelism=2, poll_s=0.1, time_min=5, runs_per_job=3))
    assert len(set(pids)) == 1 and pids[0] != os.getpid()
    assert [len(p) for p in ex.packs(jobs, 2)] == [2, 1]


def test_a_job_killed_half_way_keeps_the_runs_it_finished(tmp_path):
    (tmp_path / "die").touch()
    store = tmp_path / "store"
    packed = ex.ExecutorConfig(kind="local", local_parallelism=2, poll_s=0.1, time_min=5,
                               runs_per_job=2)
    jobs = [ex.Job(f"x{x}", _square_unless_told_to_die, (x, str(tmp_path))) for x in (0, 1, 2)]
    with pytest.raises(ex.JobsFailed, match=r"x1: job \d+ failed") as failed:
        ex.run_jobs(jobs, store, packed)
    assert "x0" not in str(failed.value) and "x2" not in str(failed.value)
    assert ex.is_stored(store, "x0") and ex.is_stored(store, "x2") and not ex.is_stored(store, "x1")
    (tmp_path / "die").unlink()
    assert ex.run_jobs(jobs, store, packed) == [0, 1, 4]
    assert sorted((tmp_path / "ran.txt").read_text().split()) == ["0", "1", "2"]


def test_job_keys_must_be_unique(tmp_path):
    job = ex.Job("same", _square_unless_told_to_die, (2, str(tmp_path)))
    with pytest.raises(ValueError, match="unique"):
        ex.run_jobs([job, job], tmp_path, LOCAL)


def _assert_same_grid(inline, local) -> None:
    """The same metrics (wall times aside) and bit-identical weights, run by run."""
    drop = ["wall_time_s"]
    pd.testing.assert_frame_equal(inline.metrics.drop(columns=drop),
                                  local.metrics.drop(columns=drop))
    for key, model in inline.models.items():
        theirs = local.models[key].state_dict()
        assert all(torch.equal(v, theirs[k]) for k, v in model.state_dict().items())


def test_a_grid_as_local_jobs_equals_the_inline_grid(tmp_path, monkeypatch, run_context):
    # eval_rows: the smoke test's capped evaluation sets, a task wrapper that travels too
    params = ModularAdditionParams(p=7, widths=(8,), models=("random transformer",), restarts=2,
                                   steps=20, batch_size=16, warmup_steps=2, eval_every=10,
                                   eval_rows=5)
    task = params.task()
    inline = train_grid(task, params)
    run_context(executor=ex.as_fields(LOCAL))
    store = tmp_path / "jobs"
    local = train_grid(task, params, job_store=str(store))
    assert len(list(store.glob("random_transformer_d8_r*_*.pt"))) == 2  # one job per restart
    _assert_same_grid(inline, local)
    # a changed setting is another run: its own key, not the stored result
    other = train_grid(task, ModularAdditionParams(**{**params.__dict__, "seed": 1}),
                       job_store=str(store))
    assert len(list(store.glob("random_transformer_d8_r*_*.pt"))) == 4
    assert not other.metrics["seed"].isin(local.metrics["seed"]).any()


def test_a_language_grid_as_local_jobs_reads_its_streams_from_one_file(tmp_path, monkeypatch,
                                                                       run_context):
    """Notebook 08 under --executor: the jobs memory-map the token streams written once to the
    store and train exactly the inline models."""
    from rt_lib.tasks import LanguageModelling

    gen = torch.Generator().manual_seed(0)
    task = LanguageModelling(torch.randint(0, 40, (50_000,), generator=gen),
                             torch.randint(0, 40, (2_000,), generator=gen), d_vocab=40, n_ctx=12)
    params = ModularAdditionParams(widths=(8,), models=("random transformer",), restarts=2,
                                   steps=6, batch_size=4, warmup_steps=1, eval_every=3)
    inline = train_grid(task, params)
    run_context(executor=ex.as_fields(LOCAL))
    local = train_grid(task, params, job_store=str(tmp_path / "jobs"))
    assert len(list((tmp_path / "jobs" / "data").glob("*-streams-*.pt"))) == 1
    _assert_same_grid(inline, local)


def test_settings_are_checked_by_name(tmp_path, run_context):
    with pytest.raises(ValueError, match="partitoin"):
        ex.ExecutorConfig.from_mapping("slurm", {"partitoin": "gpu"})
    with pytest.raises(ValueError, match="kind must be one of"):
        ex.ExecutorConfig(kind="cluster")
    with pytest.raises(ValueError, match="executor.time_min"):
        ex.ExecutorConfig(kind="slurm", time_min=0)
    config = ex.load_config("slurm", overrides={"partition": "a100"})
    assert config.partition == "a100" and config.gpus_per_node == 1  # configs/slurm.yaml's
    run_context(executor=ex.as_fields(config))  # what a notebook is handed
    assert ex.current() == config


def test_slurm_submits_one_job_array_with_the_configured_resources(tmp_path, monkeypatch):
    """No cluster here: stand-ins for ``sbatch`` (records what submitit hands it) and ``srun``."""
    bin_dir, record = tmp_path / "bin", tmp_path / "sbatch"
    bin_dir.mkdir()
    fake = bin_dir / "sbatch"
    fake.write_text(f"#!/bin/sh\necho \"$@\" > {record}.args\nfor a; do last=$a; done\n"
                    f"cp \"$last\" {record}.script\necho 'Submitted batch job 4242'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    srun = bin_dir / "srun"  # submitit checks that it is on a cluster by finding srun
    srun.write_text("#!/bin/sh\nexit 0\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    config = ex.ExecutorConfig(kind="slurm", partition="gpu-a100", time_min=90, gpus_per_node=1,
                               cpus_per_task=6, mem_gb=40, array_parallelism=2, account="proj",
                               setup=("module load cuda",), additional={"constraint": "a100"})
    executor = ex.make_executor(config, tmp_path / "submitit", name="04_parentheses")
    with executor.batch():
        jobs = [executor.submit(ex._run_and_store, _square_unless_told_to_die, (x, str(tmp_path)),
                                str(tmp_path / f"x{x}.pt")) for x in range(3)]
    script = Path(f"{record}.script").read_text()
    for line in ("#SBATCH --array=0-2%2", "#SBATCH --partition=gpu-a100", "#SBATCH --time=90",
                 "#SBATCH --gpus-per-node=1", "#SBATCH --cpus-per-task=6", "#SBATCH --mem=40GB",
                 "#SBATCH --account=proj", "#SBATCH --constraint=a100",
                 "#SBATCH --job-name=04_parentheses", "module load cuda"):
        assert line in script, line
    assert sys.executable in script  # the job runs this environment's Python
    assert [j.job_id for j in jobs] == ["4242_0", "4242_1", "4242_2"]


def _notebook(path: Path, params: str, code: str) -> None:
    cells = [nbformat.v4.new_code_cell(params, metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell(code)]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


GRID_NOTEBOOK = """\
from rt_lib.experiments.common import run_task_grid
from rt_lib.experiments.modular_addition import ModularAdditionParams
from rt_lib.runtime.io import results_dir, save_csv
params = ModularAdditionParams(p=7, widths=(8,), models=("random transformer",),
                               restarts=restarts, steps=20, batch_size=16, warmup_steps=2,
                               eval_every=10)
grid = run_task_grid("01_grid", params)
save_csv(grid.metrics.drop(columns="wall_time_s"), results_dir("01_grid") / "metrics.csv")
"""


def test_run_all_with_the_local_executor_matches_inline(tmp_path):
    """A small notebook with 2 restarts: ``--executor local`` runs them as jobs, same table."""
    books = tmp_path / "notebooks"
    books.mkdir()
    _notebook(books / "01_grid.ipynb", "restarts = 2\n", GRID_NOTEBOOK)
    tables = {}
    for kind in ("inline", "local"):
        results = tmp_path / kind
        env = {**os.environ, "RT_NOTEBOOKS": str(books), "RT_RESULTS": str(results),
               "TQDM_DISABLE": "1"}
        proc = subprocess.run([sys.executable, "-m", "rt_lib.pipeline.runner", "--executor", kind],
                              env=env, cwd=PROJECT_ROOT, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        tables[kind] = (results / "01_grid" / "metrics.csv").read_text()
        if kind == "local":
            executed = (results / "01_grid" / "01_grid.ipynb").read_text()
            assert "2 of 2 job(s) to run as local jobs" in executed
            assert not (results / "01_grid" / "resume").exists()  # the job store went with it
    assert tables["inline"] == tables["local"]


def test_the_runner_refuses_an_unknown_executor_setting(tmp_path):
    from rt_lib.pipeline import runner

    with pytest.raises(SystemExit):
        runner.main(["--executor", "cluster"])
    assert runner.main(["--executor", "slurm", "--set", "executor.partitoin=gpu"]) == 2


def test_miiii_runs_as_local_jobs_equal_the_inline_runs(tmp_path, monkeypatch, run_context):
    """Notebook 11's runs (T_miiii and its λ = 0 baseline) trained by jobs into their folders,
    then loaded by the notebook as finished runs: the same histories and weights as inline."""
    from rt_lib.experiments.miiii_common import MiiiiParams, run

    params = MiiiiParams(p=7, variants=("miiii",), d_model=16, n_heads=2, epochs=20,
                         eval_points=4, n_snapshots=2, train_fraction=0.6, baseline_epochs=20,
                         dropout_zero=False)
    monkeypatch.setenv("RT_RESULTS", str(tmp_path / "inline"))
    inline = run(params)
    monkeypatch.setenv("RT_RESULTS", str(tmp_path / "local"))
    run_context(executor=ex.as_fields(LOCAL))
    local = run(params)
    assert list(local) == list(inline) == ["T_miiii", "T_miiii (λ = 0)"]
    stored = sorted(p.name for p in (tmp_path / "local").rglob("jobs/*.pt"))
    assert stored == sorted(f"{r.folder.name}.pt" for r in local.values())  # one job per run
    for label, r in inline.items():
        assert local[label].result.steps_done == 20
        pd.testing.assert_frame_equal(local[label].result.history.drop(columns="time_s"),
                                      r.result.history.drop(columns="time_s"))
        assert torch.equal(local[label].result.model.W_E, r.result.model.W_E)


def test_optuna_trial_batches_as_local_jobs_share_a_journal_file(tmp_path, monkeypatch, run_context):
    """Notebook 14 under --executor local: batches of trials as jobs, each a worker of one study
    kept in Optuna's journal file (no database server); a rerun adds only what is missing."""
    import optuna

    from rt_lib.experiments.miiii_search import SearchParams, run_until

    monkeypatch.setenv("RT_RESULTS", str(tmp_path / "results"))
    run_context(executor=ex.as_fields(LOCAL))
    journal = f"journal:{tmp_path / 'study.log'}"
    params = SearchParams(space={"lr": [1e-2, 3e-3]}, study_name="j", n_trials=3, storage=journal,
                          fixed={"p": 5, "epochs": 12, "eval_points": 2, "d_model": 8,
                                 "n_heads": 2})
    study = run_until(params)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 3
    assert len({t.user_attrs["worker"] for t in done}) == 2  # two jobs, two workers
    assert (tmp_path / "study.log").stat().st_size > 0
    stored = sorted(p.name for p in (tmp_path / "results").rglob("jobs/*.pt"))
    assert stored == ["trials0_batch0.pt", "trials0_batch1.pt"]
    more = run_until(SearchParams(**{**params.__dict__, "n_trials": 4}))
    assert len([t for t in more.trials if t.state == optuna.trial.TrialState.COMPLETE]) == 4
    stored = sorted(p.name for p in (tmp_path / "results").rglob("jobs/*.pt"))
    assert stored[-1] == "trials3_batch0.pt" and len(stored) == 3  # one job, for the trial missing


def test_mid_run_files_stay_in_the_running_notebooks_folder(tmp_path, monkeypatch, run_context):
    """Notebook 06 trains 01-04's grids: their checkpoints and job results go under 06's folder
    (removed when 06 finishes), never among 01's recorded results."""
    from rt_lib.jobs.resume import resume_dir

    monkeypatch.setenv("RT_RESULTS", str(tmp_path))
    run_context(run_key="0123456789abcdef0123", notebook="06_embedding_ablations")
    assert resume_dir("01_modular_addition") == str(
        tmp_path / "06_embedding_ablations" / "resume" / "0123456789abcdef" / "01_modular_addition")
    run_context(notebook="01_modular_addition")
    assert resume_dir("01_modular_addition") == str(
        tmp_path / "01_modular_addition" / "resume" / "0123456789abcdef")
    run_context(None)
    assert resume_dir("01_modular_addition") is None  # outside the runner nothing is kept
