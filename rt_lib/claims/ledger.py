"""The papers' claims: the ledger, and what each notebook run records of them.

**The ledger** (``rt_lib/claims/ledger.yaml``, :func:`ledger`) holds every claim of the two papers the
project checks, once: its id, paper, section, statement, the paper's value, and the one notebook
that checks it.

**A run's record.**  A notebook records each ledger claim it checks with :meth:`Claims.check`
(our measurement and a :class:`~rt_lib.claims.verdicts.Verdict` with its margin), or
:meth:`Claims.not_checked` (why: qualitative, needs data we lack, not trained in this run), and
claims of its own, beyond the papers, with :meth:`Claims.ours`: those are counted apart.  Every
record says on what task it was measured (``task_size``: the paper's or a reduced one, with the
reduction in words): a paper claim measured on a reduced task keeps its id and its status, and is
counted apart from those at the paper's scale (:meth:`Summary.holds`).  Each record is appended to ``claims.csv`` in the
run's folder at once (an interrupted notebook keeps what it checked), and printed.  A status is
one of ``holds``, ``fails``, ``not shown`` (the comparison did not separate, or a claim measured
not to show at this profile's scale: with the scale expected to show it) and ``not checked``.
A claim not shown says why in its ``reason`` (:data:`~rt_lib.claims.verdicts.REASONS`): ``runs``,
``budget``, ``noise``, or ``contrary`` where the measurement went against the paper at a scale
declared not to show it: ``fails`` is kept for a claim measured where it should show.

:meth:`Claims.done` ends the checks.  In a profile's own run (the committed CPU profile, which
nbval re-runs, or the paper profile) it fails the notebook on a claim that fails, on one not
shown that the experiment did not declare so with its measurement (``Experiment.not_shown_on_cpu``:
a regression is caught either way), and on a ledger claim of the notebook left unrecorded.  In an
exploration run every status is reported and the notebook finishes: asking is not an error.
``./run_all.sh`` ends with the four counts over every notebook it ran (:func:`summary`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from functools import cache
from pathlib import Path

import pandas as pd
import yaml

from rt_lib.claims.verdicts import CONTRARY, FAILS, HOLDS, NOT_CHECKED, NOT_SHOWN, REASONS, STATUSES, Verdict
from rt_lib.runtime.io import damaged, read_csv_result, save_csv

FILENAME = "claims.csv"
LEDGER = Path(__file__).with_name("ledger.yaml")
PAPERS = {"rt": "Zhong & Andreas 2024", "mi": "Syrkis & Søgaard 2024"}
OURS = "ours"  # the source of a claim beyond both papers
#: On what a claim was measured (its ``task_size``): the paper's task (its p, its digit count, its
#: pairs, keys and vocabulary, its data) or a reduced one, whose reduction is said in words beside
#: it ("p = 37 of 113", "3 of 10 digits").  A claim holds *at the paper's scale* only on the paper's
#: task; on a reduced task it keeps the paper's id and its measured status, counted apart.
#: "unknown": a record written before task sizes, or by a notebook that does not say (never
#: counted at the paper's scale).
PAPER_TASK, REDUCED_TASK, UNKNOWN_TASK = "paper", "reduced", "unknown"
TASK_SIZES = (PAPER_TASK, REDUCED_TASK, UNKNOWN_TASK)
RUN_TASK = object()  # a claim on the run's own task (Claims.reduced)


class ClaimsFailed(AssertionError):
    """Claims that no longer hold in a profile's own run."""


@dataclass(frozen=True)
class LedgerClaim:
    id: str  # e.g. "rt-t1-modular": paper, figure or table, subject
    paper: str  # "rt" (Zhong & Andreas) or "mi" (Syrkis & Søgaard)
    source: str  # section and figure or table, e.g. "§4.1, Table 1"
    statement: str  # the claim, one sentence
    value: str  # the paper's number(s), or its qualitative statement
    notebook: str  # the one notebook that checks it

    @property
    def citation(self) -> str:
        return f"{PAPERS[self.paper]}, {self.source}"


@cache
def ledger() -> dict[str, LedgerClaim]:
    """{id: claim} of ``rt_lib/claims/ledger.yaml``, in its order; refuses a malformed file naming it."""
    try:
        entries = yaml.safe_load(LEDGER.read_text())
        out = {}
        for entry in entries:
            claim = LedgerClaim(**{f.name: str(entry[f.name]) for f in fields(LedgerClaim)})
            if claim.id in out:
                raise ValueError(f"id {claim.id!r} twice")
            if claim.paper not in PAPERS:
                raise ValueError(f"{claim.id}: paper must be one of {sorted(PAPERS)}")
            out[claim.id] = claim
    except (yaml.YAMLError, TypeError, KeyError, ValueError) as err:
        raise ValueError(f"{LEDGER}: malformed ledger ({err})") from None
    return out


def ledger_of(notebook: str) -> list[str]:
    """The ledger ids that ``notebook`` checks."""
    return [c.id for c in ledger().values() if c.notebook == notebook]


@dataclass(frozen=True)
class Claim:
    id: str  # a ledger id, or a claim of ours
    source: str  # paper and section, or "ours"
    paper: str  # the paper's value or statement (ours: our statement)
    measured: str  # what this run measured, with the margin it was judged by
    status: str  # holds, fails, not shown, not checked
    scale: str = ""  # not shown: the scale expected to show it (and the measurement declaring
    # it not to show at this profile's scale); not checked: why
    own: bool = False  # a claim of ours: counted apart from the papers'
    reason: str = ""  # not shown: why (rt_lib.claims.verdicts.REASONS: runs, budget, contrary, noise)
    task_size: str = UNKNOWN_TASK  # measured on the paper's task or a reduced one (TASK_SIZES)
    reduction: str = ""  # a reduced task: how, in words ("p = 37 of 113")

    def __str__(self) -> str:
        what = self.scale if self.status == NOT_CHECKED else self.measured
        status = self.status.upper() + (f": {self.reason}" if self.reason else "")
        size = (f" (reduced task: {self.reduction})" if self.task_size == REDUCED_TASK
                else " (task size not said)" if self.task_size == UNKNOWN_TASK else "")
        line = f"[{status}]{' (ours)' if self.own else ''} {self.id}{size}: {what}"
        if not self.own:
            line += f" (paper: {self.paper})"
        if self.status == NOT_SHOWN and self.scale:
            line += f"; expected at {self.scale}"
        return line


COLUMNS = [f.name for f in fields(Claim)]


class Claims:
    """The claims of one notebook run, written to ``<folder>/claims.csv``."""

    def __init__(self, folder: Path, strict: bool, notebook: str = "",
                 not_shown: dict[str, str] | None = None,
                 declared_in: str = "not_shown_on_cpu", reduced: str | None | object = RUN_TASK) -> None:
        self.path = Path(folder) / FILENAME
        # how the run's task is smaller than the paper's (None: it is the paper's; left out: not
        # said, "unknown"); a claim about another task says its own (check's ``reduced``)
        self.reduced = reduced
        self.notebook = notebook  # its ledger claims must all be recorded ("" for none)
        self.strict = strict  # a profile's own run: a claim that does not hold fails it
        self.not_shown = dict(not_shown or {})  # claim id -> the measurement, the scale
        self.declared_in = declared_in  # the Experiment field holding them, for its messages
        self.claims: list[Claim] = []
        self.path.unlink(missing_ok=True)  # a rerun records its own claims only

    def _size(self, reduced: str | None | object) -> tuple[str, str]:
        """(task_size, reduction) of a claim: ``reduced`` as given, else the run's."""
        reduced = self.reduced if reduced is RUN_TASK else reduced
        if reduced is RUN_TASK:
            return UNKNOWN_TASK, ""
        return (PAPER_TASK, "") if reduced is None else (REDUCED_TASK, str(reduced))

    def _record(self, claim: Claim) -> Claim:
        if any(c.id == claim.id for c in self.claims):
            raise ValueError(f"claim {claim.id!r} recorded twice")
        self.claims.append(claim)
        save_csv(pd.DataFrame([asdict(c) for c in self.claims], columns=COLUMNS), self.path)
        print(claim)
        return claim

    def _status(self, id: str, verdict: Verdict | bool,
                scale: str) -> tuple[str, str, str, str]:
        """(status, margin, scale, reason): a claim that does not hold here and was declared
        not to show at this profile's scale is ``not shown`` with the declared measurement, and
        keeps the verdict's direction in its reason (``contrary`` for one that fails)."""
        if isinstance(verdict, bool):
            verdict = Verdict(HOLDS if verdict else FAILS, "")
        status = verdict.status
        if status == HOLDS:
            return status, verdict.margin, "", ""  # the scale says where a claim not shown would show
        reason = CONTRARY if status == FAILS else verdict.reason
        if id in self.not_shown:
            declared = self.not_shown[id]
            return (NOT_SHOWN, verdict.margin,
                    f"{scale}; measured: {declared}" if scale else declared, reason)
        return status, verdict.margin, scale, reason if status == NOT_SHOWN else ""

    def check(self, id: str, measured: str, verdict: Verdict | bool, scale: str = "",
              reduced: str | None | object = RUN_TASK) -> Claim:
        """Record ledger claim ``id``: ``measured`` says what this run measured; the verdict's
        margin is appended to it; ``scale`` names the scale expected to show it; ``reduced``:
        how the task it was measured on is smaller than the paper's (None: the paper's task;
        left out: the run's task, :attr:`reduced`)."""
        if id not in ledger():
            raise ValueError(f"claim {id!r} is not in the ledger ({LEDGER.name}); a claim "
                             "beyond the papers is recorded with Claims.ours")
        entry = ledger()[id]
        if self.notebook and entry.notebook != self.notebook:
            raise ValueError(f"claim {id!r} is checked by {entry.notebook} (the ledger), "
                             f"not {self.notebook}")
        status, margin, scale, reason = self._status(id, verdict, scale)
        text = f"{measured} ({margin})" if margin else measured
        size, reduction = self._size(reduced)
        return self._record(Claim(id, entry.citation, entry.value, text, status, scale,
                                  reason=reason, task_size=size, reduction=reduction))

    def not_checked(self, id: str, why: str, reduced: str | None | object = RUN_TASK) -> Claim:
        """Record ledger claim ``id`` as not checked, saying why."""
        if id not in ledger():
            raise ValueError(f"claim {id!r} is not in the ledger ({LEDGER.name})")
        entry = ledger()[id]
        size, reduction = self._size(reduced)
        return self._record(Claim(id, entry.citation, entry.value, "", NOT_CHECKED, why,
                                  task_size=size, reduction=reduction))

    def ours(self, id: str, statement: str, measured: str, verdict: Verdict | bool,
             scale: str = "", reduced: str | None | object = RUN_TASK) -> Claim:
        """Record a claim of our own (beyond the papers, or a stand-in for one of theirs):
        counted apart from the papers' claims."""
        if id in ledger():
            raise ValueError(f"{id!r} is a ledger id: record it with Claims.check")
        status, margin, scale, reason = self._status(id, verdict, scale)
        text = f"{measured} ({margin})" if margin else measured
        size, reduction = self._size(reduced)
        return self._record(Claim(id, OURS, statement, text, status, scale, own=True,
                                  reason=reason, task_size=size, reduction=reduction))

    def done(self) -> None:
        """End of the checks: report the counts; in a profile's own run raise on a claim that
        fails, an undeclared claim not shown, or a ledger claim of this notebook unrecorded
        (elsewhere those are recorded as not checked)."""
        recorded = {c.id for c in self.claims}
        missing = [i for i in ledger_of(self.notebook) if i not in recorded] if self.notebook else []
        if missing and not self.strict:
            for i in missing:
                self.not_checked(i, "not measured by this run's settings")
        counts = Counter(c.status for c in self.claims)
        why = Counter(c.reason for c in self.claims if c.status == NOT_SHOWN)
        reasons = f" ({', '.join(f'{why[r]} {r}' for r in REASONS if why[r])})" if why else ""
        print(", ".join(f"{counts[s]} {s}" + (reasons if s == NOT_SHOWN else "")
                        for s in STATUSES if counts[s])
              + f" of {len(self.claims)} claims" if self.claims else "no claim is checked here")
        for c in self.claims:
            if c.id in self.not_shown and c.status == HOLDS:
                print(f"  {c.id} was declared not to show at this scale but holds: "
                      f"remove it from {self.declared_in}")
        bad = [c.id for c in self.claims if c.status == FAILS
               or (c.status == NOT_SHOWN and c.id not in self.not_shown)]
        if self.strict and (bad or missing):
            raise ClaimsFailed("claims that do not hold (failing, or not shown without a "
                               "declared measurement): " + ", ".join(bad)
                               + (f"; ledger claims never recorded: {', '.join(missing)}"
                                  if missing else "") + f"; {platform_note()}")
        if bad:
            print("exploration run: the claims that do not hold are reported, not asserted")


def platform_note() -> str:
    """Which numeric platform a failing run ran on, and whether the committed notebooks were
    recorded on it: a claim that holds there and not here flips with the rounding, a defect of
    its margin (docs/reliability.md), not of this machine."""
    from rt_lib.runtime.fingerprint import describe, differences, recorded, this_platform

    here = this_platform()
    first = next((fp for fp in recorded().values() if fp), None)
    if first is None:
        return f"platform {describe(here)}"
    diff = differences(here, first)
    return (f"platform {describe(here)}, "
            + (f"not the recording's ({'; '.join(diff)}): the claim flips with the rounding"
               if diff else "the recording's"))


def read(folder: Path) -> pd.DataFrame | None:
    """A run's ``claims.csv`` with a ``status`` and an ``own`` column (a file written before
    statuses: from its holds / expected columns); None if it has none; a file cut short or
    malformed raises :class:`~rt_lib.runtime.io.DamagedFileError` naming it and the notebook to rerun."""
    path = Path(folder) / FILENAME
    if not path.exists():
        return None
    table = read_csv_result(path, ["id"], keep_default_na=False)
    if "status" not in table:  # written before statuses (holds, expected)
        holds = _flag(table, "holds", False)
        expected = _flag(table, "expected", True)
        table["status"] = [HOLDS if h else FAILS if e else NOT_SHOWN
                           for h, e in zip(holds, expected)]
        table["measured"] = table.get("ours", "")
    table["own"] = _flag(table, "own", False)
    if "reason" not in table:  # written before reasons: a claim not shown reads "unknown"
        table["reason"] = ""
    table["reason"] = table["reason"].astype(str)
    if "task_size" not in table:  # written before task sizes: never the paper's scale
        table["task_size"], table["reduction"] = UNKNOWN_TASK, ""
    table["task_size"] = table["task_size"].astype(str).replace("", UNKNOWN_TASK)
    table["reduction"] = table["reduction"].astype(str)
    odd_size = set(table["task_size"]) - set(TASK_SIZES)
    if odd_size:
        raise damaged(path, f"unknown task sizes {sorted(odd_size)}")
    unknown = set(table["status"]) - set(STATUSES)
    if unknown:
        raise damaged(path, f"unknown statuses {sorted(unknown)}")
    odd = set(table["reason"]) - set(REASONS) - {""}
    if odd:
        raise damaged(path, f"unknown reasons {sorted(odd)}")
    return table


def _flag(table: pd.DataFrame, column: str, default: bool) -> pd.Series:
    if column not in table:
        return pd.Series(default, index=table.index, dtype=bool)
    return table[column].astype(str).str.lower() == "true"


@dataclass
class Summary:
    papers: Counter  # status -> count over the papers' claims
    ours: Counter  # status -> count over our own claims
    lines: list[str]  # one per claim that does not hold, with its run
    papers_why: Counter = field(default_factory=Counter)  # reason -> count, papers' not shown
    ours_why: Counter = field(default_factory=Counter)  # reason -> count, ours not shown
    # (paper, task size) -> status -> count over the papers' claims: "rt" / "mi", and whether
    # each was measured on the paper's task (only those hold at the paper's scale)
    by_paper: dict[tuple[str, str], Counter] = field(default_factory=dict)

    def holds(self, paper: str, task_size: str) -> int:
        return self.by_paper.get((paper, task_size), Counter())[HOLDS]

    def holds_line(self) -> str:
        """``rt: 1 holds at the paper's scale, 4 on a reduced task; mi: ...``"""
        return "; ".join(
            f"{p}: {self.holds(p, PAPER_TASK)} hold at the paper's scale, "
            f"{self.holds(p, REDUCED_TASK)} on a reduced task"
            + (f", {self.holds(p, UNKNOWN_TASK)} on a task of unsaid size"
               if self.holds(p, UNKNOWN_TASK) else "") for p in PAPERS)


def counts_line(counts: Counter, reasons: Counter | None = None) -> str:
    """``13 holds, 0 fails, 14 not shown (6 runs, 3 budget, 3 contrary, 2 noise), 2 not
    checked``: the reasons of the claims not shown, where given (``unknown``: a ``claims.csv``
    written before reasons)."""
    why = ""
    if reasons and counts[NOT_SHOWN]:
        why = " (" + ", ".join(f"{reasons[r]} {r or 'unknown'}" for r in (*REASONS, "")
                               if reasons[r]) + ")"
    return ", ".join(f"{counts[s]} {s}" + (why if s == NOT_SHOWN else "") for s in STATUSES)


def summary(folders: dict[str, Path]) -> Summary:
    """The four counts over the ``claims.csv`` of every run folder given ({run name: folder}),
    the papers' claims apart from ours, and a line per claim that does not hold."""
    out = Summary(Counter(), Counter(), [])
    for name, folder in folders.items():
        table = read(folder)
        if table is None:
            continue
        for row in table.itertuples():
            (out.ours if row.own else out.papers)[row.status] += 1
            if not row.own:
                paper = ledger()[row.id].paper if row.id in ledger() else row.id.split("-")[0]
                out.by_paper.setdefault((paper, row.task_size), Counter())[row.status] += 1
            if row.status == NOT_SHOWN:
                (out.ours_why if row.own else out.papers_why)[row.reason] += 1
            if row.status != HOLDS:
                mine = " (ours)" if row.own else ""
                what = row.scale if row.status == NOT_CHECKED else (
                    f"{row.measured}; {row.scale}" if row.scale else row.measured)
                why = f" ({row.reason})" if row.status == NOT_SHOWN and row.reason else ""
                size = (f" (reduced task: {row.reduction})" if row.task_size == REDUCED_TASK
                        else "")
                out.lines.append(f"{name}: {row.status}{why}{mine}: {row.id}{size}: {what}")
    return out


__all__ = ["FILENAME", "LEDGER", "PAPERS", "PAPER_TASK", "REDUCED_TASK", "TASK_SIZES",
           "UNKNOWN_TASK", "ClaimsFailed", "LedgerClaim", "ledger", "ledger_of",
           "Claim", "Claims", "read", "summary", "Summary", "counts_line"]
