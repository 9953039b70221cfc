"""What each notebook claims, recorded beside its results.

A notebook checks each of the papers' claims it can test with :meth:`Claims.check`: the claim's
id, where the paper makes it, the paper's value or statement, our value, whether it holds here,
and, for a claim that does not hold at this scale, the scale at which it is expected to.  Every
check is appended to ``claims.csv`` in the run's results folder at once (an interrupted notebook
keeps what it checked), and printed.

:meth:`Claims.done` ends the notebook's checks.  In a profile's own run (the committed CPU
profile, which nbval re-runs, or the paper profile) a claim that does not hold fails the
notebook: a regression is caught.  In an exploration run (changed parameters, a folder of its
own) it is reported and the notebook finishes: asking a question is not an error.
``./run_all.sh`` ends with the count over every notebook it ran (:func:`summary`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from pathlib import Path

import pandas as pd

FILENAME = "claims.csv"


class ClaimsFailed(AssertionError):
    """Claims that no longer hold in a profile's own run."""


@dataclass(frozen=True)
class Claim:
    id: str  # short and stable, e.g. "random-solves-modular-addition"
    source: str  # paper and section, e.g. "Zhong & Andreas 2024, §4.1, Table 1"
    paper: str  # the paper's value or statement
    ours: str  # what this run measured, with its unit or comparison
    holds: bool
    scale: str = ""  # for a claim that does not hold here: the scale expected to show it

    def __str__(self) -> str:
        mark = "HOLDS" if self.holds else "FAILS"
        line = f"[{mark}] {self.id}: {self.ours} (paper: {self.paper})"
        return line if self.holds or not self.scale else f"{line}; expected at {self.scale}"


COLUMNS = [f.name for f in fields(Claim)]


class Claims:
    """The claims of one notebook run, written to ``<folder>/claims.csv``."""

    def __init__(self, folder: Path, strict: bool) -> None:
        self.path = Path(folder) / FILENAME
        self.strict = strict  # a profile's own run: failing claims fail the notebook
        self.claims: list[Claim] = []
        self.path.unlink(missing_ok=True)  # a rerun records its own claims only

    def check(self, id: str, source: str, paper: str, ours: str, holds: bool,
              scale: str = "") -> Claim:
        if any(c.id == id for c in self.claims):
            raise ValueError(f"claim {id!r} checked twice")
        claim = Claim(id, source, paper, ours, bool(holds), scale)
        self.claims.append(claim)
        from rt_lib.io import save_csv  # io imports nothing of ours: no cycle, kept lazy

        save_csv(pd.DataFrame([asdict(c) for c in self.claims], columns=COLUMNS), self.path)
        print(claim)
        return claim

    @property
    def failing(self) -> list[Claim]:
        return [c for c in self.claims if not c.holds]

    def done(self) -> None:
        """End of the checks: raise in a profile's own run if any claim fails; report otherwise."""
        n, bad = len(self.claims), self.failing
        print(f"{n - len(bad)} of {n} claims hold" if n else "no claim of the papers is checked here")
        if bad and self.strict:
            raise ClaimsFailed("claims that no longer hold: " + ", ".join(c.id for c in bad))
        if bad:
            print("exploration run: the failing claims are reported, not asserted")


def read(folder: Path) -> pd.DataFrame | None:
    path = Path(folder) / FILENAME
    return pd.read_csv(path, keep_default_na=False) if path.exists() else None


def summary(folders: dict[str, Path]) -> tuple[int, int, list[str]]:
    """(claims that hold, claims that do not, "<run>: <id>" of those that do not) over the
    ``claims.csv`` of every run folder given ({run name: folder})."""
    held, failed, lines = 0, 0, []
    for name, folder in folders.items():
        table = read(folder)
        if table is None:
            continue
        ok = table["holds"].astype(str).str.lower() == "true"
        held += int(ok.sum())
        failed += int((~ok).sum())
        lines += [f"{name}: {row.id} ({row.ours}; paper: {row.paper})"
                  for row in table[~ok].itertuples()]
    return held, failed, lines
