"""Running the planned notebooks: each through papermill in a process of its own, ``--jobs`` at a
time, each after the notebooks it reads, the longest chain of work first; one run per results
root at a time; nothing left behind when interrupted.

Notebooks run each in its own process with the torch threads of the run context
(``RT_THREADS``, one by default): on the project's 2-core machines two one-thread notebooks
finish in about half the time of one after another, with the same numbers (float reductions
depend on the thread count, not on what else runs).  A notebook that reads another's results
(:func:`rt_lib.pipeline.plan.needs`) starts after it; the one with the longest chain of work
ahead of it starts first (the cold wall times recorded in the committed notebooks, which a
re-record over a warm run store keeps: :func:`cold_seconds`), so that 11 -> 12 -> 13 does not
end up last.

Each notebook's process gets its :class:`rt_lib.runtime.context.RunContext` (results root, profile,
folders, run key, executor) as one value.  A notebook whose results are up to date
(:mod:`rt_lib.runtime.manifest`) is skipped.  Interrupted (Ctrl-C, SIGTERM, even SIGKILL) a run
leaves no notebook process behind; the next run removes the temporary files of unfinished writes
and reruns only what did not finish (miiii runs resume from their checkpoint).
"""

from __future__ import annotations

import contextlib
import faulthandler
import fcntl
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rt_lib.pipeline.plan import COLD_KEY, Job, RunError, recorded_duration, schedule
from rt_lib.pipeline.progress import Ticker, clock, expected_seconds, progress_line
from rt_lib.runtime import store as run_store
from rt_lib.runtime.context import DEFAULT_PROFILE, RunContext, env_threads, is_smoke
from rt_lib.runtime.io import RESUME, atomic_path
from rt_lib.runtime.manifest import Manifest, content_key, head_commit, is_temporary

#: A smoke test's cell runs in seconds to minutes (08 at width 4,096: several): one that takes
#: longer has hung or lost its cuts, and
#: fails (the profiles' own cells may train for many minutes and have no limit).
SMOKE_CELL_TIMEOUT = 900


def execute(job: Job, output: Path, log_output: bool = False,
            cell_timeout: int | None = None) -> float:
    """Run one notebook with papermill into ``output`` (atomically); returns wall seconds.  The
    notebook's loads and trainings are counted in the run store as a part of the command's
    session (``<session>/<notebook>``), which says whether its wall time is a cold one
    (:func:`cold_seconds`)."""
    import papermill

    from rt_lib.pipeline.kernel import PatientKernelManager

    job.output_dir.mkdir(parents=True, exist_ok=True)
    before = recorded_duration(output) if output.is_file() else None
    outer = os.environ.get(run_store.SESSION_ENV)
    part = f"{outer or f'run-{os.getpid()}'}{run_store.SUBSESSION}{job.name}"
    os.environ[run_store.SESSION_ENV] = part  # the kernel and its training jobs inherit it
    start = time.perf_counter()
    try:
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
            seconds = time.perf_counter() - start
            stamp_platform(tmp, cold_seconds(seconds, before, part))
    finally:
        if outer is None:
            os.environ.pop(run_store.SESSION_ENV, None)
        else:
            os.environ[run_store.SESSION_ENV] = outer
    stale = job.output_dir / f"{job.name}.failed.ipynb"
    stale.unlink(missing_ok=True)
    return seconds


def cold_seconds(seconds: float, before: float | None, session: str) -> float:
    """What the notebook's run costs from an empty run store: ``seconds``, its wall time, where it
    trained a run (or the store is off, or it trains none); where every run it asked for came
    from the store or from its results folder (an earlier run of the same notebooks: the
    store's ``found``), ``before``, what its previous recording says (``seconds`` if none)."""
    store = run_store.current()
    if store is None or before is None:
        return seconds
    events = store.stats(session).events
    loaded = events["hit"] + events[run_store.FOUND]
    warm = loaded > 0 and events["stored"] == 0 and events["damaged"] == 0
    return before if warm else seconds


def stamp_platform(path: Path, cold: float | None = None) -> None:
    """Write this process's numeric platform (:func:`rt_lib.runtime.fingerprint.fingerprint`; the
    notebook's kernel inherited its environment) into an executed notebook's metadata: the test
    command compares a committed notebook bit for bit only on a platform that matches it.  And
    ``cold``, its cost from an empty run store (:data:`rt_lib.pipeline.plan.COLD_KEY`), which
    the schedulers read."""
    import nbformat

    from rt_lib.runtime.fingerprint import METADATA_KEY, fingerprint

    nb = nbformat.read(str(path), as_version=nbformat.NO_CONVERT)
    nb.metadata[METADATA_KEY] = fingerprint()
    if cold is not None:
        nb.metadata[COLD_KEY] = round(cold, 1)
    nbformat.write(nb, str(path))


def _die_with_parent() -> None:
    """Linux: ask the OS to SIGKILL this process when the runner dies (even by SIGKILL), so no
    orphan keeps training; its Jupyter kernel then exits by ipykernel's parent poller."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` prints where a stuck run is (every thread's stack, to stderr) and
    lets it go on.  Skipped where stderr is no file (e.g. captured by a test)."""
    if not hasattr(signal, "SIGUSR1"):
        return
    try:
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    except (AttributeError, ValueError, OSError):  # io.UnsupportedOperation is an OSError
        pass


def interrupt(signum: int, frame: object) -> None:
    """A signal handler that stops the process as Ctrl-C does (the runner's SIGTERM, SIGINT)."""
    raise KeyboardInterrupt(f"signal {signum}")


def _child(job: Job, output: Path, log_output: bool, parent: int, key: str,
           profile: str, executor: dict[str, Any] | None) -> None:
    _die_with_parent()
    if os.getppid() != parent:  # the runner died before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGTERM, interrupt)  # unwind: kernel shut down, temporary file removed
    stacks_on_sigusr1()
    run = RunContext(
        results_root=job.output_dir.parent, profile=profile, threads=env_threads(),
        # where this notebook writes and where the notebooks it reads wrote (rt_lib.runtime.io.folder_of)
        folders={**job.reads, job.name: job.folder},
        notebook=job.name, run_key=key,  # mid-run checkpoints resume only for these exact inputs
        executor=executor)
    os.environ.update(run.to_env())  # the notebook's kernel inherits it
    try:
        execute(job, output, log_output, SMOKE_CELL_TIMEOUT if is_smoke(profile) else None)
    except KeyboardInterrupt:
        # Ctrl-C reaches every process of the terminal: the runner says it once, in one line
        os._exit(130)
    except Exception as err:
        if hasattr(err, "ename"):  # papermill: the error raised in the notebook's cell
            detail = f"{err.ename}: {err.evalue}"
        else:
            detail = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        kept = job.output_dir / (job.name + ".failed.ipynb")
        print(f"    FAILED {job.folder}: {detail}"
              + (f"\n    executed notebook kept as {kept}" if _readable_notebook(kept) else ""),
              file=sys.stderr, flush=True)
        sys.exit(1)


def _readable_notebook(path: Path) -> bool:
    """Whether ``path`` holds a notebook that opens (a failed run's, worth naming)."""
    import nbformat

    try:
        nbformat.read(str(path), as_version=nbformat.NO_CONVERT)
        return True
    except Exception:  # missing, empty, cut short: not worth pointing at
        return False


@dataclass
class Outcome:
    done: list[tuple[str, float]]  # (name, seconds) in finishing order
    skipped: list[str]  # up to date: not rerun
    failed: list[str]  # failed, or not run because a notebook it reads failed


def run_jobs(jobs: list[Job], outputs: dict[str, Path], n_jobs: int, log_output: bool = False,
             manifest: Manifest | None = None, profile: str = DEFAULT_PROFILE,
             rerun: frozenset[str] | set[str] = frozenset(),
             progress_every: float | None = None,
             executor: dict[str, Any] | None = None) -> Outcome:
    """Run ``jobs``, ``n_jobs`` at a time, each notebook after the selected ones it
    :func:`needs`.  With a ``manifest``, a notebook (not in ``rerun``) whose results are up to
    date is skipped, and each finished one is recorded.  While notebooks run, a progress line
    (:class:`Ticker`, every ``progress_every`` seconds; default: each second on a terminal, each
    minute in a log) says how long each has run against what it took last time.  ``executor``:
    where the notebooks' training runs go (:func:`rt_lib.jobs.executor.as_fields`; None:
    inline)."""
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
    kept: dict[str, tuple[Path | None, Any]] = {}  # name -> (results set aside, manifest entry)
    started_on: dict[str, str] = {}  # name -> the commit it started on (head_commit)
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
                entry = manifest.entries.get(folder) if manifest is not None else None
                if manifest is not None:
                    manifest.forget(folder)
                # the last good results, put back if this run fails or is stopped
                kept[name] = (keep_previous(by_name[name].output_dir), entry)
                proc = ctx.Process(target=_child, name=name,
                                   args=(by_name[name], outputs[name], log_output, os.getpid(),
                                         k, profile, executor))
                started_on[name] = head_commit()  # the code its kernel imports
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
                    _put_back(by_name[name], kept.pop(name, (None, None)), manifest)
                    continue
                out.done.append((name, time.perf_counter() - start))
                job = by_name[name]
                shutil.rmtree(job.output_dir / RESUME, ignore_errors=True)  # finished: not needed
                # finished: its new results replace the ones set aside, recorded or not
                drop_previous(kept.pop(name, (None, None))[0])
                commit = started_on.pop(name, None)
                # HEAD alone: --update-notebooks itself leaves the tree dirty by the end
                if commit is not None and commit.split("+")[0] != (now := head_commit()).split("+")[0]:
                    print(f"    {name}: the code changed while it ran (started on {commit[:12]}, "
                          f"now {now[:12]}): its record names the commit it started on", flush=True)
                if manifest is not None:
                    manifest.record(job.folder, k, profile, job.parameters, job.output_dir,
                                    out.done[-1][1], commit)
                print(f"    {name} done in {out.done[-1][1]:.0f} s "
                      f"({len(finished)}/{len(by_name)}) -> {job.output_dir}", flush=True)
    finally:
        for _, proc, _, _ in running.values():  # interrupted: stop what still runs
            proc.terminate()
        for _, proc, _, _ in running.values():
            proc.join(15)
            if proc.is_alive():
                proc.kill()
        for name, _, _, _ in running.values():  # and give back their last good results
            _put_back(by_name[name], kept.pop(name, (None, None)), manifest)
    return out


#: ``<results root>/.previous/<folder>/``: a finished notebook folder's results while it reruns.
PREVIOUS = ".previous"


def _link_or_copy(src: str, dst: str) -> None:
    # checkpoints are only ever replaced by a rename (atomic_save_torch), never written in
    # place, so a hard link keeps their bytes; anything else is copied
    if src.endswith((".pt", ".pt.sha256")):
        with contextlib.suppress(OSError):
            os.link(src, dst)
            return
    shutil.copy2(src, dst)


def keep_previous(folder: Path) -> Path | None:
    """Set ``folder``'s results aside (``.previous/``) before its notebook reruns: a rerun that
    fails, or is stopped (Ctrl-C, SIGTERM), gets them back byte for byte (:func:`put_back`);
    None where there is nothing to keep.  Mid-run checkpoints (``resume/``) are not kept: they
    belong to the run under way."""
    if not folder.is_dir() or not any(p.name != RESUME for p in folder.iterdir()):
        return None
    aside = folder.parent / PREVIOUS / folder.name
    partial = aside.with_name(aside.name + ".partial")  # never put back: a copy cut short
    for old in (aside, partial):
        shutil.rmtree(old, ignore_errors=True)
    aside.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(folder, partial, copy_function=_link_or_copy,
                    ignore=lambda d, names: [RESUME] if Path(d) == folder else [])
    os.replace(partial, aside)
    return aside


def drop_previous(aside: Path | None) -> None:
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


def put_back(folder: Path, aside: Path, keep: tuple[str, ...] = ()) -> None:
    """Replace ``folder`` by the results set aside; ``keep``: names in ``folder`` that move
    along (the failed notebook, the mid-run checkpoints a rerun resumes from)."""
    for name in (*keep, RESUME):
        src = folder / name
        if src.exists():
            shutil.rmtree(aside / name, ignore_errors=True)
            with contextlib.suppress(FileNotFoundError):
                (aside / name).unlink()
            os.replace(src, aside / name)
    trash = folder.with_name(f".{folder.name}.stopped")
    shutil.rmtree(trash, ignore_errors=True)
    if folder.exists():
        os.replace(folder, trash)
    os.replace(aside, folder)
    shutil.rmtree(trash, ignore_errors=True)


def _put_back(job: Job, kept: tuple[Path | None, Any], manifest: Manifest | None) -> None:
    aside, entry = kept
    if aside is None:
        return
    put_back(job.output_dir, aside, keep=(f"{job.name}.failed.ipynb",))
    if manifest is not None and entry is not None:
        manifest.entries[job.folder] = entry  # as it was: the folder holds those results again
        manifest.save()
    print(f"    {job.folder}: its previous results are back as they were", file=sys.stderr,
          flush=True)


def restore_leftovers(root: Path, manifest: Manifest) -> list[str]:
    """Results a runner killed outright (SIGKILL) left aside: put back where the notebook's
    rerun did not finish (its manifest entry is gone), dropped where it did."""
    back = []
    for aside in sorted((root / PREVIOUS).glob("*")) if (root / PREVIOUS).is_dir() else []:
        if aside.name.endswith(".partial") or aside.name in manifest.entries:
            shutil.rmtree(aside, ignore_errors=True)
        else:
            put_back(root / aside.name, aside)
            back.append(aside.name)
    return back


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
