"""What each notebook claims, recorded beside its results.

A notebook checks each of the papers' claims it can test with :meth:`Claims.check`: the claim's
id, where the paper makes it, the paper's value or statement, our value, whether it holds here,
and, for a claim that does not hold at this scale, the scale at which it is expected to.  Every
check is appended to ``claims.csv`` in the run's results folder at once (an interrupted notebook
keeps what it checked), and printed.

:meth:`Claims.done` ends the notebook's checks.  In a profile's own run (the committed CPU
profile, which nbval re-runs, or the paper profile) a claim that does not hold fails the
notebook: a regression is caught.  The exception is a claim measured not to show at the
profile's scale and declared so (``Experiment.not_shown_on_cpu``, with the measurement): it is
recorded with ``expected=False``, reported as "not shown at this scale" with the scale that
would show it, and does not fail the run.  In an exploration run (changed parameters, a folder
of its own) every failing claim is reported and the notebook finishes: asking a question is not
an error.
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
    expected: bool = True  # False: measured and declared not to show at this profile's scale

    def __str__(self) -> str:
        mark = "HOLDS" if self.holds else "FAILS" if self.expected else "NOT SHOWN AT THIS SCALE"
        line = f"[{mark}] {self.id}: {self.ours} (paper: {self.paper})"
        return line if self.holds or not self.scale else f"{line}; expected at {self.scale}"


COLUMNS = [f.name for f in fields(Claim)]


class Claims:
    """The claims of one notebook run, written to ``<folder>/claims.csv``."""

    def __init__(self, folder: Path, strict: bool, not_shown: dict[str, str] | None = None) -> None:
        self.path = Path(folder) / FILENAME
        self.strict = strict  # a profile's own run: failing claims fail the notebook
        self.not_shown = dict(not_shown or {})  # claim id -> why it cannot show at this scale
        self.claims: list[Claim] = []
        self.path.unlink(missing_ok=True)  # a rerun records its own claims only

    def check(self, id: str, source: str, paper: str, ours: str, holds: bool,
              scale: str = "") -> Claim:
        if any(c.id == id for c in self.claims):
            raise ValueError(f"claim {id!r} checked twice")
        claim = Claim(id, source, paper, ours, bool(holds), scale, id not in self.not_shown)
        self.claims.append(claim)
        from rt_lib.io import save_csv  # io imports nothing of ours: no cycle, kept lazy

        save_csv(pd.DataFrame([asdict(c) for c in self.claims], columns=COLUMNS), self.path)
        print(claim)
        return claim

    @property
    def failing(self) -> list[Claim]:
        """Claims that do not hold and were expected to at this scale."""
        return [c for c in self.claims if not c.holds and c.expected]

    def done(self) -> None:
        """End of the checks: raise in a profile's own run if a claim expected to hold fails;
        report the claims declared not to show at this scale, and any of those that now hold."""
        n, bad = len(self.claims), self.failing
        unshown = [c for c in self.claims if not c.expected and not c.holds]
        held = sum(c.holds for c in self.claims)
        print(f"{held} of {n} claims hold" + (f"; {len(unshown)} not shown at this scale"
                                            if unshown else "")
              if n else "no claim of the papers is checked here")
        for c in unshown:
            print(f"  not shown at this scale: {c.id}: {self.not_shown[c.id]}")
        for c in self.claims:
            if not c.expected and c.holds:
                print(f"  {c.id} was declared not to show at this scale but holds: "
                      "remove it from not_shown_on_cpu")
        if bad and self.strict:
            raise ClaimsFailed("claims that no longer hold: " + ", ".join(c.id for c in bad))
        if bad:
            print("exploration run: the failing claims are reported, not asserted")


def read(folder: Path) -> pd.DataFrame | None:
    path = Path(folder) / FILENAME
    return pd.read_csv(path, keep_default_na=False) if path.exists() else None


def flag(table: pd.DataFrame, column: str, default: bool) -> pd.Series:
    if column not in table:
        return pd.Series(default, index=table.index)
    return table[column].astype(str).str.lower() == "true"


def summary(folders: dict[str, Path]) -> tuple[int, int, list[str]]:
    """(claims that hold, claims that do not, a line per claim that does not) over the
    ``claims.csv`` of every run folder given ({run name: folder}); a claim declared not to show
    at its profile's scale is marked so in its line."""
    held, failed, lines = 0, 0, []
    for name, folder in folders.items():
        table = read(folder)
        if table is None:
            continue
        ok = flag(table, "holds", False)
        expected = flag(table, "expected", True)
        held += int(ok.sum())
        failed += int((~ok).sum())
        for row, exp in zip(table[~ok].itertuples(), expected[~ok]):
            scale = f", expected at {row.scale}" if row.scale else ""
            where = "" if exp else f"not shown at this scale{scale}: "
            lines.append(f"{name}: {where}{row.id} ({row.ours}; paper: {row.paper})")
    return held, failed, lines
