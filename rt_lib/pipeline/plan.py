"""What a run will do, decided before anything runs: the notebooks, their parameters, folders
and order.

Everything is validated here before the first notebook starts: profile, notebook names, that each
injected parameter exists in the notebook's ``parameters`` cell, and every notebook's parameters
(its defaults plus what is injected) through the parameters class its experiment declares
(:mod:`rt_lib.pipeline.registry`; the pipeline names no notebook).  A run with changed parameters
(``--set``, an edited parameters cell) goes to a folder of its own, ``results/<name>+<changes>/``,
and the notebooks that read it read that folder: the profile's results are never overwritten.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from rt_lib.experiment import Experiment, folder_name
from rt_lib.jobs.executor import ExecutorConfig, load_config
from rt_lib.pipeline.registry import registry
from rt_lib.runtime.context import (
    CONFIGS,
    DEFAULT_PROFILE,
    available_profiles,
    base_profile,
    default_results_root,
    is_smoke,
)
from rt_lib.runtime.io import PROJECT_ROOT, available_notebooks, notebooks_dir
from rt_lib.runtime.params import load_value


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
        try:
            out[key.strip()] = load_value(value)
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise RunError(f"--set {key.strip()}={value}: not a YAML value ({problem}); e.g. "
                           f"--set 'widths=[16, 256]' or --set p=61") from None
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


#: Notebook metadata: the wall seconds of its last run that trained its runs, not loaded them
#: from the run store (a re-record over a warm store takes seconds where training took minutes:
#: the schedulers must not take notebook 11 for a quick one).
COLD_KEY = "rt_cold_seconds"


def recorded_duration(path: Path) -> float | None:
    """What a notebook's run costs from an empty run store, as recorded in it (a committed one:
    the CPU profile's run): :data:`COLD_KEY`, else the wall time papermill recorded; None when it
    records neither."""
    try:
        meta = json.loads(path.read_text())["metadata"]
        if meta.get(COLD_KEY):
            return float(meta[COLD_KEY])
        papermill = meta.get("papermill", {})
        return float(papermill["duration"]) if papermill.get("duration") else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def recorded_seconds(path: Path) -> float:
    """:func:`recorded_duration`, 60 s if none (for the dispatch order)."""
    seconds = recorded_duration(path)
    return 60.0 if seconds is None else seconds


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
    run's results, gets a folder of its own (:mod:`rt_lib.experiment`)."""
    profiles = available_profiles()
    if base_profile(profile) not in profiles:
        raise RunError(f"--profile: unknown profile {base_profile(profile)!r}; available: "
                       f"{', '.join(profiles)}")
    root = results_root or default_results_root()
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
            exp = experiment(name)
            try:  # one door from a profile to a notebook's values: Experiment.profile_config
                params = (exp.profile_config(base_profile(profile)) if exp is not None
                          else yaml.safe_load(cfg.read_text()) or {})
            except yaml.YAMLError as err:
                raise RunError(f"{cfg.relative_to(PROJECT_ROOT)}: not valid YAML "
                               f"({str(err).splitlines()[0]})") from None
            if is_smoke(profile) and exp is not None:
                # the config with the smoke cuts, where the notebook has the parameter cut
                params = {k: v for k, v in exp.params.smoke_config(params).items()
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


#: A job of a GPU machine: at most 10 minutes, of which the notebooks get 8 (scripts/gpu_run.sh
#: --minutes 8: install and packing take the rest).
JOB_MINUTES = 8
#: The longest chunk of each profile that comes in chunks: a GPU job, or a sitting of the long
#: CPU profile on a reader's 2-core machine (configs/long_chunks.yaml).
CHUNK_MINUTES = {"gpu": JOB_MINUTES, "long": 90}
#: How each profile's chunk runs, for --list.
CHUNK_COMMAND = {"gpu": "scripts/gpu_run.sh NN,NN",
                 "long": "./run_all.sh --profile long --only NN,NN --executor local"}


@dataclass(frozen=True)
class Chunk:
    notebooks: tuple[str, ...]  # notebook names, in the order they run
    minutes: float  # expected (one GPU, or 2 cores for the long profile: the configs' headers say how)


def profile_notebooks(profile: str) -> list[str]:
    """The notebooks ``profile`` has a config for (``configs/<profile>/``), in order."""
    return sorted(p.stem for p in (CONFIGS / profile).glob("*.yaml"))


def chunks(profile: str) -> list[Chunk]:
    """``configs/<profile>_chunks.yaml``: the profile in pieces that each fit one job, in the
    order to run them ([] for a profile without one); refuses a notebook the profile does not
    cover, one in two chunks, and a chunk over the profile's :data:`CHUNK_MINUTES`, naming it."""
    path = CONFIGS / f"{profile}_chunks.yaml"
    if not path.exists():
        return []
    books = available_notebooks()
    profile_has = set(profile_notebooks(profile))
    out, seen = [], set()
    for entry in yaml.safe_load(path.read_text()) or []:
        names = []
        for number in entry["notebooks"]:
            name = next((n for n in books if n.startswith(f"{int(number):02d}_")), None)
            if name is None or name not in profile_has:
                raise RunError(f"{path.name}: notebook {number} is not in the {profile} profile")
            if name in seen:
                raise RunError(f"{path.name}: notebook {number} is in two chunks")
            seen.add(name)
            names.append(name)
        minutes, limit = float(entry["minutes"]), CHUNK_MINUTES.get(profile, JOB_MINUTES)
        if minutes > limit:
            raise RunError(f"{path.name}: chunk {','.join(n[:2] for n in names)} expects "
                           f"{minutes:g} minutes, over one chunk's {limit}")
        out.append(Chunk(tuple(names), minutes))
    return out
