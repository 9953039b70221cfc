"""The claims a run recorded, as a Markdown table (docs/claims.md's and a closing note's).

    .venv/bin/python scripts/claims_table.py [results root]      # default: results/
    .venv/bin/python scripts/claims_table.py --kept gpu          # the kept evidence of a profile

One row per ledger claim (rt_lib/claims/ledger.yaml) in the ledger's order, then the claims of our own:
id, notebook, status (a claim not shown with its reason: runs, budget, contrary, noise), the
task it was measured on (the paper's, or reduced and how: rt_lib.claims.ledger, task sizes), and
what was measured with its margin (or why it was not checked).  A
ledger claim no run under the root recorded reads "not run".  With ``--kept PROFILE`` the rows
are the claims the kept evidence runs of that profile recorded (``evidence/<profile>/``), each
from the latest job that recorded it, with that job's folder; ledger claims no job recorded are
left out.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rt_lib.claims import ledger as claims
from rt_lib.runtime.io import PROJECT_ROOT


def rows(root: Path) -> list[tuple[str, str, str, str, str, str]]:
    """(id, notebook, status, ours or paper, task, measured / why) per claim, ledger first."""
    recorded: dict[str, tuple[str, object]] = {}
    ours = []
    for notebook in sorted({c.notebook for c in claims.ledger().values()} |
                           {p.name for p in root.glob("[0-9][0-9]_*") if "+" not in p.name}):
        table = claims.read(root / notebook)
        for row in ([] if table is None else table.itertuples()):
            (ours.append((notebook, row)) if row.own else recorded.__setitem__(row.id, (notebook, row)))
    out = []
    for claim in claims.ledger().values():
        notebook, row = recorded.get(claim.id, (claim.notebook, None))
        if row is None:
            out.append((claim.id, notebook, "not run", "paper", "", ""))
        else:
            what = row.scale if row.status == "not checked" else row.measured
            out.append((claim.id, notebook, _status(row), "paper", _task(row), what))
    for notebook, row in ours:
        out.append((row.id, notebook, _status(row), "ours", _task(row), row.measured))
    return out


def _task(row) -> str:
    """``paper``, ``reduced: p = 37 of 113`` or ``unknown`` (a record made before task sizes)."""
    return f"reduced: {row.reduction}" if row.task_size == claims.REDUCED_TASK else row.task_size


def kept_rows(profile: str, evidence_root: Path | None = None
              ) -> list[tuple[str, str, str, str, str, str, str]]:
    """(id, notebook, status, ours or paper, task, measured / why, job) per claim the kept runs of
    ``profile`` recorded, each from the latest job that recorded it; ledger order, then ours."""
    from rt_lib.site.evidence import STALE, kept_runs, oldest_first

    latest: dict[str, tuple[str, object, object]] = {}
    jobs = oldest_first(r for r in kept_runs(evidence_root) if r.profile == profile)
    for job in jobs:
        for notebook, table in job.claims.items():
            for row in table.itertuples():
                latest[row.id] = (notebook, row, job)
    order = [i for i in claims.ledger() if i in latest] + [
        i for i, (_, row, _) in latest.items() if row.own]
    out = []
    for id in order:
        notebook, row, job = latest[id]
        what = row.scale if row.status == "not checked" else row.measured
        # judged by checks that have changed since: history, not today's status
        status = _status(row) if job.current(notebook) else f"{STALE} (was {_status(row)})"
        out.append((id, notebook, status, "ours" if row.own else "paper", _task(row), what,
                    job.folder.name))
    return out


def _status(row) -> str:
    """``not shown (noise)``: a status with the reason of a claim not shown."""
    return f"{row.status} ({row.reason})" if row.status == "not shown" and row.reason else row.status


def main(argv: list[str]) -> None:
    if argv[:1] == ["--kept"]:
        if len(argv) != 2:
            sys.exit("claims_table.py: --kept needs a profile, e.g. --kept gpu")
        found = kept_rows(argv[1])
        if not found:
            sys.exit(f"claims_table.py: --kept {argv[1]}: no kept run of that profile under "
                     "evidence/")
        print("| claim | notebook | status | whose | task | measured, with its margin (or why "
              "not checked) | job |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for id, notebook, status, whose, task, what, job in found:
            text = str(what).replace("|", "/")
            print(f"| `{id}` | {notebook[:2]} | {status} | {whose} | {task} | {text} | `{job}` |")
        return
    root = Path(argv[0]) if argv else PROJECT_ROOT / "results"
    print("| claim | notebook | status | whose | task | measured, with its margin (or why not "
          "checked) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for id, notebook, status, whose, task, what in rows(root):
        text = str(what).replace("|", "/")
        print(f"| `{id}` | {notebook[:2]} | {status} | {whose} | {task} | {text} |")


if __name__ == "__main__":
    main(sys.argv[1:])
