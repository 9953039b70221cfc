"""Where a notebook's unfinished work waits for the next run: mid-run checkpoints, kept per run
key under ``results/<notebook>/resume/`` while the runner runs it, deleted once it finished."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def where_runs_stand(results: str | Path) -> list[dict[str, Any]]:
    """Every training checkpoint under ``results`` (:func:`rt_lib.training.train.train`'s: the
    grids' ``*/resume/**/*.pt``, notebook 11's ``runs/*/last.pt``): which run, how far it got,
    in how many seconds, and its last evaluation, so that a job cut by its deadline says what it
    measured even when its checkpoints do not all come back.  A file that fails its sha256
    check is listed as unreadable."""
    from rt_lib.runtime.io import CorruptFileError, load_torch

    rows = []
    paths = {*Path(results).glob(f"**/{RESUME}/**/*.pt"), *Path(results).glob("**/runs/*/last.pt")}
    for path in sorted(paths):
        run = str(path.relative_to(results))
        try:
            state = load_torch(path)
        except (CorruptFileError, OSError, RuntimeError) as err:
            rows.append({"run": run, "unreadable": str(err).splitlines()[0]})
            continue
        if not isinstance(state, dict) or not {"history", "histories"} & set(state):
            continue  # another kind of file (a snapshot): not a training run's checkpoint
        # stacked restarts (rt_lib.training.batched) keep one history per seed in one file
        members = ([(f"{run} seed {seed}", h) for seed, h in zip(state["seeds"], state["histories"])]
                   if "histories" in state else [(run, state["history"])])
        for name, history in members:
            last = history[-1] if history else {}
            rows.append({"run": name, "step": state["step"],
                         "finished": bool(state.get("finished")),
                         "steps": state.get("config", {}).get("steps"),
                         "seconds": float(state.get("time_s", 0.0)),
                         **{k: v for k, v in last.items() if k not in ("step", "time_s")}})
    return rows


def main(argv: list[str] | None = None) -> int:
    """``python -m rt_lib.jobs.resume RESULTS``: one line per training checkpoint."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m rt_lib.jobs.resume RESULTS_DIR", file=sys.stderr)
        return 2
    rows = where_runs_stand(args[0])
    if not rows:
        print(f"no training checkpoints under {args[0]}")
    for row in rows:
        run = row.pop("run")
        if "unreadable" in row:
            print(f"{run}: unreadable ({row['unreadable']})")
            continue
        rest = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                         for k, v in row.items() if k not in ("step", "steps", "seconds", "finished"))
        state = "finished" if row["finished"] else "unfinished"
        print(f"{run}: {state}, step {row['step']} of {row['steps']} in {row['seconds']:.1f} s; {rest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
