"""Headless runner behind ``./run_all.sh``: every numbered notebook through papermill.

    ./run_all.sh                      # CPU profile (the notebooks' own defaults), all notebooks
    ./run_all.sh --profile paper      # inject configs/paper/<notebook>.yaml (GPU when present)
    ./run_all.sh --only 01 --set p=59 # one notebook, one parameter changed
    ./run_all.sh --jobs 1             # one notebook at a time (default: one per free core)

Everything is validated before the first notebook starts: profile, notebook names, that each
injected parameter exists in the notebook's ``parameters`` cell, and every notebook's parameters
(its defaults plus what is injected) through the notebook's own validator.  Executed notebooks
land in
``results/<name>/<name>.ipynb`` (``results/<profile>/<name>/`` for other profiles), written to a
temporary file first; a notebook that fails is kept as ``<name>.failed.ipynb`` with its error.

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
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib
import json
import multiprocessing
import multiprocessing.connection
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

from rt_lib.io import PROJECT_ROOT, RESUME, atomic_path
from rt_lib.manifest import Manifest, content_key, is_temporary

NOTEBOOKS = PROJECT_ROOT / "notebooks"  # $RT_NOTEBOOKS: another folder of numbered notebooks
CONFIGS = PROJECT_ROOT / "configs"
DEFAULT_PROFILE = "cpu"  # the notebooks' own parameter defaults; no config file


class RunError(ValueError):
    """A bad command line: raised before any notebook runs."""


@dataclass(frozen=True)
class Job:
    name: str  # e.g. "01_modular_addition"
    notebook: Path
    parameters: dict
    output_dir: Path


def notebooks_dir() -> Path:
    return Path(os.environ.get("RT_NOTEBOOKS", NOTEBOOKS))


def available_notebooks() -> dict[str, Path]:
    return {p.stem: p for p in sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))}


def available_profiles() -> list[str]:
    return [DEFAULT_PROFILE] + sorted(p.name for p in CONFIGS.iterdir() if p.is_dir()
                                      and p.name != DEFAULT_PROFILE)


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


def parse_sets(pairs: list[str] | None) -> dict:
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise RunError(f"--set expects key=value, got {pair!r}")
        out[key.strip()] = yaml.safe_load(value)
    return out


@cache
def needs() -> dict[str, frozenset[str]]:
    """{notebook: the notebooks whose results it reads}, from the experiments' own source tables.

    Run together, a notebook starts only after these finished (07 and 09 would otherwise report
    missing restarts or train fallbacks; 12, 13 and 15 would train 11's runs a second time)."""
    from rt_lib.experiments import miiii, miiii_analysis, random_miiii, subspace, table1

    return {
        table1.NAME: frozenset(nb for nb, _ in table1.SOURCES.values()),
        subspace.NAME: frozenset(nb for nb, *_ in subspace.SOURCES.values()),
        miiii_analysis.NAME_EMBEDDINGS: frozenset({miiii.NAME}),
        miiii_analysis.NAME_NEURONS: frozenset({miiii.NAME}),
        random_miiii.NAME: frozenset({miiii.NAME}),  # compares with 11's trained runs
    }


def recorded_seconds(path: Path) -> float:
    """Wall time papermill recorded in a committed notebook (CPU profile); 60 s if none."""
    try:
        meta = json.loads(path.read_text())["metadata"].get("papermill", {})
        return float(meta.get("duration") or 60.0)
    except (OSError, ValueError, KeyError):
        return 60.0


def chains(names: list[str]) -> list[list[str]]:
    """Notebooks that read each other's results, joined into chains in run order (name order
    respects :func:`needs`); the longest chain (recorded seconds) first."""
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for name, reads in needs().items():
        for other in reads:
            if name in parent and other in parent:
                parent[root(name)] = root(other)
    groups: dict[str, list[str]] = {}
    for n in sorted(names):
        groups.setdefault(root(n), []).append(n)
    books = available_notebooks()
    cost = {r: sum(recorded_seconds(books[n]) if n in books else 60.0 for n in g)
            for r, g in groups.items()}
    return [groups[r] for r in sorted(groups, key=lambda r: (-cost[r], r))]


def default_jobs() -> int:
    """Notebooks at once: the usable cores divided by the torch threads each uses, at most 4."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = int(os.environ.get("RT_THREADS", "1"))
    return max(1, min(4, (cores or 1) // max(threads, 1)))


def notebook_parameters(path: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(path)))


# notebook: (module of rt_lib.experiments, the parameters class its second cell builds)
VALIDATORS = {
    "01_modular_addition": ("modular_addition", "ModularAdditionParams"),
    "02_needle_in_a_haystack": ("needle", "NeedleParams"),
    "03_decimal_addition": ("decimal_addition", "DecimalParams"),
    "04_parentheses": ("parentheses", "ParenthesesParams"),
    "05_memorisation": ("memorisation", "MemorisationParams"),
    "06_embedding_ablations": ("ablations", "AblationParams"),
    "07_table1": ("table1", "Table1Params"),
    "08_tinystories": ("tinystories", "TinyStoriesParams"),
    "09_subspace": ("subspace", "SubspaceParams"),
    "10_circuit_imitation": ("imitation", "ImitationParams"),
    "11_miiii_training": ("miiii", "MiiiiParams"),
    "12_miiii_embeddings": ("miiii_analysis", "EmbeddingParams"),
    "13_miiii_neurons": ("miiii_analysis", "NeuronParams"),
    "14_miiii_search": ("miiii_search", "SearchParams"),
    "15_random_miiii": ("random_miiii", "RandomMiiiiParams"),
}


def validator(name: str) -> Callable[[dict], object] | None:
    """What notebook ``name``'s second cell calls to build (and check) its parameters."""
    if name not in VALIDATORS:
        return None
    module, cls = VALIDATORS[name]
    return getattr(importlib.import_module(f"rt_lib.experiments.{module}"), cls).from_namespace


def default_parameters(path: Path) -> dict:
    """The values of a notebook's ``parameters`` cell (plain assignments), as it would run."""
    cells = json.loads(path.read_text())["cells"]
    source = next("".join(c["source"]) for c in cells
                  if "parameters" in c.get("metadata", {}).get("tags", []))
    namespace: dict = {}
    exec(compile(source, f"{path.name}: parameters cell", "exec"), namespace)
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def validate(job: Job) -> None:
    """Build the notebook's parameters as its own code does; a bad value raises :class:`RunError`
    naming the notebook and the parameter (the validators' messages name it and what is allowed)."""
    build = validator(job.name)
    if build is None:
        return
    namespace = default_parameters(job.notebook) | job.parameters
    try:
        build(namespace)
    except (ValueError, TypeError, KeyError, FileNotFoundError) as err:
        raise RunError(f"{job.name}: {err}") from None


def plan(profile: str, only: list[str] | None, sets: dict,
         results_root: Path | None = None) -> list[Job]:
    """Validate everything and return the jobs; raises :class:`RunError` and writes nothing."""
    profiles = available_profiles()
    if profile not in profiles:
        raise RunError(f"--profile: unknown profile {profile!r}; available: {', '.join(profiles)}")
    root = results_root or Path(os.environ.get("RT_RESULTS", PROJECT_ROOT / "results"))
    if profile != DEFAULT_PROFILE:
        root = root / profile
    jobs = []
    for name, path in select(only).items():
        params: dict = {}
        if profile != DEFAULT_PROFILE:
            cfg = CONFIGS / profile / f"{name}.yaml"
            if not cfg.exists():
                raise RunError(f"--profile {profile}: {cfg.relative_to(PROJECT_ROOT)} is missing")
            params = yaml.safe_load(cfg.read_text()) or {}
        params.update(sets)
        known = notebook_parameters(path)
        unknown = sorted(set(params) - known)
        if unknown:
            raise RunError(f"{name}: unknown parameter(s) {unknown}; "
                           f"the notebook's parameters are {sorted(known)}")
        job = Job(name, path, params, root / name)
        validate(job)
        jobs.append(job)
    if not jobs:
        raise RunError(f"no numbered notebooks found under {notebooks_dir()}")
    return jobs


def execute(job: Job, output: Path, log_output: bool = False) -> float:
    """Run one notebook with papermill into ``output`` (atomically); returns wall seconds."""
    import papermill

    job.output_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with atomic_path(output) as tmp:
        try:
            papermill.execute_notebook(
                str(job.notebook), str(tmp), parameters=job.parameters, kernel_name="python3",
                cwd=str(job.notebook.parent), log_output=log_output, progress_bar=False,
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


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _child(job: Job, output: Path, log_output: bool, parent: int, key: str) -> None:
    _die_with_parent()
    if os.getppid() != parent:  # the runner died before prctl took effect
        os._exit(1)
    signal.signal(signal.SIGTERM, _interrupt)  # unwind: kernel shut down, temporary file removed
    os.environ["RT_RESULTS"] = str(job.output_dir.parent)
    os.environ["RT_RUN_KEY"] = key  # mid-run checkpoints resume only for these exact inputs
    try:
        execute(job, output, log_output)
    except Exception as err:
        first = str(err).splitlines()[0] if str(err) else ""
        print(f"    FAILED {job.name}: {type(err).__name__}: {first}\n"
              f"    executed notebook kept as {job.output_dir / (job.name + '.failed.ipynb')}",
              file=sys.stderr, flush=True)
        sys.exit(1)


@dataclass
class Outcome:
    done: list[tuple[str, float]]  # (name, seconds) in finishing order
    skipped: list[str]  # up to date: not rerun
    failed: list[str]  # failed, or not run because a notebook it reads failed


def run_jobs(jobs: list[Job], outputs: dict[str, Path], n_jobs: int, log_output: bool = False,
             manifest: Manifest | None = None, profile: str = DEFAULT_PROFILE,
             rerun: frozenset[str] | set[str] = frozenset()) -> Outcome:
    """Run ``jobs``, ``n_jobs`` at a time, each notebook after the selected ones it
    :func:`needs`.  With a ``manifest``, a notebook (not in ``rerun``) whose results are up to
    date is skipped, and each finished one is recorded."""
    by_name = {j.name: j for j in jobs}
    deps = {n: needs().get(n, frozenset()) & set(by_name) for n in by_name}
    books = available_notebooks()
    seconds = {n: recorded_seconds(books[n]) if n in books else 60.0 for n in by_name}

    @cache
    def critical(name: str) -> float:  # its time plus the longest chain of readers after it
        return seconds[name] + max((critical(m) for m in by_name if name in deps[m]), default=0.0)

    def key(name: str) -> str:  # at dispatch: what the notebooks it reads hold by then
        reads = {u: (e.key if (e := manifest.entries.get(u)) else None)
                 for u in sorted(needs().get(name, ()))} if manifest else {}
        job = by_name[name]
        return content_key(job.notebook, profile, job.parameters, reads)

    order = sorted(by_name, key=lambda n: (-critical(n), n))
    ctx = multiprocessing.get_context("spawn")
    running: dict[int, tuple[str, multiprocessing.process.BaseProcess, float, str]] = {}
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
                if manifest is not None and name not in rerun:
                    reason = manifest.stale_reason(name, k)
                    if reason is None:
                        finished.add(name)
                        out.skipped.append(name)
                        print(f"    {name} is up to date (manifest): skipped; --force reruns it",
                              flush=True)
                        continue
                    print(f"==> {name}: {reason}", flush=True)
                if manifest is not None:
                    manifest.forget(name)
                proc = ctx.Process(target=_child, name=name,
                                   args=(by_name[name], outputs[name], log_output, os.getpid(),
                                         k))
                proc.start()
                running[proc.sentinel] = (name, proc, time.perf_counter(), k)
                print(f"==> {name} started", flush=True)
            if not running:
                continue
            for sentinel in multiprocessing.connection.wait(list(running)):
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
                    manifest.record(name, k, profile, job.parameters, job.output_dir,
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


@contextlib.contextmanager
def exclusive(root: Path) -> Iterator[None]:
    """One ``run_all.sh`` per results root at a time (an advisory lock, released on any exit)."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".run_all.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunError(f"another ./run_all.sh is writing to {root}; "
                           "wait for it or stop it") from None
        yield


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
    parser.add_argument("--log-output", action="store_true", help="stream cell output")
    parser.add_argument("--list", action="store_true", help="list notebooks and profiles")
    args = parser.parse_args(argv)

    try:
        if args.list:
            print("notebooks:", ", ".join(available_notebooks()))
            print("profiles: ", ", ".join(available_profiles()))
            return 0
        sets = parse_sets(args.sets)
        if args.update_notebooks and (args.profile != DEFAULT_PROFILE or sets):
            raise RunError("--update-notebooks only records the CPU profile without --set")
        if args.jobs is not None and args.jobs < 1:
            raise RunError(f"--jobs must be >= 1, got {args.jobs}")
        jobs = plan(args.profile, args.only, sets)
    except RunError as err:
        print(f"run_all.sh: error: {err}", file=sys.stderr)
        return 2

    # Progress bars inside notebooks would land in their stderr outputs (and in nbval's
    # comparison); the runner prints a line per notebook started and finished instead.
    os.environ.setdefault("TQDM_DISABLE", "1")
    n_jobs = args.jobs or default_jobs()
    outputs = {job.name: job.notebook if args.update_notebooks
               else job.output_dir / f"{job.name}.ipynb" for job in jobs}
    root = jobs[0].output_dir.parent
    rerun = {j.name for j in jobs} if (args.force or args.update_notebooks) else set()
    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: stop the notebooks, then exit
    try:
        with exclusive(root):
            folders = [root / name for name in available_notebooks()]
            if args.update_notebooks:
                folders.append(notebooks_dir())
            gone = remove_unfinished(folders)
            if gone:
                print(f"run_all.sh: removed {len(gone)} temporary file(s) of writes an "
                      "interrupted run left unfinished", flush=True)
            manifest = Manifest(root)
            for problem in manifest.problems:
                print(f"run_all.sh: warning: {problem}", file=sys.stderr, flush=True)
            print(f"run_all.sh: {len(jobs)} notebook(s), {args.profile} profile, {n_jobs} at a "
                  f"time; manifest {manifest.path}", flush=True)
            outcome = run_jobs(jobs, outputs, n_jobs, args.log_output, manifest, args.profile,
                               rerun)
    except RunError as err:
        print(f"run_all.sh: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("run_all.sh: interrupted; run it again to finish what is left", file=sys.stderr)
        return 130
    timings, failures = outcome.done, outcome.failed
    if outcome.skipped:
        print(f"up to date, skipped: {', '.join(outcome.skipped)}")
    for name, seconds in timings:
        print(f"{name:<32} {seconds:8.1f} s")
    if failures:
        print(f"run_all.sh: {len(failures)} notebook(s) failed: {', '.join(failures)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
