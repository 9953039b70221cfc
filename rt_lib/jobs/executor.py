"""Where a notebook's training runs execute (``./run_all.sh --executor``).

``inline``  in the notebook's own process, one run after another: the default, and how the
            committed notebooks ran.
``local``   as submitit's local jobs: each run a process of its own, pickled and laid out on disk
            as on Slurm (a cluster set-up tried on one machine), a few at a time.
``slurm``   as one Slurm job array per call, through submitit: partition, time, GPUs and array
            parallelism from ``configs/slurm.yaml``, ``--executor-config FILE`` or
            ``--set executor.<key>=<value>``.

A job stores its result under its key (the run's settings) in the notebook's job store before it
ends, and the notebook reads the results from there, not from submitit's pickles.  A call submits
only the jobs whose result is not stored yet: a rerun after a failed, killed or pre-empted job
resubmits only what is missing.  An interrupted notebook cancels the jobs it submitted.

The runner passes its choice to the notebooks it starts in their run context
(:attr:`rt_lib.runtime.context.RunContext.executor`); the choice never changes a result, so it is not
part of a run's key (an inline run and a Slurm run of the same settings are the same run).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from rt_lib.runtime import context
from rt_lib.runtime.io import PROJECT_ROOT, atomic_save_torch, checksum_path, load_torch
from rt_lib.runtime.seeding import default_jobs

KINDS = ("inline", "local", "slurm")
SLURM_CONFIG = PROJECT_ROOT / "configs" / "slurm.yaml"


@dataclass(frozen=True)
class ExecutorConfig:
    """How jobs are submitted; every field but ``kind`` matters to ``slurm`` only, unless said."""

    kind: str = "inline"  # inline | local | slurm
    partition: str | None = None  # sbatch --partition; None: the cluster's default partition
    time_min: int = 240  # wall-time limit of one job (local jobs too): the longest run must fit
    gpus_per_node: int = 1  # one training run uses one GPU
    cpus_per_task: int = 4  # data batches are built on the CPU
    mem_gb: int | None = None  # host memory per job; None: the partition's default
    array_parallelism: int = 64  # array tasks running at once (sbatch --array=0-N%P)
    account: str | None = None  # sbatch --account, where the cluster bills by account
    qos: str | None = None  # sbatch --qos
    setup: tuple[str, ...] = ()  # shell lines run before each job (module load, venv activate)
    additional: dict[str, Any] = field(default_factory=dict)  # any other sbatch option
    local_parallelism: int | None = None  # local jobs at once; None: cores / RT_THREADS
    # Runs one job trains one after another: a job's start-up (a Python process importing torch,
    # seconds) is then paid once for several short runs.  None: 1 on Slurm (one GPU per run);
    # locally as many as make about two jobs per slot (the slots stay busy to the end).
    runs_per_job: int | None = None
    poll_s: float | None = None  # seconds between checks; None: 0.5 locally, 30 on Slurm

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"executor: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for name in ("time_min", "gpus_per_node", "cpus_per_task", "array_parallelism"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < (0 if name == "gpus_per_node" else 1):
                raise ValueError(f"executor.{name} must be a positive integer, got {value!r}")
        for name in ("local_parallelism", "runs_per_job"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"executor.{name} must be an integer >= 1, got {value!r}")
        object.__setattr__(self, "setup", tuple(self.setup))

    @classmethod
    def from_mapping(cls, kind: str, settings: dict[str, Any]) -> ExecutorConfig:
        """``settings`` (a config file's, ``--set executor.*``'s): unknown keys are refused by
        name, so a misspelt option never silently falls back to its default."""
        names = {f.name for f in fields(cls)} - {"kind"}
        unknown = sorted(set(settings) - names)
        if unknown:
            raise ValueError(f"executor: unknown setting(s) {', '.join(unknown)}; "
                             f"known: {', '.join(sorted(names))}")
        return cls(kind=kind, **settings)


def load_config(kind: str, path: str | Path | None = None,
                overrides: dict[str, Any] | None = None) -> ExecutorConfig:
    """The executor ``kind`` with the settings of ``path`` (``configs/slurm.yaml`` for slurm
    when None) and then ``overrides``."""
    settings: dict[str, Any] = {}
    source = Path(path) if path is not None else (SLURM_CONFIG if kind == "slurm" else None)
    if source is not None:
        if not source.is_file():
            raise ValueError(f"executor config {source}: no such file")
        settings = yaml.safe_load(source.read_text()) or {}
        if not isinstance(settings, dict):
            raise ValueError(f"executor config {source}: expected a mapping of settings")
    return ExecutorConfig.from_mapping(kind, settings | (overrides or {}))


def as_fields(config: ExecutorConfig) -> dict[str, Any]:
    """``config`` as plain values, for the run context (:func:`current` reads them back)."""
    return asdict(config) | {"setup": list(config.setup)}


def current() -> ExecutorConfig:
    """The executor this process was started with (``inline`` outside the runner)."""
    settings = dict(context.current().executor or {})
    return ExecutorConfig.from_mapping(settings.pop("kind", "inline"), settings)


@dataclass(frozen=True)
class Job:
    """One unit of work: ``fn(*args)``, its result stored as ``<store>/<key>.pt``.  ``fn`` and
    ``args`` are pickled (cloudpickle) into the job: keep ``fn`` a module-level function."""

    key: str  # names the run by its settings: the same key, the same result
    fn: Callable[..., Any]
    args: tuple = ()


class JobsFailed(RuntimeError):
    """Some jobs ended without storing a result; the others' results are stored."""


def result_path(store: Path, key: str) -> Path:
    return Path(store) / f"{key}.pt"


def is_stored(store: Path, key: str) -> bool:
    path = result_path(store, key)
    return path.exists() and checksum_path(path).exists()


def _run_and_store(fn: Callable[..., Any], args: tuple, path: str) -> None:
    """One run of a job: the result goes to the store (checksummed, atomically), so a job killed
    before the end leaves nothing that a rerun could take for its result."""
    atomic_save_torch({"result": fn(*args)}, path)


def _run_pack(work: list[tuple[Callable[..., Any], tuple, str]]) -> None:
    """What a submitted job runs: its runs one after another, each stored as it ends (a job
    killed half-way keeps the runs it finished)."""
    for fn, args, path in work:
        _run_and_store(fn, args, path)


def packs(todo: list[Job], runs_per_job: int) -> list[list[Job]]:
    """``todo`` cut into jobs of ``runs_per_job`` runs, in order."""
    return [todo[i : i + runs_per_job] for i in range(0, len(todo), runs_per_job)]


def make_executor(config: ExecutorConfig, folder: Path, name: str = "rt"):
    """submitit's executor for ``config`` (local or slurm), its files under ``folder``."""
    import submitit

    if config.kind == "local":
        executor = submitit.LocalExecutor(folder=folder)
        executor.update_parameters(timeout_min=config.time_min)
        return executor
    if config.kind != "slurm":
        raise ValueError(f"no submitit executor for kind {config.kind!r}")
    executor = submitit.SlurmExecutor(folder=folder)
    params: dict[str, Any] = {
        "job_name": name, "time": config.time_min, "gpus_per_node": config.gpus_per_node,
        "cpus_per_task": config.cpus_per_task, "array_parallelism": config.array_parallelism,
        "setup": list(config.setup), "additional_parameters": dict(config.additional)}
    for key in ("partition", "account", "qos"):
        if getattr(config, key) is not None:
            params[key] = getattr(config, key)
    if config.mem_gb is not None:
        params["mem"] = f"{config.mem_gb}GB"
    executor.update_parameters(**params)
    return executor


def run_jobs(jobs: Sequence[Job], store: str | Path, config: ExecutorConfig | None = None,
             name: str = "rt") -> list[Any]:
    """The results of ``jobs``, in order.  ``inline``: each ``fn(*args)`` here, nothing stored.
    Otherwise the jobs without a stored result are submitted (a job array on Slurm), the call
    waits for them and reads every result from ``store``; :class:`JobsFailed` names the jobs that
    ended without one (their logs, and that a rerun resubmits only them)."""
    config = config or current()
    if config.kind == "inline":
        return [job.fn(*job.args) for job in jobs]
    keys = [job.key for job in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"run_jobs: job keys must be unique, got {keys}")
    store = Path(store)
    todo = [job for job in jobs if not is_stored(store, job.key)]
    print(f"{name}: {len(todo)} of {len(jobs)} job(s) to run as {config.kind} jobs"
          f" ({len(jobs) - len(todo)} stored in {store})", flush=True)
    if todo:
        executor = make_executor(config, store / "submitit", name)
        if config.kind == "local":  # a few at a time: submitit would start every local job at once
            at_once = config.local_parallelism or default_jobs()
        else:
            at_once = len(todo)  # one array; Slurm runs array_parallelism of it at once
        poll = config.poll_s if config.poll_s is not None else (0.5 if config.kind == "local" else 30)
        per_job = config.runs_per_job or (
            max(1, -(-len(todo) // (2 * at_once))) if config.kind == "local" else 1)
        failures = _submit_and_wait(executor, packs(todo, per_job), store, at_once, poll, name,
                                    on_slurm=config.kind == "slurm")
        if failures:
            raise JobsFailed(f"{name}: {len(failures)} of {len(todo)} job(s) stored no result "
                             "(a rerun resubmits only these):\n  " + "\n  ".join(failures))
    return [load_torch(result_path(store, key))["result"] for key in keys]


# Slurm states of a job that has ended (squeue's long names): one that ended so without storing
# a result was cancelled, timed out, ran out of memory or lost its node
SLURM_ENDED = frozenset({"BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL",
                         "OUT_OF_MEMORY", "PREEMPTED", "REVOKED", "TIMEOUT"})


def _expand_slurm_ids(listed: str) -> list[str]:
    """``squeue``'s job id column as array task ids: ``12_3`` stays, pending tasks listed
    together (``12_[4-6,9%64]``) become ``12_4, 12_5, 12_6, 12_9``."""
    if "_[" not in listed:
        return [listed]
    main, rest = listed.split("_[", 1)
    ids = []
    for part in rest.rstrip("]").split("%")[0].split(","):
        first, _, last = part.partition("-")
        ids += [f"{main}_{i}" for i in range(int(first), int(last or first) + 1)]
    return ids


def slurm_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """Each job's state as ``squeue`` lists it (also for a while after it ended, Slurm's
    ``MinJobAge``); ids it no longer lists are absent.  None when ``squeue`` cannot be asked.
    ``squeue`` rather than submitit's ``sacct``: it needs no accounting database (many clusters,
    and scripts/slurm_local.sh's, run without one, and sacct then knows nothing), and submitit
    asks sacct only every few minutes, so a cancelled job would otherwise go unseen for long."""
    import subprocess

    mains = sorted({job_id.split("_")[0] for job_id in job_ids})
    if not mains:
        return {}
    try:
        out = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i|%T",
                              f"--jobs={','.join(mains)}"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        # squeue refuses a list whose every job has left it ("Invalid job id specified")
        return {} if "Invalid job id" in out.stderr else None
    states: dict[str, str] = {}
    for line in out.stdout.splitlines():
        listed, _, state = line.strip().partition("|")
        for job_id in _expand_slurm_ids(listed):
            states[job_id] = state.split()[0] if state else "UNKNOWN"
    return states


def _done(sub, on_slurm: bool) -> bool:
    """Whether submitit's job ``sub`` has left its result (or its error) file.  On Slurm only
    the file is looked at: submitit's ``done()`` would also ask ``sacct``, which fails (loudly,
    at every poll) where accounting is off; :func:`_ended_without_result` asks ``squeue``."""
    return sub.paths.result_pickle.exists() if on_slurm else sub.done()


def _why(err: Exception) -> str:
    """The line of submitit's error that says why a job failed: the job's own exception (the
    last line of the traceback between submitit's dashed rules), else the message's last line."""
    text = str(err)
    parts = text.split("-" * 22)
    body = parts[1] if len(parts) >= 3 else text
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    return lines[-1] if lines else type(err).__name__


def _ended_without_result(pending: dict, seen_ended: dict) -> dict:
    """Slurm jobs of ``pending`` that have ended without a result file (those with one are
    ``done()``), with the state they ended in.  A job must be seen ended on two polls in a row:
    on a shared file system its result may reach this machine a moment after Slurm says
    COMPLETED."""
    waiting = [sub for sub in pending if not _done(sub, True)]
    states = slurm_states([sub.job_id for sub in waiting])
    if states is None:  # squeue unreachable this time: ask again next poll
        return {}
    ended = {}
    for sub in waiting:
        state = states.get(sub.job_id, "gone from the queue")
        if state in SLURM_ENDED or state == "gone from the queue":
            seen_ended[sub] = seen_ended.get(sub, 0) + 1
            if seen_ended[sub] >= 2 and not _done(sub, True):
                ended[sub] = state
        else:
            seen_ended.pop(sub, None)
    return ended


def _submit_and_wait(executor, todo: list[list[Job]], store: Path, at_once: int, poll: float,
                     name: str, on_slurm: bool = False) -> list[str]:
    """Submit the jobs ``todo`` (each a list of runs), at most ``at_once`` running (a new one as
    soon as one ends), and wait; returns a line per run that stored no result."""
    queue, pending = list(todo), {}

    def submit(jobs: list[list[Job]]) -> None:
        with executor.batch():  # one sbatch call for the lot: a job array
            subs = [executor.submit(_run_pack, [(run.fn, run.args, str(result_path(store, run.key)))
                                                for run in job]) for job in jobs]
        pending.update(zip(subs, jobs))

    failures: list[str] = []
    seen_ended: dict = {}
    try:
        while queue or pending:
            if queue and len(pending) < at_once:
                free = at_once - len(pending)
                submit(queue[:free])
                del queue[:free]
            # ended without a result file (cancelled, timed out, node lost): submitit would wait
            killed = _ended_without_result(pending, seen_ended) if on_slurm else {}
            for sub in [s for s in pending if s in killed or _done(s, on_slurm)]:
                runs = pending.pop(sub)
                reason = ""
                if sub in killed:
                    reason = f"Slurm ended it as {killed[sub]} before it stored a result"
                else:
                    try:
                        sub.result()
                    except Exception as err:  # killed, timed out, raised: named, then reported
                        reason = _why(err)
                for run in runs:
                    if is_stored(store, run.key):
                        print(f"{name}: {run.key} done (job {sub.job_id})", flush=True)
                    else:
                        log = (f"log {sub.paths.stderr}" if sub.paths.stderr.exists()
                               else "no log: it never started")
                        failures.append(f"{run.key}: job {sub.job_id} failed "
                                        f"({(reason or 'no result stored')[:200]}); {log}")
            if queue or pending:
                time.sleep(poll)
    except BaseException:  # interrupted: no job keeps running unseen
        for sub in pending:
            sub.cancel(check=False)
        raise
    return failures
