"""The registry of experiments (every module of :mod:`rt_lib.experiments` that declares an
:class:`rt_lib.experiment.Experiment`), the training steps they declare, and the run folders under
a results root.  The declaration and the results-folder rules are :mod:`rt_lib.experiment`'s."""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from pathlib import Path
from typing import Any

from rt_lib.experiment import PARAMETERS_FILE, Experiment
from rt_lib.runtime.io import DamagedFileError, read_yaml_result, results_root


def profile_step_shapes(profile: str, names: list[str] | None = None) -> list[tuple[str, Any]]:
    """``[(notebook, StepShape)]``: every training step each notebook (``names``; None: all)
    takes in ``profile``, as its experiment declares (for :mod:`rt_lib.training.footprint`)."""
    return [(name, shape) for name, exp in registry().items()
            if (names is None or name in names) and exp.step_shapes is not None
            for shape in exp.step_shapes(exp.profile_params(profile))]


@cache
def registry() -> dict[str, Experiment]:
    """{notebook name: experiment} over every module of rt_lib.experiments that declares one."""
    import rt_lib.experiments as package

    found: dict[str, Experiment] = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        experiment = getattr(module, "EXPERIMENT", None)
        if isinstance(experiment, Experiment):
            if experiment.name in found:
                raise RuntimeError(f"two modules declare the experiment {experiment.name}")
            found[experiment.name] = experiment
    return dict(sorted(found.items()))


def runs(root: Path | None = None) -> list[dict[str, Any]]:
    """Every run folder under a results root: name, whether it is a profile's own run, the
    changes of an exploration run, its claims (held / checked), ``failed``: None, or the
    executed notebook its last run left failed (``<name>.failed.ipynb``: that run did not finish,
    whatever the claims it recorded before failing), and ``damaged``: None, or the error naming a
    ``parameters.yaml`` or ``claims.csv`` that does not read and the notebook to rerun (one
    damaged run does not hide the others)."""
    from rt_lib.claims import ledger as claims
    from rt_lib.runtime.manifest import Manifest

    root = root or results_root()
    manifest = Manifest(root)
    out = []
    for folder in sorted(p for p in root.glob("[0-9][0-9]_*") if p.is_dir()):
        run = {"folder": folder.name, "exploration": "+" in folder.name, "changes": {},
               "claims": None, "damaged": None,
               "failed": next((str(f) for f in sorted(folder.glob("*.failed.ipynb"))), None)}
        # its files as the manifest recorded them, before its claims are counted: a claims.csv
        # edited or cut since is no run's outcome
        changed = manifest.files_problem(folder.name)
        if changed is not None:
            out.append(run | {"damaged": f"{changed} (the manifest's record of {folder.name}); "
                                         f"./run_all.sh reruns it"})
            continue
        try:
            if (folder / PARAMETERS_FILE).exists():
                run["changes"] = read_yaml_result(folder / PARAMETERS_FILE).get("changes", {})
            table = claims.read(folder)
        except DamagedFileError as err:
            out.append(run | {"damaged": str(err)})
            continue
        if table is not None:
            run["claims"] = f"{int((table['status'] == 'holds').sum())}/{len(table)}"
        out.append(run)
    return out
