"""Notebooks 11 and 13's claims on the block (Syrkis & Søgaard §4.4-4.5): T_masked not delayed,
the attention's gradient settling first, every head on one digit, T_basis's neurons not
periodic, the active frequencies' rise and fall over every seed; each on inputs either side of
its margin, ties and too few seeds included."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pandas as pd
import pytest

from rt_lib.claims.ledger import Claims
from rt_lib.experiments import miiii_neurons
from rt_lib.experiments.miiii_neurons import (
    EXCLUSIVE,
    NeuronParams,
    claim_active_frequencies,
    claim_attention_settles,
    claim_basis_neurons,
    claim_one_digit,
    settle_epochs,
)
from rt_lib.experiments.miiii_training import NOTABLY, masked_not_delayed, median_rest_epoch


def _claims(tmp_path, notebook):
    return Claims(tmp_path / notebook, strict=False, notebook=notebook)


def _got(claims, claim_id):
    return next((c.status, c.reason) for c in claims.claims if c.id == claim_id)


def test_the_median_remaining_head_is_counted_without_the_masked_primes():
    # heads 2, 3, 5, 7 first, then 11, 13, 17 at 300, 500, 900; 19 never: half of 4 is the 2nd
    table = pd.DataFrame({"q": [2, 3, 5, 7, 11, 13, 17, 19],
                          "valid epoch": [10, 20, 30, 40, 300, 500, 900, None]})
    assert median_rest_epoch(table, 1000) == 500
    table.loc[table["q"] >= 13, "valid epoch"] = None  # only 11 of the four: not by the end
    assert median_rest_epoch(table, 1000) == 1001


@pytest.mark.parametrize("miiii, masked, status, reason", [
    ([400, 500, 600], [450, 700, 740], "holds", ""),  # within 1.25 x 600 = 750
    ([400, 500, 600], [800, 900, 1001], "fails", ""),  # every seed later (one not at all)
    ([400, 500, 600], [500, 700, 800], "not shown", "noise"),  # seeds either side
    ([400, 500], [450, 500], "not shown", "runs"),
    ([400, 500, 1001], [450, 500, 600], "not shown", "budget"),  # a T_miiii seed not reached
])
def test_masked_not_delayed_within_a_quarter_of_the_slowest_t_miiii_seed(miiii, masked, status, reason):
    assert NOTABLY == 1.25
    verdict = masked_not_delayed(miiii, masked, last_epoch=1000)
    assert (verdict.status, verdict.reason) == (status, reason)


def _gradients(attention_drop: int, other_drop: int, epochs=(10, 100, 1000, 4000)):
    """A gradient-norm table whose attention falls to 0.01 of its peak from ``attention_drop``
    on and whose MLP and embedding from ``other_drop`` on (never: beyond the last epoch)."""
    rows = []
    for epoch in epochs:
        rows.append({"epoch": epoch, "part": "attention", "norm": 1.0 if epoch < attention_drop else 0.01})
        for part in ("mlp", "embedding"):
            rows.append({"epoch": epoch, "part": part, "norm": 2.0 if epoch < other_drop else 0.02})
    return pd.DataFrame(rows)


def test_settling_is_the_first_snapshot_from_which_a_part_stays_low():
    table = _gradients(100, 5000)
    assert settle_epochs(table) == {"attention": 100, "mlp": None, "embedding": None}
    # a norm that rises again after falling has not settled there
    table.loc[(table["part"] == "attention") & (table["epoch"] == 1000), "norm"] = 0.5
    assert settle_epochs(table)["attention"] == 4000


@pytest.mark.parametrize("gradients, status, reason", [
    ([_gradients(100, 1000)] * 3, "holds", ""),  # attention first on every seed
    ([_gradients(1000, 100)] * 3, "fails", ""),  # the others first on every seed
    ([_gradients(100, 1000), _gradients(1000, 100), _gradients(100, 1000)], "not shown", "noise"),
    ([_gradients(5000, 5000)] * 3, "not shown", "noise"),  # nothing settles: a tie
    ([_gradients(100, 1000)], "not shown", "runs"),
])
def test_the_attention_must_settle_before_every_other_part_on_every_seed(tmp_path, gradients, status, reason):
    claims = _claims(tmp_path, "13_miiii_neurons")
    claim_attention_settles(dict(enumerate(gradients)), claims)
    assert _got(claims, "mi-attention-gradient-settles") == (status, reason)


def _run(shares, valid=1.0):
    """A stand-in finished run whose model's per-head digit shares (or neuron share) are given."""
    model = SimpleNamespace(shares=shares)
    model.eval = lambda: model
    history = pd.DataFrame({"step": [1000], "valid_acc": [valid]})
    return SimpleNamespace(result=SimpleNamespace(model=model, history=history))


@pytest.mark.parametrize("miiii, nanda, status, reason", [
    ([[0.97, 0.99, 0.95, 0.98]] * 3, [[0.6, 0.9, 0.7, 0.95]] * 3, "holds", ""),
    # one T_miiii head attends to both digits on every seed: against "each head on one digit"
    ([[0.97, 0.99, 0.55, 0.98]] * 3, [[0.6, 0.9, 0.7, 0.95]] * 3, "fails", ""),
    # every head on one digit, but T_nanda's too: the contrast does not separate
    ([[0.97, 0.99, m, 0.98] for m in (0.93, 0.95, 0.97)],
     [[0.96, 0.99, m, 0.99] for m in (0.92, 0.94, 0.96)], "not shown", "noise"),
    ([[0.97, 0.99, 0.95, 0.98]], [[0.6, 0.9, 0.7, 0.95]], "not shown", "runs"),
])
def test_every_t_miiii_head_on_one_digit_and_more_so_than_t_nanda(tmp_path, monkeypatch, miiii, nanda,
                                                                  status, reason):
    assert EXCLUSIVE == 0.9
    monkeypatch.setattr(miiii_neurons, "head_shares", lambda model, p: model.shares)
    claims = _claims(tmp_path, "13_miiii_neurons")
    claim_one_digit({s: _run(v) for s, v in enumerate(miiii)}, [_run(v) for v in nanda], 37,
                    claims, stalled=None)
    assert _got(claims, "mi-heads-attend-one-digit") == (status, reason)


def test_without_a_t_nanda_run_the_attention_claim_is_not_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(miiii_neurons, "head_shares", lambda model, p: model.shares)
    claims = _claims(tmp_path, "13_miiii_neurons")
    claim_one_digit({0: _run([0.99] * 4)}, [], 37, claims, stalled=None)
    assert _got(claims, "mi-heads-attend-one-digit")[0] == "not checked"


@pytest.mark.parametrize("miiii, basis, status, reason", [
    ([0.60, 0.64, 0.55], [0.30, 0.35, 0.33], "holds", ""),
    ([0.30, 0.35, 0.33], [0.60, 0.64, 0.55], "fails", ""),
    ([0.60, 0.64, 0.34], [0.30, 0.35, 0.33], "not shown", "noise"),
    ([0.60, 0.64, 0.55], [0.30], "not shown", "runs"),  # the CPU profile trains one T_basis
])
def test_t_basis_neurons_less_periodic_than_every_t_miiii_seed(tmp_path, monkeypatch, miiii, basis, status,
                                                               reason):
    monkeypatch.setattr(miiii_neurons, "model_share", lambda model, p, params: model.shares)
    claims = _claims(tmp_path, "13_miiii_neurons")
    claim_basis_neurons(dict(enumerate(miiii)), [_run(v) for v in basis], 37, NeuronParams(), claims,
                        stalled=None)
    assert _got(claims, "mi-basis-neurons-aperiodic") == (status, reason)


def test_trained_runs_read_notebook_11s_further_seeds_in_its_long_profile(monkeypatch):
    """The long profile's 13 reads seeds 1 and 2 from notebook 11's extra_seeds: each asked for
    as one seed's run (no further seeds of its own), with the key notebook 11 stored it under."""
    from rt_lib.experiments.miiii_common import MiiiiParams

    asked = []

    def fake_run(own, name, reuse):
        asked.append(own)
        return {"T_miiii": SimpleNamespace(variant="miiii", seed=own.seed)}

    monkeypatch.setattr(miiii_neurons, "run", fake_run)
    params = NeuronParams(train_params={"epochs": 10, "extra_seeds": [1, 2]}, trained_seeds=(0, 1, 2))
    got = miiii_neurons.trained_runs(params, SimpleNamespace(variant="miiii", seed=0))
    assert list(got) == [0, 1, 2] and [r.seed for r in got.values()] == [0, 1, 2]
    eleven = MiiiiParams(epochs=10, extra_seeds=(1, 2))
    for own in asked:
        assert own.extra_seeds == ()
        assert own.run_key("miiii", own.grokfast_lambda) == \
            replace(eleven, seed=own.seed, extra_seeds=()).run_key("miiii", eleven.grokfast_lambda)


def _series(*values, every=1000):
    """An authors' count over snapshots every ``every`` epochs."""
    return pd.Series(values, index=[every * (i + 1) for i in range(len(values))], dtype=float)


PAPER_SHAPE = (0, 0, 10, 18, 10, 10)  # rises, then falls back (Fig. 14: 18 at its peak, 10 at the end)


@pytest.mark.parametrize("runs, controls, status, reason", [
    # every seed's series counts: three of the paper's shape against three flat controls
    ([PAPER_SHAPE] * 3, [(0, 0, 1, 1, 1, 1)] * 3, "holds", ""),
    # one seed of three without the fall is enough to stop it (seed 0 alone would hold)
    ([PAPER_SHAPE, PAPER_SHAPE, (0, 0, 5, 10, 19, 19)], [(0, 0, 1, 1, 1, 1)] * 3, "not shown", "budget"),
    # one control of three rising as much: the margin needs the controls' range apart
    ([PAPER_SHAPE] * 3, [(0, 0, 1, 1, 1, 1)] * 2 + [(0, 0, 12, 19, 12, 12)], "not shown", "noise"),
    # the CPU profile: three T_miiii seeds, one T_basis
    ([PAPER_SHAPE] * 3, [(0, 0, 1, 1, 1, 1)], "not shown", "runs"),
])
def test_active_frequencies_judge_every_seed_and_every_control(tmp_path, runs, controls, status, reason):
    claims = _claims(tmp_path, "13_miiii_neurons")
    claim_active_frequencies({seed: _series(*c) for seed, c in enumerate(runs)},
                             [_series(*c) for c in controls], "miiii", claims)
    assert _got(claims, "mi-active-frequencies") == (status, reason)
    measured = next(c.measured for c in claims.claims if c.id == "mi-active-frequencies")
    assert all(f"seed {seed} " in measured for seed in range(len(runs)))
    assert f"{len(controls)} run(s)" in measured


def test_active_frequencies_against_a_control_of_other_epochs_are_not_compared(tmp_path):
    claims = _claims(tmp_path, "13_miiii_neurons")
    claim_active_frequencies({s: _series(*PAPER_SHAPE) for s in range(3)},
                             [_series(0, 0, 1, 1, 1, 1, every=400)] * 3, "miiii", claims)
    assert _got(claims, "mi-active-frequencies") == ("not shown", "budget")
    measured = next(c.measured for c in claims.claims if c.id == "mi-active-frequencies")
    assert "at epochs [400, 800" in measured  # the control's own epochs, named
