"""The ledger of the papers' claims, the record a notebook run keeps of them, and the verdicts
with a margin that decide each status (rt_lib.claims.ledger, rt_lib.claims.verdicts)."""

from __future__ import annotations

import importlib
import inspect
import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from rt_lib.claims import ledger as claims_mod
from rt_lib.claims.ledger import Claims, ClaimsFailed, ledger, ledger_of, summary
from rt_lib.claims.verdicts import FAILS, HOLDS, NOT_SHOWN, Verdict, beyond_noise, every, larger, reaches, smaller
from rt_lib.pipeline.registry import registry
from rt_lib.runtime.io import PROJECT_ROOT

ID = re.compile(r"""["']((?:rt|mi)-[a-z0-9]+(?:-[a-z0-9]+)*)["']""")


# --- the ledger ---------------------------------------------------------------------------------

def test_each_ledger_claim_has_a_notebook_that_exists_a_source_and_a_value():
    # which claims the ledger holds is derived from the code: the test below (no hand-typed list
    # to keep in step when an experiment adds a claim: docs/development.md)
    assert len(ledger()) >= 30 and all(ID.fullmatch(f'"{i}"') for i in ledger())
    names = set(registry())
    for claim in ledger().values():
        assert claim.notebook in names, claim.id
        assert claim.statement and claim.value and claim.source.startswith("§"), claim.id


def _ids_in_source(notebook: str) -> set[str]:
    """The claim-id literals in a notebook's cells and in its experiment module."""
    text = Path(PROJECT_ROOT, "notebooks", f"{notebook}.ipynb").read_text()
    cells = "".join("".join(c["source"]) for c in json.loads(text)["cells"] if c["cell_type"] == "code")
    # the module named after the notebook (tests/test_layers.py), which declares its EXPERIMENT
    source = inspect.getsource(importlib.import_module(f"rt_lib.experiments.{notebook.split('_', 1)[1]}"))
    return set(ID.findall(cells + source))


def test_every_ledger_id_is_checked_by_exactly_one_notebook_and_every_checked_id_is_in_it():
    found: dict[str, list[str]] = {}
    for notebook in registry():
        for claim_id in _ids_in_source(notebook):
            found.setdefault(claim_id, []).append(notebook)
    unknown = sorted(set(found) - set(ledger()))
    assert not unknown, f"claim ids in code but not in the ledger: {unknown}"
    for claim_id in ledger():
        assert found.get(claim_id) == [ledger()[claim_id].notebook], (claim_id, found.get(claim_id))


def test_a_malformed_ledger_is_refused_naming_the_file(tmp_path, monkeypatch):
    bad = tmp_path / "ledger.yaml"
    bad.write_text("- id: rt-x\n  paper: zz\n  source: s\n  statement: s\n  value: v\n  notebook: n\n")
    monkeypatch.setattr(claims_mod, "LEDGER", bad)
    ledger.cache_clear()
    try:
        with pytest.raises(ValueError, match="ledger.yaml: malformed"):
            ledger()
    finally:
        monkeypatch.undo()
        ledger.cache_clear()


# --- a run's record -----------------------------------------------------------------------------

def test_a_ledger_claim_is_recorded_with_the_ledgers_source_and_value_and_its_status(tmp_path):
    record = Claims(tmp_path, strict=False, notebook="01_modular_addition")
    record.check("rt-t1-modular", "0.99, 1.0, 1.0", reaches([0.99, 1.0, 1.0], 0.99),
                 scale="width 1024")  # a scale names where a claim not shown would show
    table = pd.read_csv(tmp_path / "claims.csv", keep_default_na=False)
    row = table.iloc[0]
    assert row["status"] == "holds" and row["source"] == "Zhong & Andreas 2024, " + ledger()["rt-t1-modular"].source
    assert row["paper"] == ledger()["rt-t1-modular"].value and "median 1.000" in row["measured"]
    assert row["scale"] == ""  # it holds: no scale to show it at


def test_ids_outside_the_ledger_or_of_another_notebook_are_refused(tmp_path):
    record = Claims(tmp_path, strict=False, notebook="01_modular_addition")
    with pytest.raises(ValueError, match="not in the ledger"):
        record.check("rt-made-up", "x", True)
    with pytest.raises(ValueError, match="checked by 02_needle_in_a_haystack"):
        record.check("rt-t1-needle", "x", True)
    with pytest.raises(ValueError, match="ledger id"):
        record.ours("rt-t1-modular", "s", "x", True)
    record.check("rt-t1-modular", "x", True)
    with pytest.raises(ValueError, match="twice"):
        record.check("rt-t1-modular", "x", True)


def test_a_profile_run_fails_on_a_failing_claim_an_undeclared_tie_or_an_unrecorded_claim(tmp_path):
    nb = "01_modular_addition"
    fails = Claims(tmp_path / "a", strict=True, notebook=nb)
    fails.check("rt-t1-modular", "x", False)
    fails.check("rt-fig3-circle-pcs13", "x", True)
    with pytest.raises(ClaimsFailed, match="rt-t1-modular"):
        fails.done()
    tie = Claims(tmp_path / "b", strict=True, notebook=nb)
    tie.check("rt-t1-modular", "x", larger([1, 2, 3], [2, 3, 4]))  # overlapping: not shown
    tie.check("rt-fig3-circle-pcs13", "x", True)
    with pytest.raises(ClaimsFailed, match="not shown without a declared"):
        tie.done()
    missing = Claims(tmp_path / "c", strict=True, notebook=nb)
    missing.check("rt-t1-modular", "x", True)
    with pytest.raises(ClaimsFailed, match="never recorded: rt-fig3-circle-pcs13"):
        missing.done()


def test_a_declared_claim_is_not_shown_with_its_scale_and_an_exploration_records_the_rest(tmp_path, capsys):
    nb = "01_modular_addition"
    record = Claims(tmp_path / "cpu", strict=True, notebook=nb,
                    not_shown={"rt-fig3-circle-pcs13": "measured 0.35 at width 256"})
    record.check("rt-t1-modular", "x", True)
    record.check("rt-fig3-circle-pcs13", "0.35", False)
    record.ours("circle-among-top-pcs", "a circle on some pair", "0.98", True)
    record.done()
    out = capsys.readouterr().out
    assert "[NOT SHOWN: contrary] rt-fig3-circle-pcs13" in out and "expected at measured 0.35" in out
    assert "2 holds, 1 not shown (1 contrary) of 3 claims" in out  # the notebook's summary line
    explore = Claims(tmp_path / "explore", strict=False, notebook=nb)
    explore.check("rt-t1-modular", "x", False)
    explore.done()  # reported, not raised; the unrecorded claim becomes "not checked"
    got = summary({"cpu": tmp_path / "cpu", "explore": tmp_path / "explore", "none": tmp_path / "x"})
    assert dict(got.papers) == {"holds": 1, "not shown": 1, "fails": 1, "not checked": 1}
    assert dict(got.ours) == {"holds": 1}
    assert any(line.startswith("explore: not checked: rt-fig3-circle-pcs13") for line in got.lines)


def test_a_malformed_claims_file_is_refused_naming_it_and_an_old_one_is_read(tmp_path):
    (tmp_path / "claims.csv").write_text("id,status\nx,maybe\n")
    with pytest.raises(ValueError, match=r"claims.csv is damaged \(unknown statuses \['maybe'\]\)"):
        claims_mod.read(tmp_path)
    (tmp_path / "claims.csv").write_text("id,source,paper,ours,holds,scale,expected\n"
                                         "a,s,p,o,True,,True\nb,s,p,o,False,w,False\n")
    assert claims_mod.read(tmp_path)["status"].tolist() == ["holds", "not shown"]
    assert claims_mod.read(tmp_path)["reason"].tolist() == ["", ""]  # before reasons: unknown
    got = summary({"old": tmp_path})
    assert claims_mod.counts_line(got.papers, got.papers_why) == (
        "1 holds, 0 fails, 1 not shown (1 unknown), 0 not checked")
    (tmp_path / "claims.csv").write_text("id,status,reason\nx,not shown,bad luck\n")
    with pytest.raises(ValueError, match=r"unknown reasons \['bad luck'\]"):
        claims_mod.read(tmp_path)


def test_ledger_of_lists_a_notebooks_ids():
    assert ledger_of("08_tinystories") == ["rt-fig4-wider-better", "rt-fig4-trained-beats-random",
                                           "rt-fig4-16x-width", "rt-fig5-samples"]


# --- verdicts -----------------------------------------------------------------------------------

def test_larger_holds_only_when_the_ranges_are_apart_and_three_a_side():
    assert larger([0.9, 0.95, 0.92], [0.5, 0.6, 0.55]).status == HOLDS
    assert larger([0.5, 0.6, 0.55], [0.9, 0.95, 0.92]).status == FAILS  # the wrong side
    assert larger([0.6, 0.9, 0.7], [0.5, 0.65, 0.55]).status == NOT_SHOWN  # overlap
    assert larger([1.0, 1.0, 1.0], [1.0, 1.0, 1.0]).status == NOT_SHOWN  # a tie
    few = larger([0.9], [0.1])
    assert few.status == NOT_SHOWN and "fewer than 3" in few.margin
    assert smaller([0.1, 0.2, 0.15], [0.5, 0.6, 0.7]).status == HOLDS


def test_beyond_noise_needs_k_sigma_either_way():
    assert beyond_noise(0.05, 0.01, "bench").status == HOLDS
    assert beyond_noise(0.015, 0.01, "bench").status == NOT_SHOWN
    assert beyond_noise(-0.05, 0.01, "bench").status == FAILS
    with pytest.raises(ValueError, match="noise"):
        beyond_noise(0.1, 0.0, "bench")


def test_reaches_reads_the_median_of_at_least_three_restarts():
    assert reaches([0.5, 0.99, 1.0], 0.99).status == HOLDS  # median 0.99
    assert reaches([0.5, 0.98, 1.0], 0.99).status == FAILS
    assert reaches([1.0, 1.0], 0.99).status == NOT_SHOWN


SMALL = (2, 3, 5, 7)


@pytest.mark.parametrize("runs, status, reason", [
    # the paper's order on three seeds, the next head after them
    ([{2: 100, 3: 200, 5: 300, 7: 400, 11: 900}] * 3, HOLDS, ""),
    # 3 before 2 on every seed: against the paper
    ([{3: 100, 2: 200, 5: 300, 7: 400}] * 3, FAILS, ""),
    # another head before 7 on every seed: against "before all the others"
    ([{2: 100, 3: 200, 5: 300, 11: 350, 7: 400}] * 3, FAILS, ""),
    # 2 and 3 at one evaluation: the order is not resolved
    ([{2: 100, 3: 100, 5: 300, 7: 400}] * 3, NOT_SHOWN, "noise"),
    # 7 never reached: the runs ended first
    ([{2: 100, 3: 200, 5: 300}] * 3, NOT_SHOWN, "budget"),
    # one seed against, two with it: not shown, the direction kept
    ([{2: 100, 3: 200, 5: 300, 7: 400}] * 2 + [{3: 100, 2: 200, 5: 300, 7: 400}], NOT_SHOWN,
     "contrary"),
    # the paper's order on one seed: too few
    ([{2: 100, 3: 200, 5: 300, 7: 400}], NOT_SHOWN, "runs"),
])
def test_first_in_order_holds_on_three_runs_in_the_papers_order_only(runs, status, reason):
    from rt_lib.claims.verdicts import first_in_order
    verdict = first_in_order(runs, SMALL)
    assert (verdict.status, verdict.reason) == (status, reason), verdict.margin


def test_first_in_order_as_a_set_ignores_the_order_among_the_expected():
    from rt_lib.claims.verdicts import first_in_order
    nxt = (11, 13, 17, 19)
    assert first_in_order([{19: 1, 13: 2, 17: 3, 11: 4, 23: 5}] * 3, nxt, ordered=False).status == HOLDS
    assert first_in_order([{19: 1, 13: 2, 17: 3, 11: 4, 23: 5}] * 3, nxt).status == FAILS
    assert first_in_order([{19: 1, 23: 2, 17: 3, 11: 4, 13: 5}] * 3, nxt, ordered=False).status == FAILS
    with pytest.raises(ValueError, match="distinct"):
        first_in_order([{}], (2, 2))


@pytest.mark.parametrize("at", [0, 1, 2])
def test_a_diverged_run_never_makes_a_claim_hold_wherever_it_sits(at):
    """min, max and median skip a NaN or not by its place in the list: before the check, these
    held with the NaN anywhere but first."""
    for bad in (math.nan, math.inf):
        values = [3.3, 3.3, 3.3]
        values[at] = bad
        for verdict in (smaller(values, [3.9] * 3), larger([3.9] * 3, values),
                        reaches([1.0, 1.0, 1.0][:at] + [bad] + [1.0, 1.0, 1.0][at + 1:], 0.99)):
            assert verdict.status == NOT_SHOWN and "diverged" in verdict.margin
    assert beyond_noise(math.nan, 0.01, "bench").status == NOT_SHOWN


def test_every_fails_on_any_failing_part_and_holds_only_when_all_hold():
    h, f, n = (Verdict(HOLDS, "a"), Verdict(FAILS, "b"), Verdict(NOT_SHOWN, "c", "noise"))
    assert every([h, h]).status == HOLDS
    assert every([h, n]).status == NOT_SHOWN
    assert every([h, n, f]).status == FAILS
    assert every([]).status == NOT_SHOWN
    with pytest.raises(ValueError):
        Verdict("maybe", "")


def test_a_verdict_not_shown_says_why_and_only_it_does():
    with pytest.raises(ValueError, match="needs a reason"):
        Verdict(NOT_SHOWN, "ranges overlap")
    with pytest.raises(ValueError, match="needs a reason"):
        Verdict(NOT_SHOWN, "ranges overlap", "unlucky")
    with pytest.raises(ValueError, match="only a verdict not shown"):
        Verdict(HOLDS, "apart", "noise")
    assert larger([1, 2], [0, 0, 0]).reason == "runs"  # two runs a side is too few
    assert larger([1, 2, 3], [2, 3, 4]).reason == "noise"  # three a side, ranges overlap
    assert larger([1, 2, math.nan], [0, 0, 0]).reason == "runs"  # a diverged run is no run
    assert beyond_noise(0.01, 0.01, "bench").reason == "noise"
    assert reaches([1.0], 0.99).reason == "runs"
    assert larger([2, 3, 4], [0, 0, 0]).reason == larger([0, 0, 0], [2, 3, 4]).reason == ""


def test_a_claim_of_parts_not_shown_gives_the_first_reason_in_order():
    noise, budget, runs = (Verdict(NOT_SHOWN, r, r) for r in ("noise", "budget", "runs"))
    contrary = Verdict(NOT_SHOWN, "c", "contrary")
    assert every([noise, contrary]).reason == "contrary"  # a part against the paper says more
    assert every([noise, contrary, budget]).reason == "budget"  # but no margin from a cut run
    assert every([budget, runs, noise]).reason == "runs"
    assert every([Verdict(FAILS, "f"), runs]).reason == ""  # fails: no reason


def test_a_declared_claim_keeps_its_direction_in_its_reason(tmp_path):
    """Declared not to show at this scale: a verdict against the paper is recorded not shown,
    contrary; one inside the noise, noise; one that holds, holds."""
    nb = "01_modular_addition"
    declared = {"rt-t1-modular": "0.5 at width 16", "rt-fig3-circle-pcs13": "0.35"}
    record = Claims(tmp_path / "cpu", strict=False, notebook=nb, not_shown=declared)
    against = record.check("rt-t1-modular", "x", larger([0, 0, 0], [1, 1, 1]))
    tie = record.check("rt-fig3-circle-pcs13", "x", larger([1, 2, 3], [2, 3, 4]))
    mine = record.ours("circle-somewhere", "a statement", "x", False)
    record.done()
    assert (against.status, against.reason) == ("not shown", "contrary")
    assert (tie.status, tie.reason) == ("not shown", "noise")
    assert (mine.status, mine.reason) == ("fails", "")  # not declared: it fails, no reason
    reasons = claims_mod.read(tmp_path / "cpu").set_index("id")["reason"]
    assert reasons[["rt-t1-modular", "rt-fig3-circle-pcs13", "circle-somewhere"]].tolist() == [
        "contrary", "noise", ""]
    got = summary({"cpu": tmp_path / "cpu"})
    assert dict(got.papers_why) == {"contrary": 1, "noise": 1}
    assert claims_mod.counts_line(got.papers, got.papers_why).startswith(
        "0 holds, 0 fails, 2 not shown (1 contrary, 1 noise)")
    assert any(line.startswith("cpu: not shown (contrary): rt-t1-modular") for line in got.lines)


@pytest.mark.parametrize("profile, declared", [
    ("cpu", "not_shown_on_cpu"), ("gpu", "not_shown_on_gpu"), ("gpu-smoke", None), ("paper", None)])
def test_a_run_reads_the_declarations_of_its_own_profile_only(profile, declared, tmp_path,
                                                             monkeypatch, run_context, capsys):
    """Notebook 11 declares different claims not shown on the CPU and on the GPU: a run takes
    those of its profile, and a smoke run or the papers' scale none (there a claim that does
    not hold fails)."""
    from rt_lib.experiments import miiii_training
    from rt_lib.runtime import io

    exp = miiii_training.EXPERIMENT
    assert exp.not_shown_on_gpu and set(exp.not_shown_on_gpu) != set(exp.not_shown_on_cpu)
    monkeypatch.setattr(io, "_folders", {})  # start() names its folder there: not for later tests
    run_context(results_root=tmp_path, profile=profile)
    _, _, record = exp.start({})
    assert record.not_shown == (getattr(exp, declared) if declared else {})
    if declared:  # a declared claim that holds names the field to remove it from
        record.check(next(iter(record.not_shown)), "measured", True)
        record.strict = False  # the other ledger claims of 11 are not recorded here
        record.done()
        assert f"holds: remove it from {declared}\n" in capsys.readouterr().out


def test_every_run_holds_on_three_runs_that_each_show_it():
    from rt_lib.claims.verdicts import every_run
    names = ["seed 0", "seed 1", "seed 2"]

    def got(*kinds):
        v = every_run(list(kinds), names[:len(kinds)], "m")
        return v.status, v.reason

    assert got("ok", "ok", "ok") == ("holds", "")
    assert got("ok") == ("not shown", "runs")  # one run showing it could be its seed's
    assert got("contrary") == got("contrary", "contrary", "contrary") == ("fails", "")
    assert got("ok", "contrary", "ok") == ("not shown", "contrary")
    assert got("ok", "short", "contrary") == ("not shown", "budget")
    assert "seed 1: contrary" in every_run(["ok", "contrary"], names[:2], "m").margin
    with pytest.raises(ValueError, match="one of"):
        every_run(["yes"], ["seed 0"], "m")
    with pytest.raises(ValueError, match="per named run"):
        every_run(["ok", "ok"], ["seed 0"], "m")


def test_a_claim_on_a_reduced_task_is_never_counted_at_the_papers_scale(tmp_path, capsys):
    """The scale rule: a claim records the task it was measured on; only the paper's task counts
    toward the claims holding at the paper's scale, a reduced one (with its reduction in words)
    and one of unsaid size are counted apart, per paper."""
    reduced = Claims(tmp_path / "reduced", strict=False, notebook="01_modular_addition",
                     reduced="p = 59 of 97")
    reduced.check("rt-t1-modular", "1.000", True)
    reduced.check("rt-fig3-circle-pcs13", "0.95", True, reduced=None)  # said per claim: the paper's
    assert "[HOLDS] rt-t1-modular (reduced task: p = 59 of 97): 1.000" in capsys.readouterr().out
    paper = Claims(tmp_path / "paper", strict=False, notebook="11_miiii_training", reduced=None)
    paper.check("mi-grokking", "x", True)
    unsaid = Claims(tmp_path / "unsaid", strict=False, notebook="11_miiii_training")
    unsaid.check("mi-every-head-groks", "x", True)
    rows = claims_mod.read(tmp_path / "reduced")
    assert rows[["id", "task_size", "reduction"]].values.tolist() == [
        ["rt-t1-modular", "reduced", "p = 59 of 97"], ["rt-fig3-circle-pcs13", "paper", ""]]
    got = summary({n: tmp_path / n for n in ("reduced", "paper", "unsaid")})
    assert got.papers["holds"] == 4  # every status counts as before ...
    assert (got.holds("rt", "paper"), got.holds("rt", "reduced")) == (1, 1)  # ... the scale apart
    assert (got.holds("mi", "paper"), got.holds("mi", "unknown")) == (1, 1)
    assert got.holds_line() == ("rt: 1 hold at the paper's scale, 1 on a reduced task; mi: 1 hold "
                                "at the paper's scale, 0 on a reduced task, 1 on a task of unsaid size")
    # a claims.csv written before task sizes is of unsaid size: never the paper's scale
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "claims.csv").write_text("id,status,reason\nrt-t1-modular,holds,\n")
    assert summary({"old": tmp_path / "old"}).holds("rt", "paper") == 0
    (tmp_path / "old" / "claims.csv").write_text(
        "id,status,reason,task_size,reduction\nrt-t1-modular,holds,,huge,\n")
    with pytest.raises(ValueError, match=r"unknown task sizes \['huge'\]"):
        claims_mod.read(tmp_path / "old")


@pytest.mark.parametrize("notebook, changes, reduced", [
    ("01_modular_addition", {}, "p = 59 of 97"), ("01_modular_addition", {"p": 199}, None),
    ("03_decimal_addition", {}, "3 of 10 digits"), ("03_decimal_addition", {"n_digits": 5},
                                                    "5 of 10 digits"),
    ("03_decimal_addition", {"n_digits": 10}, None),
    ("05_memorisation", {}, "n = 128 of 512"), ("11_miiii_training", {}, "p = 37 of 113"),
    ("11_miiii_training", {"p": 113}, None), ("14_miiii_search", {}, "p = 11 of 113"),
    ("10_circuit_imitation", {}, "vocabulary 128 of 512, 16 of 40 positions")])
def test_each_notebook_says_how_its_task_compares_with_the_papers(notebook, changes, reduced):
    assert registry()[notebook].params(**changes).smaller_than_paper() == reduced


def test_every_experiment_says_its_task_size(monkeypatch):
    """No notebook's claims fall back to an unsaid task size in its CPU profile."""
    monkeypatch.setenv("RT_TINYSTORIES", str(PROJECT_ROOT.parent / "shared" / "data" / "tinystories"))
    from rt_lib.runtime.params import Params
    for name, experiment in registry().items():
        assert experiment.params.smaller_than_paper is not Params.smaller_than_paper, name


def test_decimal_additions_claim_carries_the_runs_digits(tmp_path):
    """Decimal addition's claim, checked by the notebook's own call of check_solves, is on the
    run's task: 3 digits are a reduced task, never the paper's 10 (as 3 and 5 counted before)."""
    from rt_lib.experiments.decimal_addition import DecimalParams
    from rt_lib.experiments.reporting import check_solves

    metrics = pd.DataFrame({"model": "random transformer", "width": 512, "restart": range(3),
                            "test_exact": [1.0, 1.0, 1.0]})
    for digits, size in ((3, ("reduced", "3 of 10 digits")), (5, ("reduced", "5 of 10 digits")),
                         (10, ("paper", ""))):
        record = Claims(tmp_path / str(digits), strict=False, notebook="03_decimal_addition",
                        reduced=DecimalParams(n_digits=digits).smaller_than_paper())
        claim = check_solves(record, "rt-t1-decimal", metrics, "test_exact", "decimal addition")
        assert (claim.status, claim.task_size, claim.reduction) == ("holds", *size)
