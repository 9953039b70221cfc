"""Headless runner behind ``./run_all.sh``: every numbered notebook through papermill.

    ./run_all.sh                      # CPU profile (the notebooks' own defaults), all notebooks
    ./run_all.sh --profile paper      # inject configs/paper/<notebook>.yaml (GPU when present)
    ./run_all.sh --only 01 --set p=59 # one notebook, one parameter changed

Everything is validated before the first notebook starts: profile, notebook names, and that each
injected parameter exists in the notebook's ``parameters`` cell.  Executed notebooks land in
``results/<name>/<name>.ipynb`` (``results/<profile>/<name>/`` for other profiles), written to a
temporary file first; a notebook that fails is kept as ``<name>.failed.ipynb`` with its error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from rt_lib.io import PROJECT_ROOT, atomic_path

NOTEBOOKS = PROJECT_ROOT / "notebooks"
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


def available_notebooks() -> dict[str, Path]:
    return {p.stem: p for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))}


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


def notebook_parameters(path: Path) -> set[str]:
    import papermill

    return set(papermill.inspect_notebook(str(path)))


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
        jobs.append(Job(name, path, params, root / name))
    if not jobs:
        raise RunError("no numbered notebooks found under notebooks/")
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
                cwd=str(job.notebook.parent), log_output=log_output, progress_bar=log_output is False,
            )
        except Exception:
            # Always beside the results (also with --update-notebooks): notebooks/ keeps only
            # notebooks that ran through.
            os.replace(tmp, job.output_dir / f"{job.name}.failed.ipynb")
            raise
    stale = job.output_dir / f"{job.name}.failed.ipynb"
    stale.unlink(missing_ok=True)
    return time.perf_counter() - start


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
        jobs = plan(args.profile, args.only, sets)
    except RunError as err:
        print(f"run_all.sh: error: {err}", file=sys.stderr)
        return 2

    # Progress bars inside notebooks would land in their stderr outputs (and in nbval's
    # comparison); papermill's own per-cell bar shows progress instead.
    os.environ.setdefault("TQDM_DISABLE", "1")
    failures, timings = [], []
    for job in jobs:
        print(f"==> {job.name} ({args.profile} profile)", flush=True)
        os.environ["RT_RESULTS"] = str(job.output_dir.parent)
        output = job.notebook if args.update_notebooks else job.output_dir / f"{job.name}.ipynb"
        try:
            seconds = execute(job, output, args.log_output)
        except Exception as err:  # keep going: report every failing notebook at the end
            failures.append(job.name)
            print(f"    FAILED: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                  file=sys.stderr)
            print(f"    executed notebook kept as {job.output_dir / (job.name + '.failed.ipynb')}",
                  file=sys.stderr)
            continue
        timings.append((job.name, seconds))
        print(f"    done in {seconds:.0f} s -> {job.output_dir}", flush=True)
    for name, seconds in timings:
        print(f"{name:<32} {seconds:8.1f} s")
    if failures:
        print(f"run_all.sh: {len(failures)} notebook(s) failed: {', '.join(failures)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
