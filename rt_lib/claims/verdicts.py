"""Verdicts with a margin: whether a measured comparison separates, and which way.

A claim that compares numbers holds only when the difference is larger than the spread of the
runs behind it: here, when the ranges of at least ``MIN_RUNS`` seeds (or restarts) per side do
not overlap, or, for single measurements, when the difference exceeds ``k`` times a noise level
measured over seeds elsewhere (a ``benchmarks/`` script, named in the claim).  What does not
separate is ``not shown``, never ``holds``; a clear difference the wrong way ``fails``.

A ``not shown`` verdict says why, with one of :data:`REASONS`: ``runs`` (fewer than
``MIN_RUNS`` usable runs a side: too few, or one diverged), ``budget`` (runs cut short by their
steps), ``noise`` (enough complete runs, inside their spread), or ``contrary`` (the measurement
points against the paper at this scale: :mod:`rt_lib.claims.ledger` records a verdict that ``fails``
on a claim declared not to show at this profile's scale as ``not shown``, ``contrary``, so the
direction of the measurement is kept).

Every function returns a :class:`Verdict` whose ``margin`` says how it was judged, for the
claim's "ours" text.  Pure functions of their inputs: :mod:`rt_lib.claims.ledger` records them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median

HOLDS, FAILS, NOT_SHOWN, NOT_CHECKED = "holds", "fails", "not shown", "not checked"
STATUSES = (HOLDS, FAILS, NOT_SHOWN, NOT_CHECKED)
MIN_RUNS = 3  # seeds or restarts per side (DEVELOPERS.md: "Margins, not ties")
CONTRARY, NOISE, BUDGET, RUNS = "contrary", "noise", "budget", "runs"
# why a claim is not shown, in the order a claim of several parts reports the first it has:
# too few runs or runs cut short first (no margin can be had from them), then a part pointing
# against the paper, then one inside the spread
REASONS = (RUNS, BUDGET, CONTRARY, NOISE)


@dataclass(frozen=True)
class Verdict:
    status: str  # holds, fails or not shown
    margin: str  # how the margin was judged, e.g. "ranges [0.91, 0.95] and [0.40, 0.52] apart"
    reason: str = ""  # not shown: why, one of REASONS (every caller must say); else ""

    def __post_init__(self) -> None:
        if self.status not in (HOLDS, FAILS, NOT_SHOWN):
            raise ValueError(f"a verdict is holds, fails or not shown, got {self.status!r}")
        if self.status == NOT_SHOWN and self.reason not in REASONS:
            raise ValueError(f"a verdict not shown needs a reason, one of {REASONS}, got "
                             f"{self.reason!r} ({self.margin})")
        if self.status != NOT_SHOWN and self.reason:
            raise ValueError(f"only a verdict not shown has a reason, got {self.status!r} "
                             f"with {self.reason!r}")

    @property
    def holds(self) -> bool:
        return self.status == HOLDS


def _span(values: Sequence[float]) -> str:
    return f"[{min(values):.3f}, {max(values):.3f}]"


def _few(values: Sequence[float], min_runs: int) -> bool:
    return len(values) < min_runs


def _diverged(*sides: Sequence[float]) -> Verdict | None:
    """Not shown when any run's value is not a finite number (a NaN or diverged run): min and
    max would skip a NaN, or not, by its place in the list; no such run makes a claim hold."""
    bad = sum(not math.isfinite(x) for side in sides for x in side)
    return Verdict(NOT_SHOWN, f"{bad} run(s) diverged (NaN or infinite): nothing to compare",
                   RUNS) if bad else None


def larger(a: Sequence[float], b: Sequence[float], min_runs: int = MIN_RUNS) -> Verdict:
    """``a`` larger than ``b``, each a value per seed: holds when every ``a`` is above every
    ``b`` (the ranges do not overlap), fails when every ``a`` is below every ``b``, else (ties,
    overlapping ranges, or fewer than ``min_runs`` runs a side) not shown."""
    a, b = [float(x) for x in a], [float(x) for x in b]
    if not a or not b:
        raise ValueError("larger() needs at least one value a side")
    if _few(a, min_runs) or _few(b, min_runs):
        return Verdict(NOT_SHOWN, f"{len(a)} and {len(b)} runs: fewer than {min_runs} a side",
                       RUNS)
    if diverged := _diverged(a, b):
        return diverged
    text = f"ranges {_span(a)} and {_span(b)}"
    if min(a) > max(b):
        return Verdict(HOLDS, f"{text} apart")
    if max(a) < min(b):
        return Verdict(FAILS, f"{text} apart, the wrong way")
    return Verdict(NOT_SHOWN, f"{text} overlap", NOISE)


def smaller(a: Sequence[float], b: Sequence[float], min_runs: int = MIN_RUNS) -> Verdict:
    """``a`` smaller than ``b``: :func:`larger` of ``b`` over ``a`` (its margin names ``b``'s
    range first)."""
    return larger(b, a, min_runs)


def beyond_noise(difference: float, noise: float, source: str, k: float = 2.0) -> Verdict:
    """A single measured ``difference`` (expected positive) against a noise level (one standard
    deviation) measured over seeds by ``source``: holds above ``k`` x noise, fails below
    ``-k`` x noise, else not shown."""
    if not noise > 0:
        raise ValueError(f"noise must be a positive standard deviation, got {noise!r}")
    if diverged := _diverged([difference]):
        return diverged
    text = f"difference {difference:+.3f} against {k:g} x noise {noise:.3f} ({source})"
    if difference > k * noise:
        return Verdict(HOLDS, text)
    if difference < -k * noise:
        return Verdict(FAILS, text + ", the wrong way")
    return Verdict(NOT_SHOWN, text + ": within the noise", NOISE)


def reaches(values: Sequence[float], threshold: float, min_runs: int = MIN_RUNS) -> Verdict:
    """The median of ``values`` (one per restart, as the papers' Table 1 reports) at or above
    ``threshold``: holds or fails; fewer than ``min_runs`` restarts is not shown."""
    values = [float(x) for x in values]
    if _few(values, min_runs):
        return Verdict(NOT_SHOWN, f"{len(values)} restarts: fewer than {min_runs}", RUNS)
    if diverged := _diverged(values):
        return diverged
    m = median(values)
    text = f"median {m:.3f} of {len(values)} restarts, range {_span(values)}, needs >= {threshold:g}"
    return Verdict(HOLDS if m >= threshold else FAILS, text)


def _order_of_run(reached: Mapping[int, float], expected: Sequence[int],
                  ordered: bool) -> tuple[str, str]:
    """(kind, text) of one run for :func:`first_in_order`: kind ``contrary``, ``short``, ``tie``
    or ``ok``."""
    at = {q: float(e) for q, e in reached.items() if e is not None and math.isfinite(float(e))}
    done = [q for q in expected if q in at]
    others = sorted((e, q) for q, e in at.items() if q not in expected)
    text = ", ".join(f"{q} at {at[q]:,g}" if q in at else f"{q} not reached" for q in expected)
    if others:
        text += f"; first other: {others[0][1]} at {others[0][0]:,g}"
    # another head before the expected ones have all reached the mark goes against the claim
    last = max(at[q] for q in done) if len(done) == len(expected) else math.inf
    if any(e < last for e, _ in others):
        return "contrary", text
    pairs = [(a, b) for i, a in enumerate(expected) for b in expected[i + 1:]] if ordered else []
    if any(b in at and (a not in at or at[b] < at[a]) for a, b in pairs):
        return "contrary", text + " (out of order)"
    if len(done) < len(expected):
        return "short", text
    if any(at[a] == at[b] for a, b in pairs) or any(e == last for e, _ in others):
        return "tie", text + " (a tie at one evaluation)"
    return "ok", text


def first_in_order(runs: Sequence[Mapping[int, float]], expected: Sequence[int],
                   ordered: bool = True, min_runs: int = MIN_RUNS) -> Verdict:
    """The items ``expected`` are the first to reach a mark, before every other item, and, when
    ``ordered``, in that order; one mapping per run (seed) of item -> the step it reached the
    mark (absent or None: never).  Holds when every run shows it, on at least ``min_runs``
    runs; fails when every run goes against it (another item first, or an expected one out of
    order); else not shown: ``runs`` (too few), ``budget`` (a run ended before every expected
    item reached the mark), ``contrary`` (some runs against), ``noise`` (ties at one
    evaluation)."""
    if not runs:
        raise ValueError("first_in_order() needs at least one run")
    if len(set(expected)) != len(expected) or not expected:
        raise ValueError(f"expected must name distinct items, got {list(expected)!r}")
    kinds, texts = zip(*(_order_of_run(r, expected, ordered) for r in runs))
    text = "; ".join(f"run {i + 1}: {t}" for i, t in enumerate(texts)) if len(runs) > 1 else texts[0]
    if _few(runs, min_runs):
        return Verdict(NOT_SHOWN, f"{text}; {len(runs)} run(s): fewer than {min_runs}", RUNS)
    if set(kinds) == {"ok"}:
        return Verdict(HOLDS, text)
    if set(kinds) == {"contrary"}:
        return Verdict(FAILS, text)
    reason = BUDGET if "short" in kinds else CONTRARY if "contrary" in kinds else NOISE
    return Verdict(NOT_SHOWN, text, reason)


RUN_KINDS = ("ok", "contrary", "short")


def every_run(kinds: Sequence[str], names: Sequence[str], margin: str,
              min_runs: int = MIN_RUNS) -> Verdict:
    """A property each run shows or not on its own (a rise over training, a threshold crossed
    and then another), one kind per run (named by ``names``): ``ok`` (it shows it),
    ``contrary`` (against it), ``short`` (the run ended before it could show).  Holds when every
    run shows it, on at least ``min_runs`` runs; fails when every run goes against it (a run
    against it is evidence against, one showing it could be its seed's luck); else not shown:
    ``runs`` (too few), ``budget`` (a run cut short), ``contrary`` (the runs disagree)."""
    if not kinds or len(kinds) != len(names) or not set(kinds) <= set(RUN_KINDS):
        raise ValueError(f"every_run() needs one of {RUN_KINDS} per named run, got {list(kinds)!r} "
                         f"for {list(names)!r}")
    if set(kinds) == {"contrary"}:
        return Verdict(FAILS, margin)
    if set(kinds) == {"ok"}:
        if len(kinds) < min_runs:
            return Verdict(NOT_SHOWN, f"{margin}; {len(kinds)} run(s): fewer than {min_runs}", RUNS)
        return Verdict(HOLDS, f"{margin}: every run ({', '.join(names)})")
    return Verdict(NOT_SHOWN, margin + "; " + ", ".join(f"{n}: {k}" for n, k in zip(names, kinds)),
                   BUDGET if "short" in kinds else CONTRARY)


def every(verdicts: Iterable[Verdict]) -> Verdict:
    """All of several verdicts (a claim made of parts): fails if any part fails, holds if every
    part holds, else not shown, for the first reason of :data:`REASONS` a part not shown
    has; the margins joined."""
    verdicts = list(verdicts)
    if not verdicts:
        return Verdict(NOT_SHOWN, "nothing to compare", RUNS)
    statuses = {v.status for v in verdicts}
    status = FAILS if FAILS in statuses else HOLDS if statuses == {HOLDS} else NOT_SHOWN
    reasons = {v.reason for v in verdicts if v.status == NOT_SHOWN}
    reason = next((r for r in REASONS if r in reasons), "") if status == NOT_SHOWN else ""
    return Verdict(status, "; ".join(dict.fromkeys(v.margin for v in verdicts if v.margin)),
                   reason)


def bool_verdict(holds: bool, margin: str) -> Verdict:
    """A yes/no check that is not a comparison of runs (an ordering inside one run, a fraction
    of a chance level): holds or fails."""
    return Verdict(HOLDS if holds else FAILS, margin)


__all__ = ["HOLDS", "FAILS", "NOT_SHOWN", "NOT_CHECKED", "STATUSES", "MIN_RUNS", "CONTRARY",
           "NOISE", "BUDGET", "RUNS", "REASONS", "Verdict",
           "larger", "smaller", "beyond_noise", "reaches", "first_in_order", "RUN_KINDS", "every_run",
           "every", "bool_verdict"]
