"""An experiment, declared once by its own module, and where its results go.

Every module of :mod:`rt_lib.experiments` that runs a notebook declares (the one line by which
an experiment module meets the pipeline)::

    EXPERIMENT = Experiment("01_modular_addition", ModularAdditionParams)

with the notebooks whose results it reads (``reads=``); the pipeline's registry
(:func:`rt_lib.pipeline.registry.registry`) finds them all, and the runner (``./run_all.sh``)
validates, orders and places notebooks from it alone.  Adding an experiment is one notebook plus
one module.  This module sits below the pipeline: it imports nothing from it
(tests/test_layers.py).

**Results folders.**  A profile's own run (the notebook's defaults = the CPU profile, or
``configs/<profile>/<name>.yaml``) writes to ``results/[<profile>/]<name>/``.  A run whose
parameters differ from its profile's (``--set``, an edited parameters cell, or a change made in
a live notebook) writes to a folder of its own, ``<name>+<changes>`` (``01_modular_addition+p=4``;
a short hash when the changes do not fit a name), with ``parameters.yaml`` beside its results:
exploring never overwrites the profile's results.  A notebook that reads an exploration run's
results is itself an exploration run, named after the changes it reads.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rt_lib.claims.ledger import Claims
from rt_lib.runtime import context
from rt_lib.runtime.context import CONFIGS, DEFAULT_PROFILE, base_profile, is_smoke
from rt_lib.runtime.io import PROJECT_ROOT, atomic_write_text, folder_of, results_root, use_folder
from rt_lib.runtime.params import Params, parameters_cell, plain

PARAMETERS_FILE = "parameters.yaml"
_SAFE = re.compile(r"[A-Za-z0-9_.,=\-\[\]]+")
# Profiles whose own runs fail a notebook on a claim that does not hold: the committed CPU
# profile (what nbval re-runs) and the papers' scale.  Between them, the GPU profile's runs
# show what a GPU reaches in minutes: every status is recorded and reported, none fails the run.
STRICT_PROFILES = (DEFAULT_PROFILE, "paper")
MAX_SLUG = 48  # longer change lists are named by a hash (parameters.yaml says what they are)


def current_profile() -> str:
    """The profile this process runs (the run context's; ``cpu`` in a notebook opened by hand)."""
    return context.current().profile


def slug(changes: dict[str, Any]) -> str:
    """``p=4,widths=[64,128]`` for short changes, else ``h<sha256 of them>``."""
    text = ",".join(f"{k}={json.dumps(plain(v), separators=(',', ':'))}".replace('"', "")
                    for k, v in sorted(changes.items()))
    if len(text) <= MAX_SLUG and _SAFE.fullmatch(text):
        return text
    digest = hashlib.sha256(json.dumps(plain(changes), sort_keys=True).encode()).hexdigest()
    return "h" + digest[:10]


def folder_name(name: str, changes: dict[str, Any]) -> str:
    return name if not changes else f"{name}+{slug(changes)}"


def _reduction(params: Params) -> Any:
    """``params``' task against the paper's (:meth:`Params.smaller_than_paper`); a notebook that
    does not say records its claims' task size as unknown."""
    try:
        return params.smaller_than_paper()
    except NotImplementedError:
        from rt_lib.claims.ledger import RUN_TASK

        return RUN_TASK


@dataclass(frozen=True)
class Experiment:
    name: str  # the notebook's file stem, e.g. "01_modular_addition"
    params: type[Params]  # its parameters; the class defaults are the CPU profile
    reads: tuple[str, ...] = ()  # notebooks whose results it reads: it runs after them
    title: str = field(default="", compare=False)  # one line for listings
    # Claims measured not to show at the CPU profile's scale: {claim id: the measurement and the
    # scale that shows it}.  Recorded and reported there, never failing its run (rt_lib.claims.ledger).
    not_shown_on_cpu: dict[str, str] = field(default_factory=dict, compare=False)
    # The same for the GPU profile (configs/gpu/), where its shorter runs were measured not to
    # reach the scale a claim needs: a claim cut short there is not a claim that fails.
    not_shown_on_gpu: dict[str, str] = field(default_factory=dict, compare=False)
    # The training steps the notebook takes, for rt_lib.training.footprint (peak memory, FLOPs per step
    # at a profile's batch): parameters -> [StepShape]; None for a notebook that trains nothing.
    step_shapes: Callable[[Any], list] | None = field(default=None, compare=False)

    def profile_config(self, profile: str) -> dict[str, Any]:
        """The values ``profile`` injects ({} for the CPU profile); a smoke profile's are its base
        profile's with the experiment's smoke cuts (:attr:`rt_lib.runtime.params.Params.SMOKE`)."""
        if is_smoke(profile):
            return self.params.smoke_config(self.profile_config(base_profile(profile)))
        if profile == DEFAULT_PROFILE:
            return {}
        path = CONFIGS / profile / f"{self.name}.yaml"
        if not path.exists():
            raise FileNotFoundError(f"--profile {profile}: {path.relative_to(PROJECT_ROOT)} "
                                    "is missing")
        return yaml.safe_load(path.read_text()) or {}

    def profile_params(self, profile: str) -> Params:
        return self.params(**self.profile_config(profile))

    def changes(self, params: Params, profile: str) -> dict[str, Any]:
        """What ``params`` changes from ``profile``'s parameters of this experiment."""
        return params.changes_from(self.profile_params(profile))

    def parameters_cell(self) -> str:
        """The source of the notebook's parameters cell, written from :attr:`params`
        (:func:`rt_lib.runtime.params.parameters_cell`; scripts/parameters_cells.py writes it)."""
        module = Path(inspect.getsourcefile(self.params)).resolve().relative_to(PROJECT_ROOT)
        return parameters_cell(self.params, str(module))

    def start(self, namespace: dict[str, Any]) -> tuple[Any, Path, Claims]:
        """The notebook's one call after its parameters cell: (parameters built and checked
        from ``namespace``, its results folder, its claims record).

        The folder is the one the runner chose (the run context's), else the profile's own when
        the parameters are the profile's, else a folder of their own: a notebook changed in a
        live session does not overwrite the profile's results either."""
        params = self.params.from_namespace(namespace)
        if self.name not in context.current().folders:
            use_folder(self.name, folder_name(self.name, self.changes(params, current_profile())))
        out = results_root() / folder_of(self.name)
        out.mkdir(parents=True, exist_ok=True)
        exploring = out.name != self.name
        if exploring:
            record = {"notebook": self.name, "profile": current_profile(),
                      "changes": plain(self.changes(params, current_profile())),
                      "reads": {n: folder_of(n) for n in self.reads},
                      "parameters": params.as_plain()}
            atomic_write_text(out / PARAMETERS_FILE, yaml.safe_dump(record, sort_keys=False))
            print(f"exploration run: results in {out} (the profile's stay as they were)")
        declared = {DEFAULT_PROFILE: self.not_shown_on_cpu,
                    "gpu": self.not_shown_on_gpu}.get(current_profile())
        if is_smoke(current_profile()):
            print(f"smoke test of the {base_profile(current_profile())} profile: its shapes, a "
                  "handful of steps; the claims below are checked, not meant to hold")
        strict = (not exploring and not is_smoke(current_profile())
                  and current_profile() in STRICT_PROFILES)
        return params, out, Claims(out, strict=strict,
                                   notebook=self.name,
                                   not_shown=declared,
                                   declared_in=f"not_shown_on_{current_profile()}",
                                   reduced=_reduction(params))
