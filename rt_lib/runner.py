"""Headless runner behind ``./run_all.sh``: every numbered notebook through papermill.

    ./run_all.sh                      # CPU profile (the notebooks' own defaults), all notebooks
    ./run_all.sh --profile paper      # inject configs/paper/<notebook>.yaml (GPU when present)
    ./run_all.sh --only 01 --set p=59 # one notebook, one parameter changed
    ./run_all.sh --jobs 1             # one notebook at a time (default: one per free core)
    ./run_all.sh --profile paper --executor slurm   # training runs as Slurm job arrays

Everything is validated before the first notebook starts: profile, notebook names, that each
injected parameter exists in the notebook's ``parameters`` cell, and every notebook's parameters
(its defaults plus what is injected) through the parameters class its experiment declares
(:mod:`rt_lib.experiments.registry`; the runner names no notebook).  Executed notebooks land in
``results/<name>/<name>.ipynb`` (``results/<profile>/<name>/`` for other profiles), written to a
temporary file first; a notebook that fails is kept as ``<name>.failed.ipynb`` with its error.
A run with changed parameters (``--set``, an edited parameters cell) goes to a folder of its own,
``results/<name>+<changes>/``, and the notebooks that read it read that folder: the profile's
results are never overwritten.  The run ends with the count of the claims that hold.

Notebooks run ``--jobs`` at a time, each in its own process with one torch thread (``RT_THREADS``):
on the project's 2-core machines two one-thread notebooks finish in about half the time of one
after another, with the same numbers (float reductions depend on the thread count, not on what
else runs).  A notebook that reads another's results (:func:`needs`) starts after it; the one
with the longest chain of work ahead of it starts first (wall times recorded in the committed
notebooks), so that 11 -> 12 -> 13 does not end up last.

A notebook whose results are up to date (:mod:`rt_lib.manifest`) is skipped, also under
``--only``; ``--force`` reruns every selected notebook.  Interrupted (Ctrl-C, SIGTERM, even
SIGKILL) a run leaves no notebook process behind; the next run removes the temporary files of
unfinished writes and reruns only what did not finish (miiii runs resume from their checkpoint).

``--executor local|slurm`` hands a notebook's training runs to submitit (:mod:`rt_lib.executor`);
the notebook waits for its jobs and goes on.  The executor is not part of a run's key.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import fcntl
import json
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from rt_lib import claims
from rt_lib.experiments.registry import (CONFIGS, DEFAULT_PROFILE, PROFILE_ENV, SMOKE,
                                         Experiment, available_profiles, base_profile,
                                         folder_name, is_smoke, registry, runs)
from rt_lib.executor import KINDS, ExecutorConfig, load_config, to_env
from rt_lib.io import (FOLDERS_ENV, PROJECT_ROOT, RESUME, DamagedFileError, WriteFailedError,
                       atomic_path, env_threads)
from rt_lib.manifest import Manifest, content_key, is_temporary
from rt_lib.site import SITE

NOTEBOOKS = PROJECT_ROOT / "notebooks"  # $RT_NOTEBOOKS: another folder of numbered notebooks


class RunError(ValueError):
    """A bad command line: raised before any notebook runs."""


@dataclass(frozen=True)
class Job:
    name: str  # e.g. "01_modular_addition"
    notebook: Path
    parameters: dict  # what is injected: the profile's config and --set
    output_dir: Path  # results/[<profile>/]<folder>: the name, or name+changes (exploration)
    reads: dict[str, str] = field(default_factory=dict)  # {notebook it reads: folder it reads}

    @property
    def folder(self) -> str:
        return self.output_dir.name


def notebooks_dir() -> Path:
    return Path(os.environ.get("RT_NOTEBOOKS", NOTEBOOKS))


def available_notebooks() -> dict[str, Path]:
    return {p.stem: p for p in sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))}


def select(only: list[str] | None) -> dict[str, Path]:
    books = available_notebooks()
    if not only:
        return books
    chosen = {}
    for item in (x for arg in only for x in arg.split(",") if x):
        matches = [n for n in books if n == item or n.split("_", 1)[0] == item.zfill(2)]
        if not matches:
            raise RunError(f"--only: no notebook {item!r}; available: {', '.join(books)}")
        chosen.update({m: books[m] for m in matches})
    return dict(sorted(chosen.items()))


def covered(selected: dict[str, Path], profile: str, explicit: bool) -> dict[str, Path]:
    """The notebooks of ``selected`` that ``profile`` has a config for.  The CPU and paper
    profiles cover every notebook; a profile that covers some only (the GPU profile: the claims
    the CPU cannot show) runs those, and naming another with ``--only`` is an error, as is a
    covered notebook that reads one it does not cover."""
    if profile == DEFAULT_PROFILE:
        return selected
    have = {name: path for name, path in selected.items()
            if (CONFIGS / profile / f"{name}.yaml").exists()}
    everything = sorted(p.stem for p in (CONFIGS / profile).glob("*.yaml"))
    left = sorted(set(selected) - set(have))
    if left and explicit:
        raise RunError(f"--profile {profile} has no config for {', '.join(left)} "
                       f"(configs/{profile}/ covers {', '.join(everything) or 'nothing'})")
    for name in have:
        missing = sorted(set(needs().get(name, ())) - set(everything))
        if missing:
            raise RunError(f"--profile {profile}: {name} reads {', '.join(missing)}, which "
                           f"configs/{profile}/ does not cover")
    if not have:
        raise RunError(f"--profile {profile}: configs/{profile}/ covers none of the notebooks")
    return have


def parse_sets(pairs: list[str] | None) -> dict:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RunError(f"--set expects key=value, got {pair!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


def executor_config(kind: str, path: str | None, sets: dict) -> ExecutorConfig:
    """``--executor``'s settings: its config file, then the ``executor.<key>`` entries of
    ``--set`` (taken out of ``sets``: they are not notebook parameters, and the executor never
    changes a result, so it is not part of a run's key)."""
    prefix = "executor."
    overrides = {k.removeprefix(prefix): sets.pop(k) for k in list(sets) if k.startswith(prefix)}
    if (path or overrides) and kind == "inline":
        raise RunError("executor settings (--executor-config, --set executor.*) need "
                       "--executor local or slurm")
    try:
        return load_config(kind, path, overrides)
    except ValueError as err:
        raise RunError(str(err)) from None


@cache
def needs() -> dict[str, frozenset[str]]:
    """{notebook: the notebooks whose results it reads}, as each experiment declares.

    Run together, a notebook starts only after these finished (07 and 09 would otherwise report
    missing restarts or train fallbacks; 12, 13 and 15 would train 11's runs a second time)."""
    return {name: frozenset(e.reads) for name, e in registry().items() if e.reads}


def recorded_seconds(path: Path) -> float:
    """Wall time papermill recorded in a committed notebook (CPU profile); 60 s if none."""
    try:
        meta = json.loads(path.read_text())["metadata"].get("papermill", {})
        return float(meta.get("duration") or 60.0)
    except (OSError, ValueError, KeyError):
        return 60.0


def schedule(names: list[str]) -> tuple[dict[str, frozenset[str]], list[str]]:
    """({notebook: the given notebooks it reads}, the notebooks in dispatch order): longest
    critical path first (its recorded time plus the longest chain of readers after it), so a
    notebook always comes after those it reads.  ``./run_all.sh`` and the parallel test run
    (conftest.py) hand out notebooks in this order, each once those it reads have finished."""
    deps = {n: needs().get(n, frozenset()) & set(names) for n in names}
    books = available_notebooks()
    seconds = {n: recorded_seconds(books[n]) if n in books else 60.0 for n in names}

    @cache
    def critical(name: str) -> float:
        return seconds[name] + max((critical(m) for m in names if name in deps[m]), default=0.0)

    return deps, sorted(names, key=lambda n: (-critical(n), n))


def default_jobs() -> int:
    """Notebooks at once: the usable cores divided by the torch threads each uses, at most 4."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, (cores or 1) // env_threads()))


def notebook_parameters(path: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(path)))


def experiment(name: str) -> Experiment | None:
    """The registered experiment of notebook ``name`` (None: a notebook without one)."""
    return registry().get(name)


def default_parameters(path: Path) -> dict:
    """The values of a notebook's ``parameters`` cell (plain assignments), as it would run."""
    cells = json.loads(path.read_text())["cells"]
    source = next(("".join(c["source"]) for c in cells
                   if "parameters" in c.get("metadata", {}).get("tags", [])), "")
    namespace: dict = {}
    exec(compile(source, f"{path.name}: parameters cell", "exec"), namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def changes(name: str, path: Path, profile: str, injected: dict) -> dict:
    """Build the notebook's parameters as its own code does (its parameters cell, then what is
    injected) and return what they change from ``profile``'s; a bad value raises
    :class:`RunError` naming the notebook and the parameter."""
    namespace = default_parameters(path) | injected
    exp = experiment(name)
    if exp is None:  # no declared parameters: the injected values that change the cell's
        defaults = default_parameters(path)
        return {k: v for k, v in injected.items() if defaults.get(k) != v}
    try:
        return exp.changes(exp.params.from_namespace(namespace), profile)
    except (ValueError, TypeError, KeyError, FileNotFoundError) as err:
        raise RunError(f"{name}: {err}") from None


def plan(profile: str, only: list[str] | None, sets: dict,
         results_root: Path | None = None) -> list[Job]:
    """Validate everything and return the jobs; raises :class:`RunError` and writes nothing.

    ``sets`` go to every selected notebook that declares the parameter (one that none declares
    is an error).  A notebook whose parameters differ from its profile's, or that reads such a
    run's results, gets a folder of its own (:mod:`rt_lib.experiments.registry`)."""
    profiles = available_profiles()
    if base_profile(profile) not in profiles:
        raise RunError(f"--profile: unknown profile {base_profile(profile)!r}; available: "
                       f"{', '.join(profiles)}")
    root = results_root or Path(os.environ.get("RT_RESULTS", PROJECT_ROOT / "results"))
    if profile != DEFAULT_PROFILE:
        root = root / profile
    selected = covered(select(only), base_profile(profile), explicit=bool(only))
    declared = {name: notebook_parameters(path) for name, path in selected.items()}
    unknown = sorted(k for k in sets if not any(k in known for known in declared.values()))
    if unknown:
        listing = "; ".join(f"{n}: {sorted(k)}" for n, k in declared.items())
        raise RunError(f"unknown parameter(s) {unknown}: no selected notebook declares them "
                       f"(the notebooks' parameters: {listing})")
    jobs: dict[str, Job] = {}
    own: dict[str, dict] = {}
    for name, path in selected.items():  # name order: what a notebook reads comes first
        params: dict = {}
        if base_profile(profile) != DEFAULT_PROFILE:
            cfg = CONFIGS / base_profile(profile) / f"{name}.yaml"
            if not cfg.exists():
                raise RunError(f"--profile {base_profile(profile)}: "
                               f"{cfg.relative_to(PROJECT_ROOT)} is missing")
            params = yaml.safe_load(cfg.read_text()) or {}
        if is_smoke(profile) and (exp := experiment(name)) is not None:
            # the config with the smoke cuts, where the notebook has the parameter cut
            params = {k: v for k, v in exp.profile_config(profile).items()
                      if k in params or k in declared[name]}
        not_declared = sorted(set(params) - declared[name])
        if not_declared:
            raise RunError(f"{name}: unknown parameter(s) {not_declared} in the {profile} "
                           f"profile; the notebook's parameters are {sorted(declared[name])}")
        params.update({k: v for k, v in sets.items() if k in declared[name]})
        own[name] = dict(changes(name, path, profile, params))
        reads = {}
        for upstream in sorted(needs().get(name, ())):
            up = jobs.get(upstream)
            reads[upstream] = up.folder if up is not None else upstream
            for key, value in (own.get(upstream, {}) if up is not None else {}).items():
                if own[name].get(key, value) != value:
                    key = f"{upstream[:2]}.{key}"
                own[name].setdefault(key, value)
        jobs[name] = Job(name, path, params, root / folder_name(name, own[name]), reads)
    if not jobs:
        raise RunError(f"no numbered notebooks found under {notebooks_dir()}")
    return list(jobs.values())


#: A smoke test's cell runs in seconds to minutes (08 at width 4,096: several): one that takes
#: longer has hung or lost its cuts, and
#: fails (the profiles' own cells may train for many minutes and have no limit).
SMOKE_CELL_TIMEOUT = 900


def execute(job: Job, output: Path, log_output: bool = False,
            cell_timeout: int | None = None) -> float:
    """Run one notebook with papermill into ``output`` (atomically); returns wall seconds."""
    import papermill

    from rt_lib.kernel import PatientKernelManager

    job.output_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with atomic_path(output) as tmp:
        try:
            papermill.execute_notebook(
                str(job.notebook), str(tmp), parameters=job.parameters, kernel_name="python3",
                cwd=str(job.notebook.parent), log_output=log_output, progress_bar=False,
                execution_timeout=cell_timeout, kernel_manager_class=PatientKernelManager,
            )
        except Exception:
            # Always beside the results (also with --update-notebooks): notebooks/ keeps only
            # notebooks that ran through.
            os.replace(tmp, job.output_dir / f"{job.name}.failed.ipynb")
            raise
    stale = job.output_dir / f"{job.name}.failed.ipynb"
    stale.unlink(missing_ok=True)
    return time.perf_counter() - start


def _die_with_parent() -> None:
    """Linux: ask the OS to SIGKILL this process when the runner dies (even by SIGKILL), so no
    orphan keeps training; its Jupyter kernel then exits by ipykernel's parent poller."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints where a stuck run is (every thread's stack, to stderr) and
    lets it go on.  Skipped where stderr is no file (e.g. captured by a test)."""
    if not hasattr(signal, "SIGUSR1"):
        return
    try:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is an OSError
        pass


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _child(job: Job, output: Path, log_output: bool, parent: int, key: str,
           profile: str) -> None:
    _die_with_parent()
    if os.getppid() != parent:  # the runner died before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGTERM, _interrupt)  # unwind: kernel shut down, temporary file removed
    _stacks_on_sigusr1()
    os.environ["RT_RESULTS"] = str(job.output_dir.parent)
    os.environ[PROFILE_ENV] = profile
    # Where this notebook writes and where the notebooks it reads wrote (rt_lib.io.folder_of).
    os.environ[FOLDERS_ENV] = json.dumps({**job.reads, job.name: job.folder})
    os.environ["RT_RUN_KEY"] = key  # mid-run checkpoints resume only for these exact inputs
    os.environ["RT_NOTEBOOK"] = job.name  # whose folder holds them (experiments.common.resume_dir)
    try:
        execute(job, output, log_output, SMOKE_CELL_TIMEOUT if is_smoke(profile) else None)
    except Exception as err:
        if hasattr(err, "ename"):  # papermill: the error raised in the notebook's cell
            detail = f"{err.ename}: {err.evalue}"
        else:
            detail = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        print(f"    FAILED {job.folder}: {detail}\n"
              f"    executed notebook kept as {job.output_dir / (job.name + '.failed.ipynb')}",
              file=sys.stderr, flush=True)
        sys.exit(1)


@dataclass
class Outcome:
    done: list[tuple[str, float]]  # (name, seconds) in finishing order
    skipped: list[str]  # up to date: not rerun
    failed: list[str]  # failed, or not run because a notebook it reads failed


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour)."""
    seconds = max(int(round(seconds)), 0)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def expected_seconds(job: Job, manifest: Manifest | None, profile: str) -> float | None:
    """What ``job`` took last time: its manifest entry's wall time, else (CPU profile) the time
    papermill recorded in the committed notebook; None when neither says."""
    entry = manifest.entries.get(job.folder) if manifest is not None else None
    if entry is not None:
        return entry.wall_seconds
    if profile == DEFAULT_PROFILE and job.notebook.is_file():
        meta = json.loads(job.notebook.read_text())["metadata"].get("papermill", {})
        return float(meta["duration"]) if meta.get("duration") else None
    return None


def progress_line(running: dict[str, tuple[float, float | None]], done: int, total: int,
                  now: float) -> str:
    """One line over the notebooks running: {name: (start, expected seconds or None)}."""
    parts = []
    for name, (start, expected) in running.items():
        spent = now - start
        if expected and spent > expected:  # e.g. the last run resumed from stored runs
            parts.append(f"{name} {clock(spent)}, past the {clock(expected)} of its last run")
        elif expected:
            parts.append(f"{name} {clock(spent)} of ~{clock(expected)} ({spent / expected:.0%})")
        else:
            parts.append(f"{name} {clock(spent)} (no earlier run to compare)")
    return f"    [{done}/{total} done] " + " | ".join(parts)


class Ticker:
    """The progress line between "started" and "done": redrawn in place every second on a
    terminal, printed once a minute into a log (a pipe or file: no carriage returns there)."""

    def __init__(self, stream=None, interval: float | None = None) -> None:
        self.stream = stream or sys.stdout
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (1.0 if self.tty else 60.0)
        self.shown = False

    def show(self, line: str) -> None:
        if self.tty:
            width = shutil.get_terminal_size((120, 20)).columns
            self.stream.write("\r\033[K" + line[: width - 1])
            self.shown = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


def run_jobs(jobs: list[Job], outputs: dict[str, Path], n_jobs: int, log_output: bool = False,
             manifest: Manifest | None = None, profile: str = DEFAULT_PROFILE,
             rerun: frozenset[str] | set[str] = frozenset(),
             progress_every: float | None = None) -> Outcome:
    """Run ``jobs``, ``n_jobs`` at a time, each notebook after the selected ones it
    :func:`needs`.  With a ``manifest``, a notebook (not in ``rerun``) whose results are up to
    date is skipped, and each finished one is recorded.  While notebooks run, a progress line
    (:class:`Ticker`, every ``progress_every`` seconds; default: each second on a terminal, each
    minute in a log) says how long each has run against what it took last time."""
    by_name = {j.name: j for j in jobs}
    deps, order = schedule(list(by_name))

    def key(name: str) -> str:  # at dispatch: what the notebooks it reads hold by then
        job = by_name[name]
        reads = {u: (e.key if (e := manifest.entries.get(folder)) else None)
                 for u, folder in sorted(job.reads.items())} if manifest else {}
        return content_key(job.notebook, profile, job.parameters, reads)

    ctx = multiprocessing.get_context("spawn")
    running: dict[int, tuple[str, multiprocessing.process.BaseProcess, float, str]] = {}
    expected: dict[str, float | None] = {}
    ticker = Ticker(interval=progress_every)
    out = Outcome([], [], [])
    finished: set[str] = set()
    try:
        while order or running:
            for name in list(order):
                if len(running) >= n_jobs:
                    break
                if deps[name] & set(out.failed):
                    order.remove(name)
                    out.failed.append(name)
                    print(f"    SKIPPED {name}: it reads "
                          f"{', '.join(sorted(deps[name] & set(out.failed)))}, which failed",
                          file=sys.stderr, flush=True)
                    continue
                if not deps[name] <= finished:
                    continue
                order.remove(name)
                k = key(name)
                folder = by_name[name].folder  # the manifest's entries are per results folder
                if manifest is not None and name not in rerun:
                    reason = manifest.stale_reason(folder, k)
                    if reason is None:
                        finished.add(name)
                        out.skipped.append(name)
                        print(f"    {folder} is up to date (manifest): skipped; --force reruns "
                              "it", flush=True)
                        continue
                    print(f"==> {folder}: {reason}", flush=True)
                expected[name] = expected_seconds(by_name[name], manifest, profile)
                if manifest is not None:
                    manifest.forget(folder)
                proc = ctx.Process(target=_child, name=name,
                                   args=(by_name[name], outputs[name], log_output, os.getpid(),
                                         k, profile))
                proc.start()
                running[proc.sentinel] = (name, proc, time.perf_counter(), k)
                ticker.clear()
                took = expected[name]
                print(f"==> {folder} started" + (f" (last run: {clock(took)})" if took else ""),
                      flush=True)
            if not running:
                continue
            ready = multiprocessing.connection.wait(list(running), timeout=ticker.interval)
            if not ready:
                ticker.show(progress_line({n: (t, expected[n]) for n, _, t, _ in running.values()},
                                          len(finished), len(by_name), time.perf_counter()))
                continue
            ticker.clear()
            for sentinel in ready:
                name, proc, start, k = running.pop(sentinel)
                proc.join()
                finished.add(name)
                if proc.exitcode != 0:
                    out.failed.append(name)
                    continue
                out.done.append((name, time.perf_counter() - start))
                job = by_name[name]
                shutil.rmtree(job.output_dir / RESUME, ignore_errors=True)  # finished: not needed
                if manifest is not None:
                    manifest.record(job.folder, k, profile, job.parameters, job.output_dir,
                                    out.done[-1][1])
                print(f"    {name} done in {out.done[-1][1]:.0f} s "
                      f"({len(finished)}/{len(by_name)}) -> {job.output_dir}", flush=True)
    finally:
        for _, proc, _, _ in running.values():  # interrupted: stop what still runs
            proc.terminate()
        for _, proc, _, _ in running.values():
            proc.join(15)
            if proc.is_alive():
                proc.kill()
    return out


LOCK = ".run_all.lock"


@contextlib.contextmanager
def exclusive(root: Path) -> Iterator[None]:
    """One ``run_all.sh`` per results root at a time.

    The lock is ``flock`` on ``<root>/.run_all.lock``: taking it is one atomic call, so of two
    runs started at the same instant exactly one gets it (a check for the file, then creating
    it, would let both through), and the OS releases it when its process ends however it ends
    (a lock file a killed run left is no lock).  The file is opened without truncating it and
    the winner writes its pid there, so the one refused can say which run holds it."""
    path = root / LOCK
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as err:
        raise RunError(f"cannot take the lock {path} ({err.strerror}): the results folder "
                       f"{root} must be writable (or point RT_RESULTS at one that is)") from None
    with os.fdopen(fd, "r+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = lock.read().strip()
            raise RunError(f"another ./run_all.sh{f' (pid {holder})' if holder else ''} is "
                           f"writing to {root} (it holds {path}); wait for it or stop it") from None
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        try:
            yield
        finally:
            lock.truncate(0)  # released: no pid left to name (one killed leaves its own)


def remove_unfinished(folders: list[Path]) -> list[Path]:
    """Delete the temporary files that writes cut short by an interruption left in ``folders``
    (searched recursively); run only while holding :func:`exclusive`."""
    gone = []
    for folder in folders:
        if folder.is_dir():
            for path in folder.rglob(".*"):
                if path.is_file() and is_temporary(path):
                    path.unlink()
                    gone.append(path)
    return gone


def report_claims(folders: dict[str, Path]) -> None:
    """The closing summary: the four counts (holds, fails, not shown, not checked) over the
    papers' claims recorded by the runs given, ours apart, and a line per claim not holding."""
    try:
        got = claims.summary(folders)
    except DamagedFileError as err:  # the results stand; the summary cannot be made
        print(f"run_all.sh: warning: no claims summary: {err}", file=sys.stderr, flush=True)
        return
    n_papers, n_ours = sum(got.papers.values()), sum(got.ours.values())
    if not n_papers + n_ours:
        return
    print(f"claims of the papers ({n_papers} recorded, {len(claims.ledger())} in the ledger): "
          f"{claims.counts_line(got.papers)}")
    if n_ours:
        print(f"claims of our own ({n_ours}, counted apart): {claims.counts_line(got.ours)}")
    if got.lines:
        print("not holding (a claim not shown names the scale expected to show it; one not "
              "checked says why):")
    for line in got.lines:
        print(f"  {line}")


def report_footprints(profile: str, names: list[str], root: Path) -> None:
    """After a smoke test: peak memory and FLOPs of one step at ``profile``'s own batch, per
    training step of each notebook (:mod:`rt_lib.footprint`), printed and kept in
    ``<root>/footprint.csv``."""
    from rt_lib.footprint import GIB, profile_footprints

    print(f"one training step at the {profile} profile's batch (rt_lib.footprint: the peak "
          "resident memory of a process taking it, 'estimated' where the step was run on the "
          "meta device at that batch and taken here at a smaller one):", flush=True)
    start = time.perf_counter()
    # Steps cheaper than 5e10 FLOPs are taken whole here, dearer ones estimated: a minute or two
    # (benchmarks/paper_plan.py measures more of them whole, for the planning table in docs/profiles.md).
    table = profile_footprints(profile, names, max_flops=5e10, jobs=default_jobs())
    if table.empty:
        return
    table.to_csv(root / "footprint.csv", index=False)
    for row in table.itertuples():
        print(f"  {row.notebook:<24} {row.step:<44} batch {row.batch:>6}  peak "
              f"{row.peak_GiB:7.2f} GiB {row.peak:<9}  {row.GFLOP_per_step:11,.1f} GFLOP/step")
    print(f"  ({time.perf_counter() - start:.0f} s; {root / 'footprint.csv'}; "
          f"largest {table.peak_GiB.max():.1f} GiB against {_memory_bytes() / GIB:.0f} GiB here)")


def _memory_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def list_runs() -> int:
    """--list: notebooks, profiles, and every run folder under the results roots; returns how
    many runs have a damaged record (each listed with the file and the notebook to rerun)."""
    print("notebooks:", ", ".join(available_notebooks()))
    print("profiles: ", ", ".join(available_profiles()))
    base = Path(os.environ.get("RT_RESULTS", PROJECT_ROOT / "results"))
    n_damaged = 0
    for profile in available_profiles():
        root = base if profile == DEFAULT_PROFILE else base / profile
        found = runs(root) if root.is_dir() else []
        print(f"runs of the {profile} profile ({root}): {len(found) or 'none'}")
        for run in found:
            kind = "exploration" if run["exploration"] else "profile"
            if run["damaged"]:
                n_damaged += 1
                print(f"  {run['folder']:<44} {kind}, DAMAGED: {run['damaged']}")
                continue
            claim = f", claims held {run['claims']}" if run["claims"] else ""
            print(f"  {run['folder']:<44} {kind}{claim}")
    return n_damaged


def build_site_of(root: Path, profile: str, executed: dict[str, Path]) -> None:
    """The profile's site (:mod:`rt_lib.site`) over every notebook of it under ``root``, those
    just run included; a site that cannot be built is reported, the run's results stand."""
    from rt_lib.site import build_site

    start = time.perf_counter()
    try:
        index = build_site(root, profile, list(available_notebooks()), executed)
    except Exception as err:  # noqa: BLE001 - any renderer error: the results are still there
        print(f"run_all.sh: warning: the site was not built ({type(err).__name__}: {err})",
              file=sys.stderr, flush=True)
        return
    size = sum(p.stat().st_size for p in index.parent.rglob("*") if p.is_file())  # MathJax too
    print(f"site: {index} ({len(list(index.parent.glob('*.html'))) - 1} notebooks, "
          f"{size / 2**20:.1f} MiB, built in {time.perf_counter() - start:.0f} s; open it in "
          "any browser, nothing is fetched)", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="run_all.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default=DEFAULT_PROFILE,
                        help="cpu (the notebooks' defaults) or a folder of configs/, e.g. paper")
    parser.add_argument("--only", action="append", metavar="NN",
                        help="notebook number or name; repeat or comma-separate for several")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets",
                        help="override one parameter (YAML value) in every selected notebook")
    parser.add_argument("--update-notebooks", action="store_true",
                        help="write the executed notebooks back to notebooks/ (the committed "
                             "reference outputs; CPU profile, no --set)")
    parser.add_argument("--force", action="store_true",
                        help="rerun every selected notebook, even when up to date")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="notebooks run at once (default: cores / RT_THREADS, at most 4)")
    parser.add_argument("--smoke", action="store_true",
                        help="the profile's smoke test: every notebook at the profile's shapes "
                             "with a handful of steps, into results/<profile>-smoke/ (with "
                             "--profile paper: what a GPU run would hit first, on this CPU)")
    parser.add_argument("--no-footprints", action="store_true",
                        help="with --smoke: leave out the table of each training step's peak "
                             "memory and FLOPs at the profile's batch (minutes of both cores)")
    parser.add_argument("--executor", choices=KINDS, default="inline",
                        help="where training runs execute: inline (in the notebook, default), "
                             "local (submitit jobs on this machine) or slurm (a Slurm job array "
                             "per notebook; settings from configs/slurm.yaml, --executor-config "
                             "or --set executor.<key>=<value>)")
    parser.add_argument("--executor-config", metavar="FILE",
                        help="YAML of executor settings (rt_lib.executor.ExecutorConfig)")
    parser.add_argument("--log-output", action="store_true", help="stream cell output")
    parser.add_argument("--list", action="store_true",
                        help="list notebooks, profiles and the runs under results/")
    args = parser.parse_args(argv)
    _stacks_on_sigusr1()

    try:
        if args.list:
            if list_runs():
                print("run_all.sh: error: runs with damaged records are listed above, each with "
                      "the command that writes it again", file=sys.stderr)
                return 1
            return 0
        sets = parse_sets(args.sets)
        executor = executor_config(args.executor, args.executor_config, sets)
        if args.update_notebooks and (args.profile != DEFAULT_PROFILE or sets or args.smoke):
            raise RunError("--update-notebooks only records the CPU profile without --set or "
                           "--smoke")
        if args.smoke:
            if args.profile == DEFAULT_PROFILE:
                raise RunError("--smoke cuts a profile of configs/ (e.g. --profile paper) to a "
                               "few steps; the CPU profile is the notebooks' own defaults")
            args.profile += SMOKE
        elif args.no_footprints:
            raise RunError("--no-footprints goes with --smoke (only a smoke test takes them)")
        if args.jobs is not None and args.jobs < 1:
            raise RunError(f"--jobs must be >= 1, got {args.jobs}")
        try:
            env_threads()  # a bad RT_THREADS, named before anything runs
        except ValueError as err:
            raise RunError(str(err)) from None
        jobs = plan(args.profile, args.only, sets)
    except RunError as err:
        print(f"run_all.sh: error: {err}", file=sys.stderr)
        return 2

    # Progress bars inside notebooks would land in their stderr outputs (and in nbval's
    # comparison); the runner prints a line per notebook started and finished instead.
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.update(to_env(executor))  # the notebooks' training runs read it (rt_lib.executor)
    n_jobs = args.jobs or default_jobs()
    outputs = {job.name: job.notebook if args.update_notebooks
               else job.output_dir / f"{job.name}.ipynb" for job in jobs}
    root = jobs[0].output_dir.parent
    rerun = {j.name for j in jobs} if (args.force or args.update_notebooks) else set()
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: stop the notebooks, then exit
    # Ctrl-C itself, also where it was inherited as ignored (a command started with `&` from a
    # script gets SIGINT ignored, and Python then leaves it so): it must still unwind the run.
    signal.signal(signal.SIGINT, _interrupt)
    try:
        with exclusive(root):
            folders = [p for p in root.glob("[0-9][0-9]_*") if p.is_dir()] + [root / SITE]
            if args.update_notebooks:
                folders.append(notebooks_dir())
            gone = remove_unfinished(folders)
            if gone:
                print(f"run_all.sh: removed {len(gone)} temporary file(s) of writes an "
                      "interrupted run left unfinished", flush=True)
            manifest = Manifest(root)
            for problem in manifest.problems:
                print(f"run_all.sh: warning: {problem}", file=sys.stderr, flush=True)
            where = "" if executor.kind == "inline" else f", training runs as {executor.kind} jobs"
            print(f"run_all.sh: {len(jobs)} notebook(s), {args.profile} profile, {n_jobs} at a "
                  f"time{where}; manifest {manifest.path}", flush=True)
            outcome = run_jobs(jobs, outputs, n_jobs, args.log_output, manifest, args.profile,
                               rerun)
    except RunError as err:
        print(f"run_all.sh: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("run_all.sh: interrupted; run it again to finish what is left", file=sys.stderr)
        return 130
    except WriteFailedError as err:  # the manifest: what finished is on disk, recorded or not
        print(f"run_all.sh: error: {err}", file=sys.stderr)
        return 1
    timings, failures = outcome.done, outcome.failed
    by_name = {job.name: job for job in jobs}
    if outcome.skipped:
        print(f"up to date, skipped: {', '.join(by_name[n].folder for n in outcome.skipped)}")
    for name, seconds in timings:
        print(f"{by_name[name].folder:<40} {seconds:8.1f} s")
    report_claims({by_name[n].folder: by_name[n].output_dir
                   for n in [*outcome.skipped, *(n for n, _ in timings)]})
    if is_smoke(args.profile) and not failures and not args.no_footprints:
        report_footprints(base_profile(args.profile), [job.name for job in jobs], root)
    build_site_of(root, args.profile, {j.name: outputs[j.name] for j in jobs if j.folder == j.name})
    if failures:
        print(f"run_all.sh: {len(failures)} notebook(s) failed: {', '.join(failures)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
