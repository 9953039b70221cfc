"""One module per notebook: its parameters (validated) and the work it runs.

A notebook's module imports no other notebook's module (``tests/test_layers.py``): what several
notebooks share lives in modules that are no notebook's (``common.py``, ``miiii_common.py``,
``reporting.py``), and a notebook that builds on another's settings (06 trains 01-04's tasks
again, 09 reads the checkpoints of 01-05 and 08) asks for that notebook's experiment by name,
:func:`experiment_of`, and goes through its public face: its parameters class and profiles."""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rt_lib.experiment import Experiment


def experiment_of(notebook: str) -> Experiment:
    """The experiment of ``notebook`` (``"02_needle_in_a_haystack"``), declared by the module
    named after it without its number (``rt_lib.experiments.needle_in_a_haystack``)."""
    stem = notebook[3:] if re.fullmatch(r"\d\d_[a-z0-9_]+", notebook) else ""
    target = f"{__name__}.{stem}"
    try:
        module = importlib.import_module(target) if stem else None
    except ModuleNotFoundError as err:
        if err.name != target:  # the module exists but an import inside it failed
            raise
        module = None
    experiment = getattr(module, "EXPERIMENT", None)
    if experiment is None or experiment.name != notebook:
        raise ValueError(f"no experiment {notebook!r}: a notebook NN_name declares it in "
                         f"rt_lib/experiments/name.py")
    return experiment
