"""``./run_all.sh``: every numbered notebook through papermill, from one command line.

    ./run_all.sh                      # CPU profile (the notebooks' own defaults), all notebooks
    ./run_all.sh --profile paper      # inject configs/paper/<notebook>.yaml (GPU when present)
    ./run_all.sh --only 01 --set p=59 # one notebook, one parameter changed
    ./run_all.sh --jobs 1             # one notebook at a time (default: one per free core)
    ./run_all.sh --profile paper --executor slurm   # training runs as Slurm job arrays

The pipeline's rooms, in the order a run meets them: :mod:`~rt_lib.pipeline.plan` (validate and
place every notebook before anything runs), :mod:`~rt_lib.pipeline.schedule` (run them, each in
its own process, with :mod:`~rt_lib.pipeline.progress` lines),
:mod:`~rt_lib.runtime.manifest` (what is up to date), :mod:`~rt_lib.pipeline.report` (claims,
footprints, the :mod:`~rt_lib.site.pages`).  Executed notebooks land in
``results/<name>/<name>.ipynb`` (``results/<profile>/<name>/`` for other profiles), written to a
temporary file first; a notebook that fails is kept as ``<name>.failed.ipynb`` with its error.
The run ends with the count of the claims that hold.

``--executor local|slurm`` hands a notebook's training runs to submitit
(:mod:`rt_lib.jobs.executor`); the notebook waits for its jobs and goes on.  The executor is
not part of a run's key.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from rt_lib.jobs.executor import KINDS, as_fields
from rt_lib.pipeline.plan import (
    Job,
    RunError,
    default_parameters,
    executor_config,
    notebook_parameters,
    parse_sets,
    plan,
)
from rt_lib.pipeline.report import build_site_of, list_runs, report_claims, report_footprints
from rt_lib.pipeline.schedule import (
    LOCK,
    exclusive,
    interrupt,
    remove_unfinished,
    restore_leftovers,
    run_jobs,
    stacks_on_sigusr1,
)
from rt_lib.runtime import store as run_store
from rt_lib.runtime.context import DEFAULT_PROFILE, SMOKE, base_profile, env_threads, is_smoke
from rt_lib.runtime.io import NOTEBOOKS, WriteFailedError, available_notebooks, notebooks_dir
from rt_lib.runtime.manifest import Manifest
from rt_lib.runtime.seeding import default_jobs
from rt_lib.site.pages import SITE

__all__ = ["Job", "LOCK", "RunError", "available_notebooks", "default_parameters", "exclusive",
           "main", "notebook_parameters", "notebooks_dir", "plan", "run_jobs"]


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
                        help="YAML of executor settings (rt_lib.jobs.executor.ExecutorConfig)")
    parser.add_argument("--no-site", action="store_true",
                        help="leave the site unbuilt (a GPU job: its evidence is imported and the "
                             "site built where nbconvert is installed)")
    parser.add_argument("--log-output", action="store_true", help="stream cell output")
    parser.add_argument("--list", action="store_true",
                        help="list notebooks, profiles and the runs under results/")
    parser.add_argument("--no-cache", action="store_true",
                        help="train every run from nothing, neither loading from nor writing to "
                             "the run store (RT_CACHE=off does the same)")
    parser.add_argument("--cache", action="store_true",
                        help="print the run store's folder, size, entries and hit counts")
    parser.add_argument("--cache-clear", action="store_true", help="empty the run store")
    args = parser.parse_args(argv)
    stacks_on_sigusr1()
    if args.no_cache:
        os.environ[run_store.CACHE_ENV] = "off"  # the notebooks' processes inherit it
    if args.cache or args.cache_clear:
        return run_store.main(["--clear"] if args.cache_clear else [])
    # every run this command loads or trains is counted under one tag (its last line)
    session = os.environ.setdefault(run_store.SESSION_ENV, f"run_all-{os.getpid()}-{time.time():.0f}")

    try:
        if args.list:
            if list_runs(args.profile if args.profile != DEFAULT_PROFILE else None):
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
    n_jobs = args.jobs or default_jobs()
    outputs = {job.name: job.notebook if args.update_notebooks
               else job.output_dir / f"{job.name}.ipynb" for job in jobs}
    root = jobs[0].output_dir.parent
    rerun = {j.name for j in jobs} if (args.force or args.update_notebooks) else set()
    signal.signal(signal.SIGTERM, interrupt)  # like Ctrl-C: stop the notebooks, then exit
    # Ctrl-C itself, also where it was inherited as ignored (a command started with `&` from a
    # script gets SIGINT ignored, and Python then leaves it so): it must still unwind the run.
    signal.signal(signal.SIGINT, interrupt)
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
            for back in restore_leftovers(root, manifest):
                print(f"run_all.sh: {back}: the results a stopped rerun had set aside are back",
                      flush=True)
            for problem in manifest.problems:
                print(f"run_all.sh: warning: {problem}", file=sys.stderr, flush=True)
            where = "" if executor.kind == "inline" else f", training runs as {executor.kind} jobs"
            print(f"run_all.sh: {len(jobs)} notebook(s), {args.profile} profile, {n_jobs} at a "
                  f"time{where}; manifest {manifest.path}", flush=True)
            outcome = run_jobs(jobs, outputs, n_jobs, args.log_output, manifest, args.profile,
                               rerun, executor=None if executor.kind == "inline"
                               else as_fields(executor))
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
    # The README's picture of the site, from a full run of the committed CPU profile only: never
    # from --only, --set, an exploration, other notebooks (tests) or a run with a failure.
    full = (args.profile == DEFAULT_PROFILE and not args.only and not sets and not failures
            and notebooks_dir() == NOTEBOOKS and all(j.folder == j.name for j in jobs))
    if not args.no_site:
        build_site_of(root, args.profile,
                      {j.name: outputs[j.name] for j in jobs if j.folder == j.name}, picture=full)
    try:
        print(run_store.describe(run_store.current(), session))
    except run_store.StoreError as err:
        print(f"run_all.sh: warning: {err}", file=sys.stderr)
    if failures:
        print(f"run_all.sh: {len(failures)} notebook(s) failed: {', '.join(failures)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
