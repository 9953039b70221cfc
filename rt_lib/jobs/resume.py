"""Where a notebook's unfinished work waits for the next run: mid-run checkpoints, kept per run
key under ``results/<notebook>/resume/`` while the runner runs it, deleted once it finished."""

from __future__ import annotations

from rt_lib.runtime import context
from rt_lib.runtime.io import RESUME, results_dir


def resume_dir(name: str) -> str | None:
    """Where a run of ``name`` under ``./run_all.sh`` keeps mid-run checkpoints: named by the
    run's content key (the run context's ``run_key``), so an interrupted run resumes only with
    exactly the same inputs; the runner deletes the folder once the notebook finished.  None
    outside the runner (interactive sessions, nbval): nothing is kept.  Always in the running
    notebook's own folder (the context's ``notebook``): notebook 06 trains 01-04's grids, and
    their mid-run files must not land among 01-04's results."""
    run = context.current()
    if not run.run_key:
        return None
    owner = run.notebook or name
    folder = results_dir(owner) / RESUME / run.run_key[:16]
    return str(folder if owner == name else folder / name)
