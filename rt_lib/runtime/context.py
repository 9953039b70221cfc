"""The run context: where this process's notebook writes and reads, in which profile, with what.

The runner (``./run_all.sh``, :mod:`rt_lib.pipeline`) decides it once per notebook and hands it
to the notebook's process as one value, the JSON of :class:`RunContext` in ``$RT_RUN``; the
library reads it with :func:`current`.  A notebook opened by hand in Jupyter has no ``$RT_RUN``
and gets the defaults: the CPU profile, ``results/`` beside the package (or ``$RT_RESULTS``),
``$RT_THREADS`` torch threads (1 when unset), training runs inline.

Only what a person sets is read from the environment by name: ``RT_RESULTS`` (another results
folder), ``RT_THREADS`` (torch threads per notebook) and ``RT_TINYSTORIES`` (the text of
notebook 08, :mod:`rt_lib.tasks.stories`).

Profiles are named here too, because a results path says which profile wrote it: ``cpu`` (the
notebooks' own defaults), a folder of ``configs/`` (``paper``, ``gpu``), and a profile's smoke
test (``paper-smoke``: its shapes, a handful of steps, results of its own).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = PROJECT_ROOT / "configs"  # configs/<profile>/<notebook>.yaml: what each profile injects

ENV = "RT_RUN"  # the runner's hand-over: the JSON of RunContext's fields
RESULTS_ENV = "RT_RESULTS"  # a person's choice of results folder (default: results/)
THREADS_ENV = "RT_THREADS"  # a person's choice of torch threads per notebook (default: 1)

DEFAULT_PROFILE = "cpu"  # the notebooks' own defaults; no config file
SMOKE = "-smoke"  # "paper-smoke": the paper profile's smoke test (Params.SMOKE), results of its own


def available_profiles() -> list[str]:
    """``cpu`` and every folder of ``configs/``."""
    return [DEFAULT_PROFILE] + sorted(p.name for p in CONFIGS.iterdir() if p.is_dir()
                                      and p.name != DEFAULT_PROFILE)


def is_smoke(profile: str) -> bool:
    return profile.endswith(SMOKE)


def base_profile(profile: str) -> str:
    """The profile a smoke test cuts down ("paper" for "paper-smoke"); others are their own."""
    return profile[: -len(SMOKE)] if is_smoke(profile) else profile


def env_threads() -> int:
    """``$RT_THREADS``, torch's threads per notebook: 1 when unset; anything but a positive
    integer is a :class:`ValueError` that names it."""
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return 1
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"{THREADS_ENV} must be a positive integer (torch threads per "
                         f"notebook), got {raw!r}")
    return threads


def default_results_root() -> Path:
    """``$RT_RESULTS`` if set, else ``results/`` beside the package (never the working dir)."""
    return Path(os.environ.get(RESULTS_ENV) or PROJECT_ROOT / "results")


@dataclass(frozen=True)
class RunContext:
    """What the runner decided for one notebook's process."""

    results_root: Path  # results/[<profile>/]: the notebooks' folders are below it
    profile: str = DEFAULT_PROFILE  # which configs/ were injected; results paths and messages say it
    threads: int = 1  # torch threads (seeding.set_threads): float reductions depend on it
    # {notebook: its results folder} for this notebook and those it reads: an exploration run
    # writes to (and its readers read) "<name>+<changes>", never the profile's own folder.
    folders: dict[str, str] = field(default_factory=dict)
    notebook: str | None = None  # the notebook run; its folder holds mid-run checkpoints
    run_key: str | None = None  # its inputs' content key: checkpoints resume only for the same
    # ExecutorConfig's fields (rt_lib.jobs.executor) where training runs go; None: inline.
    # Not part of run_key: where a run executes never changes what it computes.
    executor: dict[str, Any] | None = None

    def to_env(self) -> dict[str, str]:
        """``{RT_RUN: JSON}``, for the notebook's process."""
        fields = asdict(self) | {"results_root": str(self.results_root)}
        return {ENV: json.dumps(fields, sort_keys=True)}


def from_env() -> RunContext:
    """The context ``$RT_RUN`` holds; the defaults when it is unset."""
    raw = os.environ.get(ENV)
    if not raw:
        return RunContext(default_results_root(), threads=env_threads())
    try:
        fields = json.loads(raw)
        fields["results_root"] = Path(fields["results_root"])
        return RunContext(**fields)
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{ENV} is not a run context the runner wrote ({err}): {raw[:200]!r}") from None


def current() -> RunContext:
    """This process's run context (read from the environment each time: a test or a notebook
    may point ``RT_RESULTS`` elsewhere between calls)."""
    return from_env()
