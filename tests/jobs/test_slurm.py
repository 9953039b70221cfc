"""`--executor slurm` against a real one-node Slurm cluster (scripts/slurm_local.sh): job arrays
through real ``sbatch``, ``squeue`` and ``scancel``, results compared with the inline run's.

Without Slurm (no root apt-get to install it) these tests skip and say why; ``.ci/run`` sets
``RT_REQUIRE_SLURM=1``, under which a missing Slurm fails them.  The cluster is started once for
the module (seconds) and stopped after it; its node has this machine's cores, so its jobs share
them with whatever else runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import cloudpickle
import pytest

from rt_lib.jobs import executor as ex
from rt_lib.runtime.io import PROJECT_ROOT

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # job functions travel by value

SCRIPT = PROJECT_ROOT / "scripts" / "slurm_local.sh"
# What a CPU-only test cluster can give a job: no GPU, one CPU, a little memory, poll often
SLURM = ["--executor", "slurm", "--set", "executor.gpus_per_node=0",
         "--set", "executor.cpus_per_task=1", "--set", "executor.mem_gb=1",
         "--set", "executor.time_min=10", "--set", "executor.poll_s=0.5"]
# Notebook 01 at small settings: 3 models x 1 width x 2 restarts = 6 runs of 20 steps
SMALL_01 = ["--only", "01", "--set", "p=11", "--set", "widths=[16]", "--set", "restarts=2",
            "--set", "steps=20", "--set", "eval_every=10", "--set", "warmup_steps=2"]
# Notebook 11 at small settings: T_miiii, its lambda = 0 and dropout-0 runs, three baselines
SMALL_11 = ["--only", "11", "--set", "p=17", "--set", "epochs=40", "--set", "eval_points=4",
            "--set", "n_snapshots=2", "--set", "d_model=16", "--set", "n_heads=2"]


def _why_no_slurm() -> str | None:
    missing = [c for c in ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "munged")
               if shutil.which(c) is None]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} missing; "
                "scripts/slurm_local.sh install needs root and apt-get)")
    if os.geteuid() != 0:
        return "the test cluster's daemons need root"
    return None


def _free_port_pair() -> int:
    """A port p with p and p + 1 free (slurmctld's and slurmd's), so a cluster already running
    here on Slurm's default ports does not collide with the test's."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 65000:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
            return port
    raise RuntimeError("no two free ports in a row")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The environment of a process that talks to the running test cluster."""

    def unavailable(why: str):
        if os.environ.get("RT_REQUIRE_SLURM") == "1":
            pytest.fail(f"RT_REQUIRE_SLURM=1, but {why}")
        pytest.skip(why)

    why = _why_no_slurm()
    if why:
        unavailable(why)
    folder = tmp_path_factory.mktemp("slurm")
    env = {**os.environ, "RT_SLURM_PORT": str(_free_port_pair())}
    start = subprocess.run([str(SCRIPT), "start", str(folder)], env=env, capture_output=True,
                           text=True, timeout=120)
    if start.returncode != 0:
        subprocess.run([str(SCRIPT), "stop", str(folder)], timeout=60)
        unavailable(f"the test cluster did not start: {start.stdout[-1000:]}{start.stderr[-1000:]}")
    try:
        yield {**env, "SLURM_CONF": str(folder / "slurm.conf"), "TQDM_DISABLE": "1"}
    finally:
        subprocess.run([str(SCRIPT), "stop", str(folder)], timeout=60)


def _runner(env: dict, results: Path, *args: str, timeout: int = 600):
    return subprocess.run([sys.executable, "-m", "rt_lib.pipeline.runner", *args],
                          env={**env, "RT_RESULTS": str(results)}, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _ok(proc) -> str:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _folder(results: Path, prefix: str) -> Path:
    (folder,) = results.glob(f"{prefix}+*")  # an exploration: named by its settings
    return folder


@pytest.mark.long  # minutes: the module goes out among the notebooks, not last
def test_notebook_01_through_slurm_survives_a_cancelled_array_and_equals_inline(cluster, tmp_path):
    """The array runs one task at a time; once the first run has stored its result the whole
    array is cancelled (scancel): the notebook fails naming each unfinished run, its state and
    its log; the rerun submits only those, and the tables equal the inline run's."""
    _ok(_runner(cluster, tmp_path / "inline", *SMALL_01))
    results = tmp_path / "slurm"
    args = [sys.executable, "-m", "rt_lib.pipeline.runner", *SMALL_01, *SLURM,
            "--set", "executor.array_parallelism=1"]
    log = tmp_path / "first.log"  # a file, not a pipe: nobody reads while the test polls
    with open(log, "w") as sink:
        first = subprocess.Popen(args, env={**cluster, "RT_RESULTS": str(results)},
                                 cwd=PROJECT_ROOT, stdout=sink, stderr=subprocess.STDOUT, text=True)

    def results_stored() -> list[Path]:
        return list(results.glob("*/resume/*/jobs/*.pt"))

    def partition(state: str) -> None:
        subprocess.run(["scontrol", "update", "PartitionName=local", f"State={state}"],
                       env=cluster, check=True)

    def wait_for(what: str, done) -> None:
        deadline = time.monotonic() + 300
        while not done():
            assert first.poll() is None, f"the runner ended before {what}: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"300 s and still no {what}"
            time.sleep(0.2)

    def running() -> bool:
        return bool(subprocess.run(["squeue", "--noheader", "--states=R", "--format=%i"],
                                   env=cluster, capture_output=True, text=True,
                                   check=True).stdout.split())

    try:
        # Once the first task runs, the partition goes down: the tasks still pending cannot
        # start, so the array is cancelled with some runs stored and some not, however fast
        # the machine (running tasks finish; one at a time, at most one or two have run).
        wait_for("task running", lambda: running() or results_stored())
        partition("DOWN")
        wait_for("stored result", lambda: results_stored() and not running())
        queued = subprocess.run(["squeue", "--noheader", "--format=%A"], env=cluster,
                                capture_output=True, text=True, check=True).stdout.split()
        assert queued, "every task ran before the partition went down"
        subprocess.run(["scancel", *sorted(set(queued))], env=cluster, check=True)
        first.wait(timeout=300)
    finally:
        partition("UP")
        if first.poll() is None:
            first.kill()
    out = log.read_text()
    assert first.returncode != 0, out[-3000:]
    stored = list(results.glob("*/resume/*/jobs/*.pt"))
    assert 1 <= len(stored) < 6
    kept = _folder(results, "01_modular_addition") / "01_modular_addition.failed.ipynb"
    (error,) = [out["evalue"] for cell in json.loads(kept.read_text())["cells"]
                for out in cell.get("outputs", []) if out["output_type"] == "error"]
    assert f"{6 - len(stored)} of 6 job(s) stored no result (a rerun resubmits only these)" in error
    unfinished = [line for line in error.splitlines() if "Slurm ended it as CANCELLED" in line]
    assert len(unfinished) == 6 - len(stored), error
    for line in unfinished:  # the task that was running has a log; those still queued, none
        log = re.search(r"; log (\S+_log\.err)$", line)
        assert (log and Path(log.group(1)).exists()) or line.endswith("; no log: it never started")

    _ok(_runner(cluster, results, *SMALL_01, *SLURM))
    folder = _folder(results, "01_modular_addition")
    executed = (folder / "01_modular_addition.ipynb").read_text()
    assert f"{6 - len(stored)} of 6 job(s) to run as slurm jobs ({len(stored)} stored" in executed
    inline = _folder(tmp_path / "inline", "01_modular_addition")
    for table in ("metrics.csv", "circularity.csv", "claims.csv"):
        assert (folder / table).read_bytes() == (inline / table).read_bytes(), table
    assert not (folder / "resume").exists()  # the job store went once the notebook finished


def test_notebook_11s_runs_through_slurm_equal_the_inline_runs(cluster, tmp_path):
    _ok(_runner(cluster, tmp_path / "inline", *SMALL_11))
    _ok(_runner(cluster, tmp_path / "slurm", *SMALL_11, *SLURM))
    inline, slurm = (_folder(tmp_path / kind, "11_miiii_training") for kind in ("inline", "slurm"))
    assert "6 of 6 job(s) to run as slurm jobs" in (slurm / "11_miiii_training.ipynb").read_text()
    for table in ("metrics.csv", "summary.csv", "generalisation.csv", "claims.csv"):
        assert (slurm / table).read_bytes() == (inline / table).read_bytes(), table


def test_notebook_14s_trials_are_slurm_workers_of_one_study(cluster, tmp_path):
    """Four trials as two array tasks, each an Optuna worker (a sampler seed of its own)
    joining the one study in the notebook's SQLite file."""
    import optuna

    _ok(_runner(cluster, tmp_path, "--only", "14", "--set", "n_trials=4",
                "--set", "fixed={p: 5, epochs: 20, eval_points: 2, train_fraction: 0.8}",
                *SLURM, "--set", "executor.array_parallelism=2"))
    folder = _folder(tmp_path, "14_miiii_search")
    assert "2 of 2 job(s) to run as slurm jobs" in (folder / "14_miiii_search.ipynb").read_text()
    storage = f"sqlite:///{folder / 'study.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).trials
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 4
    # each job's process records itself on its trials: two workers, two trials each
    assert sorted(Counter(t.user_attrs["worker"] for t in trials).values()) == [2, 2]
    assert len((folder / "trials.csv").read_text().splitlines()) == 1 + 4


def _fails_when_negative(x: int) -> int:
    if x < 0:
        raise ValueError(f"x must not be negative, got {x}")
    return x * x


def test_a_failing_slurm_job_names_its_exception_and_log_and_the_rest_are_kept(cluster, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("SLURM_CONF", cluster["SLURM_CONF"])
    config = ex.ExecutorConfig(kind="slurm", gpus_per_node=0, cpus_per_task=1, mem_gb=1,
                               time_min=5, poll_s=0.5)
    jobs = [ex.Job("ok", _fails_when_negative, (3,)), ex.Job("bad", _fails_when_negative, (-1,))]
    with pytest.raises(ex.JobsFailed) as failed:
        ex.run_jobs(jobs, tmp_path / "store", config, name="t")
    message = str(failed.value)
    assert "1 of 2 job(s) stored no result" in message
    assert "ValueError: x must not be negative, got -1" in message
    log = Path(message.rsplit("log ", 1)[1].strip())
    assert log.exists() and "x must not be negative" in log.read_text()
    assert ex.is_stored(tmp_path / "store", "ok") and not ex.is_stored(tmp_path / "store", "bad")


def test_squeues_array_ids_are_read_task_by_task():
    """No cluster needed: squeue lists pending tasks of an array together."""
    assert ex._expand_slurm_ids("12_3") == ["12_3"]
    assert ex._expand_slurm_ids("12_[4-6,9%64]") == ["12_4", "12_5", "12_6", "12_9"]
    assert ex._expand_slurm_ids("7") == ["7"]
