"""Experiment 13: what miiii's MLP neurons compute, how its gradients settle and where its heads
attend (Syrkis & Søgaard 2024, §4.4-4.5, Figs. 14-18).

Analyses the weight snapshots of notebook 11's T_miiii run over training (loaded as notebook 12
loads its runs: the same training settings, ``train_params``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from rt_lib.analysis import fourier
from rt_lib.analysis.activations import digit_attention_shares
from rt_lib.analysis.gradients import norms_over, settled_at
from rt_lib.claims.ledger import Claims
from rt_lib.claims.verdicts import BUDGET, HOLDS, NOT_SHOWN, RUNS, Verdict, bool_verdict, every, every_run, larger
from rt_lib.experiment import Experiment
from rt_lib.experiments.miiii_common import (
    TRAINING,
    MiiiiParams,
    MiiiiRun,
    finished_run,
    model_at,
    not_generalised,
    run,
    runs_folder,
    smoke_train_params,
    snapshot_models,
    training_params,
)
from rt_lib.model import build_model
from rt_lib.runtime.params import Params
from rt_lib.tasks.miiii import miiii_inputs

NAME = "13_miiii_neurons"


@dataclass(frozen=True)
class NeuronParams(Params):
    """Notebook 13's parameters."""

    variant: str = "miiii"  # which run of notebook 11
    train_params: dict[str, Any] = field(default_factory=dict)  # notebook 11's parameters (defaults: its CPU profile)
    k_std: float = 1.0  # active: power > mean + k_std * std (code 1, paper text 2)
    n_neurons: int = 6  # neurons shown in the static figure (largest variance)
    n_top: int = 3  # top frequency pairs listed per neuron
    # T_<variant> seeds whose final models are compared with untrained ones: three a side (a
    # margin over seeds, not over one model's neurons); the seed of notebook 11's run is read,
    # the others trained here with its recipe
    trained_seeds: tuple[int, ...] = (0, 1, 2)  # trained models compared with untrained ones

    @classmethod
    def smoke_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The smoke test reads notebook 11's smoke runs (:func:`smoke_train_params`)."""
        return smoke_train_params(super().smoke_config(config))

    def check(self) -> None:
        if self.k_std < 0:
            raise ValueError(f"k_std must be a non-negative number, got {self.k_std!r}")
        for name in ("n_neurons", "n_top"):
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not self.trained_seeds or len(set(self.trained_seeds)) != len(self.trained_seeds):
            raise ValueError(f"trained_seeds must be distinct seeds, at least one, got "
                             f"{list(self.trained_seeds)!r}")
        self.training()

    def smaller_than_paper(self) -> str | None:
        return self.training().smaller_than_paper()  # notebook 11's runs, read here

    def training(self) -> MiiiiParams:
        return training_params(self.train_params, (self.variant,))


EXPERIMENT = Experiment(
    NAME, NeuronParams, reads=(TRAINING,),
    title="miiii's neurons over training, active frequencies (Figs. 14-15)",
    not_shown_on_cpu={
        "mi-neurons-periodic": (
            "T_miiii has not generalised by the CPU profile's 4,000 epochs (final validation "
            "0.40, 0.34, 0.31 on seeds 0-2), and the paper's neurons are the trained model's: "
            "those of the model caught mid-transition are periodic beyond untrained models' "
            "already (median top-3 share 0.46-0.64 against 0.33-0.42, notebook 13's claim line), "
            "as notebook 12's embeddings are apart on one kernel path and not on another; the "
            "paper profile's 65,536 epochs at p = 113 are expected to show the trained model's "
            "(an estimate)"),
        "mi-active-frequencies": (
            "three T_miiii seeds and one T_basis (the CPU profile trains one) at 4,000 epochs: "
            "the authors' count (neuron 0, k = 1) of T_miiii ends at 17-19 on seeds 0-2 from 0 "
            "before epoch 885, and T_basis's, the control with nothing periodic to learn, "
            "0 -> 11, 19, 17 over the last three snapshots: at this scale the count's rise "
            "follows the neurons' growth, periodic or not, and no run falls back by its end; "
            "the long profile's three seeds of both at 10,000 epochs do not tell them apart "
            "either (T_basis's count rises as much, evidence/long/): the paper's 65,536 epochs "
            "at p = 113 are expected to (an estimate)"),
        "mi-basis-neurons-aperiodic": (
            "the CPU profile trains one T_basis (seed 0), and its T_miiii has not generalised by "
            "4,000 epochs: the share is 0.21 for T_basis against 0.46-0.64 for three T_miiii "
            "seeds (notebook 13's claim line), apart but on one T_basis run and mid-transition; "
            "the long profile's three seeds of both at 10,000 epochs are expected to show it"),
        "mi-attention-gradient-settles": (
            "on seeds 0-2 at 4,000 epochs every part's gradient norm falls to a tenth of its "
            "peak within the first 200 epochs but the embedding's (attention at 92-196, the MLP "
            "at 43-196: notebook 13's claim line), so the seeds do not separate the attention "
            "from the rest; the snapshots of longer runs (the long profile's 10,000 epochs, the "
            "paper's 65,536) would say whether it settles first (not measured)"),
        "mi-heads-attend-one-digit": (
            "T_miiii has not generalised by 4,000 epochs (validation 0.32-0.40 on seeds 0-2), "
            "and its heads then send 0.62-0.92 of their digit attention to one digit against "
            "T_nanda's 0.52 (one T_nanda run): the paper's heads are the trained model's; the "
            "long profile's three seeds of both at 10,000 epochs are expected to show it")})


def neuron_grids(models: dict[int, nn.Module], p: int) -> dict[int, np.ndarray]:
    """{epoch: activations [p, p, d_mlp]} over the input grid for every snapshot."""
    return {epoch: fourier.neuron_grid(m, p) for epoch, m in models.items()}


def active_frequency_table(grids: dict[int, np.ndarray], k_values: tuple[float, ...]) -> pd.DataFrame:
    """Per snapshot: the number of active frequency pairs of the MLP (power summed over neurons)
    for each threshold mean + k std, and the share of that power combining both digits."""
    rows = []
    for epoch, grid in grids.items():
        power = fourier.spectrum_2d(grid)
        row: dict[str, Any] = {"epoch": epoch}
        for k in k_values:
            row[f"active (k = {k:g})"] = len(fourier.active_frequencies(power, k))
        row["interaction share"] = fourier.interaction_share(power)
        rows.append(row)
    return pd.DataFrame(rows)


def authors_active_frequency_table(grids: dict[int, np.ndarray], k_values: tuple[float, ...],
                                   neurons: int = 5) -> pd.DataFrame:
    """Per snapshot: the authors' count of active frequencies (:func:`rt_lib.analysis.fourier.authors_active_counts`)
    for neuron 0, the one their figure shows, and its mean over their first ``neurons`` neurons,
    for each threshold mean + k std."""
    epochs = sorted(grids)
    spectra = np.stack([fourier.authors_neuron_spectrum(grids[e], neurons) for e in epochs])  # [t, n, f]
    table: dict[str, Any] = {"epoch": epochs}
    for k in k_values:
        counts = np.stack([fourier.authors_active_counts(spectra[:, i], k)
                           for i in range(spectra.shape[1])], 1)  # [t, n]
        table[f"active, neuron 0 (k = {k:g})"] = counts[:, 0]
        table[f"active, mean of {spectra.shape[1]} neurons (k = {k:g})"] = counts.mean(1).round(1)
    return pd.DataFrame(table)


def authors_counts(r: MiiiiRun, p: int, k: float = 1.0) -> pd.Series:
    """The authors' count of active frequencies of neuron 0 at threshold mean + ``k`` std over
    every weight snapshot of ``r`` (:func:`authors_active_frequency_table`), indexed by epoch:
    one run's series for :func:`claim_active_frequencies`."""
    table = authors_active_frequency_table(neuron_grids(snapshot_models(r), p), (k,))
    return table.set_index("epoch")[f"active, neuron 0 (k = {k:g})"]


def control_authors_table(params: NeuronParams, k_values: tuple[float, ...]) -> pd.DataFrame | None:
    """:func:`authors_active_frequency_table` of notebook 11's T_basis run over its snapshots, the
    control of the active-frequency count (shuffled labels: its neurons grow as it memorises,
    with nothing periodic to learn); None where notebook 11 did not train it (never trained
    here)."""
    training = training_params(params.train_params, ("basis",))
    basis = finished_run(training, "basis")
    if basis is None:
        return None
    return authors_active_frequency_table(neuron_grids(snapshot_models(basis), training.p),
                                          k_values)


#: The count "falls back" (the paper: 18 at its peak, 10 at the end) when its last snapshot is at
#: most this share of its peak.
FALLS_TO = 0.75


def rise_and_fall(runs: list[pd.Series], controls: list[pd.Series], unequal: str = "") -> Verdict:
    """``mi-active-frequencies`` on the authors' count over snapshots, one series per seed: on
    every run it rises (the mean over the last third above the first third's) and falls back
    from its peak by the last snapshot (not shown, ``budget``, while it has not: the run ended
    first); and it rises more than the same count of the control runs (T_basis), ranges apart
    over three seeds a side (fewer, or none, is not shown, ``runs``).  ``unequal``: how the
    control's epochs differ from the runs' (empty: they are the same); a control trained for
    another budget is not compared (not shown, ``budget``)."""
    parts, rises = [], []
    for counts in runs:
        early, late = thirds(counts)
        peak, last = float(counts.max()), float(counts.iloc[-1])
        rises.append(late - early)
        parts.append(bool_verdict(late > early, f"mean {early:.1f} over the first third of the "
                                  f"snapshots, {late:.1f} over the last: needs a rise"))
        if peak > 0 and last <= FALLS_TO * peak:
            parts.append(Verdict(HOLDS, f"falls from its peak {peak:g} to {last:g}"))
        else:
            parts.append(Verdict(NOT_SHOWN, f"{last:g} at the last snapshot against its peak "
                                            f"{peak:g}: no fall to {FALLS_TO:g} x the peak before "
                                            "the run ended", BUDGET))
    if not controls:
        parts.append(Verdict(NOT_SHOWN, "no control run (T_basis): the count also rises where a "
                                        "neuron's amplitude grows, periodic or not", RUNS))
    elif unequal:
        parts.append(Verdict(NOT_SHOWN, f"the control trained for other epochs ({unequal}): "
                                        "its rise is not comparable", BUDGET))
    else:
        control_rises = [late - early for early, late in map(thirds, controls)]
        parts.append(larger(rises, control_rises))
    return every(parts)


def claim_active_frequencies(runs: dict[int, pd.Series], controls: list[pd.Series], variant: str,
                             claims: Claims) -> None:
    """``mi-active-frequencies`` (Fig. 14): :func:`rise_and_fall` over the authors' count
    (neuron 0, k = 1, :func:`authors_counts`) of every trained seed, ``runs`` {seed: series
    indexed by epoch}, against that of every control run, ``controls`` (T_basis on the seeds
    notebook 11 trained it: three a side to hold, the CPU profile trains one)."""
    epochs = list(next(iter(runs.values())).index)

    def said(counts: pd.Series) -> str:
        own = list(counts.index)
        return f"{counts.tolist()}" + ("" if own == epochs else f" at epochs {own}")

    measured = (f"the authors' count, neuron 0, k = 1, at epochs {epochs}: T_{variant} "
                + "; ".join(f"seed {seed} {said(c)}" for seed, c in runs.items()))
    if controls:
        measured += f"; T_basis (the control, {len(controls)} run(s)) " + "; ".join(map(said, controls))
    ends = {int(c.index[-1]) for c in runs.values()}, {int(c.index[-1]) for c in controls}
    unequal = (f"T_{variant} to epoch {max(ends[0]):,}, T_basis to {max(ends[1]):,}"
               if controls and ends[0] != ends[1] else "")
    claims.check("mi-active-frequencies", measured,
                 rise_and_fall(list(runs.values()), controls, unequal),
                 scale="p = 113, 65,536 epochs logged every epoch, T_basis beside (the paper "
                       "profile), three seeds")


def thirds(values: pd.Series) -> tuple[float, float]:
    """Means of the first and of the last third of a series over snapshots (at least one each)."""
    n = max(len(values) // 3, 1)
    return float(values.iloc[:n].mean()), float(values.iloc[-n:].mean())


def strongest_neurons(grid: np.ndarray, n: int) -> list[int]:
    """The ``n`` neurons with the largest activation variance over the grid (the live ones)."""
    return [int(i) for i in np.argsort(grid.reshape(-1, grid.shape[-1]).var(0))[::-1][:n]]


def readout_strength(model: nn.Module) -> np.ndarray:
    """[d_mlp, n_tasks]: norm of each neuron's write (W_out row) through each head's W_U; how much
    a neuron can move task q's logits."""
    w_out = model.blocks[-1].mlp.W_out.detach().cpu()  # [m, d]
    w_u = model.W_U.detach().cpu()  # [n_tasks, d, q]
    return torch.einsum("md,ndq->mnq", w_out, w_u).norm(dim=-1).double().numpy()


UNTRAINED_SEEDS = (100, 101, 102)  # the baseline's initialisations, apart from the run's seed


def trained_runs(params: NeuronParams, main: MiiiiRun) -> dict[int, MiiiiRun]:
    """{seed: finished run} of T_<variant> for every seed of ``trained_seeds``: the seed of
    notebook 11's run is ``main``; each other is read from notebook 11's folder when it holds
    it (its extra_seeds: the same recipe, the same run), else trained (or resumed) in this
    notebook's folder with notebook 11's recipe, only its one run."""
    training = params.training()
    out = {}
    for seed in params.trained_seeds:
        if seed == training.seed:
            out[seed] = main
            continue
        # one seed's run, as notebook 11 keeps its further seeds (extra_seeds is not in the key)
        own = replace(training, seed=seed, extra_seeds=(), variants=(params.variant,),
                      lambda_zero=False, dropout_zero=False)
        runs = run(own, name=NAME, reuse=(runs_folder(training),))
        out[seed] = next(r for r in runs.values() if r.variant == params.variant)
    return out


def periodic_shares(grid: np.ndarray, n_neurons: int, n_top: int) -> list[float]:
    """For the ``n_neurons`` strongest neurons of ``grid``: the share of each one's 2-D spectral
    power (zero frequency left out) in its ``n_top`` strongest frequency pairs."""
    power = fourier.spectrum_2d(grid)
    return [sum(s for *_, s in fourier.top_frequencies(power[..., n], n_top))
            for n in strongest_neurons(grid, n_neurons)]


def model_share(model: nn.Module, p: int, params: NeuronParams) -> float:
    """One model's periodicity: the median over its ``n_neurons`` strongest neurons of
    :func:`periodic_shares` (the model, not the neuron, is the unit the seeds repeat)."""
    return float(np.median(periodic_shares(fourier.neuron_grid(model, p), params.n_neurons,
                                           params.n_top)))


def check_claims(table: pd.DataFrame, authors: pd.DataFrame, grids: dict[int, np.ndarray],
                 trained: dict[int, MiiiiRun], p: int, params: NeuronParams,
                 claims: Claims, gradients: dict[int, pd.DataFrame] | None = None,
                 nanda: list[MiiiiRun] = (), basis: list[MiiiiRun] = ()) -> None:
    """Record notebook 13's claims.  Periodic neurons: the final model of each run of
    ``trained`` (:func:`trained_runs`, a seed each) against untrained models of the same shape
    (seeds :data:`UNTRAINED_SEEDS`), one value per model (:func:`model_share`): an untrained
    ReLU neuron over u[x1] + v[x0] + c is already far from a uniform spectrum, so every trained
    model's share must lie above every untrained one's (ranges apart, three a side; one model's
    neurons move with the platform's rounding).  The paper's neurons are the trained T_miiii's:
    not shown (budget) while a run has not generalised (as notebook 12's claims).
    The authors' count of active frequencies must rise over training and fall back on every
    trained seed, more than on every T_basis run of ``basis`` (:func:`claim_active_frequencies`;
    ``authors``: the main seed's table, read rather than counted again).  Ours: the share of the
    MLP's power combining both digits goes from below 0.1 to above 0.3 on every trained seed
    (three to hold).
    ``gradients`` ({seed: :func:`gradient_table`}), ``nanda`` and ``basis`` (notebook 11's runs of
    T_nanda and T_basis, :func:`finished_runs`): Figs. 17, 18 and 15, one function each."""
    models = {seed: r.result.model.eval() for seed, r in trained.items()}
    cfg = next(iter(models.values())).cfg
    ours = {seed: model_share(m, p, params) for seed, m in models.items()}
    untrained = {seed: model_share(build_model(cfg, seed).eval(), p, params)
                 for seed in UNTRAINED_SEEDS}
    histories = [r.result.history for r in trained.values()]
    stalled = not_generalised(f"T_{params.variant}",
                              [float(h["valid_acc"].iloc[-1]) for h in histories],
                              max(int(h["step"].iloc[-1]) for h in histories),
                              params.training().generalised_at)
    claims.check("mi-neurons-periodic", f"median power share of the top {params.n_top} frequency "
                 f"pairs over each model's {params.n_neurons} strongest neurons: trained "
                 f"{', '.join(f'{s:.2f}' for s in ours.values())} (seeds "
                 f"{', '.join(map(str, ours))}); untrained "
                 f"{', '.join(f'{s:.2f}' for s in untrained.values())} (seeds "
                 f"{', '.join(map(str, untrained))})",
                 larger(list(ours.values()), list(untrained.values())) if stalled is None else stalled,
                 scale="p = 113 (the paper profile)")
    # every trained seed's count and every T_basis seed's (the main seed's from its table)
    main_seed = params.training().seed
    counts = {seed: authors.set_index("epoch")["active, neuron 0 (k = 1)"] if seed == main_seed
              else authors_counts(r, p) for seed, r in trained.items()}
    claim_active_frequencies(counts, [authors_counts(r, p) for r in basis], params.variant, claims)
    # ours, on every trained seed: the share at the first snapshot and at the end (the main
    # run's from its table, the others' from their own snapshots at the same epochs)
    start, end = int(table["epoch"].iloc[0]), int(table["epoch"].iloc[-1])
    shares = {seed: (float(table["interaction share"].iloc[0]), float(table["interaction share"].iloc[-1]))
              if seed == main_seed else
              tuple(interaction_share(model_at(r, e), p) for e in (start, end))
              for seed, r in trained.items()}
    measured = ("interaction share " + "; ".join(
        f"{'' if len(shares) == 1 else f'seed {seed}: '}{a:.3f} at epoch {start}, {b:.3f} at epoch {end}"
        for seed, (a, b) in shares.items()))
    claims.ours("mlp-combines-the-digits", "over training the MLP's frequencies come to combine "
                "both digits", measured,
                every_run(["ok" if a < COMBINED[0] and b > COMBINED[1] else "contrary"
                           for a, b in shares.values()], [f"seed {seed}" for seed in shares],
                          f"needs < {COMBINED[0]:g}, then > {COMBINED[1]:g}"))
    claim_basis_neurons(ours, list(basis), p, params, claims, stalled)
    if gradients:
        claim_attention_settles(gradients, claims)
    else:
        claims.not_checked("mi-attention-gradient-settles", "no gradient norms given (gradients)")
    nanda_stalled = None if not nanda else not_generalised(
        "T_nanda", [float(r.result.history["valid_acc"].iloc[-1]) for r in nanda],
        max(int(r.result.history["step"].iloc[-1]) for r in nanda), params.training().generalised_at)
    claim_one_digit(trained, list(nanda), p, claims, stalled or nanda_stalled)
    claims.done()


#: ``mi-heads-attend-one-digit``: a head "focuses exclusively on one digit" (§4.5) when at least
#: this share of the attention it pays the two digits goes to one of them: our reading of
#: "exclusively", fixed before any run was read (0.5 is both digits alike)
EXCLUSIVE = 0.9
#: ``mi-attention-gradient-settles``: a part's gradient norm has settled from the snapshot after
#: which it stays at or below this fraction of its peak (our reading of "converges", Fig. 17)
SETTLED = 0.1


def head_shares(model: nn.Module, p: int) -> list[float]:
    """Per head, the share of the attention from "=" to the two digits that goes to the head's
    preferred digit, over every input (:func:`digit_attention_shares`)."""
    tokens, _ = miiii_inputs(p)
    return [float(v) for v in digit_attention_shares(model, tokens)]


def gradient_table(r: MiiiiRun) -> pd.DataFrame:
    """epoch, part, norm: the training loss's gradient norm per part of the model at each weight
    snapshot of ``r`` (:func:`rt_lib.analysis.gradients.gradient_norms`; Fig. 17)."""
    rows = [{"epoch": epoch, "part": part, "norm": norm}
            for epoch, norms in norms_over(snapshot_models(r), r.task).items()
            for part, norm in norms.items()]
    return pd.DataFrame(rows)


def settle_epochs(table: pd.DataFrame) -> dict[str, int | None]:
    """{part: the epoch its gradient norm settled (:data:`SETTLED` of its peak), None if not}."""
    return {part: settled_at(rows["epoch"].tolist(), rows["norm"].tolist(), SETTLED)
            for part, rows in table.groupby("part", sort=False)}


def claim_attention_settles(gradients: dict[int, pd.DataFrame], claims: Claims) -> None:
    """The attention's gradient norm settles before every other part's, on every seed: the
    settling epochs compared seed against seed (a part that never settles counts as settling
    after the run's last snapshot)."""
    settled = {seed: settle_epochs(t) for seed, t in gradients.items()}
    after = {seed: int(t["epoch"].max()) + 1 for seed, t in gradients.items()}
    attention = [s.get("attention") or after[seed] for seed, s in settled.items()]
    others = [min((at or after[seed]) for part, at in s.items() if part != "attention")
              for seed, s in settled.items()]

    def said(s: dict[str, int | None]) -> str:
        return ", ".join(f"{part} {'not' if at is None else f'{at:,}'}" for part, at in s.items())

    claims.check("mi-attention-gradient-settles", f"epoch from which each part's gradient norm "
                 f"stays at or below {SETTLED:g} of its peak: "
                 + "; ".join(f"seed {seed}: {said(s)}" for seed, s in settled.items()),
                 larger(others, attention),
                 scale="the weight snapshots of three seeds of T_miiii (the paper profile's "
                       "65,536 epochs at p = 113)")


def claim_one_digit(trained: dict[int, MiiiiRun], nanda: list[MiiiiRun], p: int,
                    claims: Claims, stalled: Verdict | None) -> None:
    """Every head of T_miiii attends to one digit (its least exclusive head at least
    :data:`EXCLUSIVE`, every seed), and T_miiii's least exclusive head more so than T_nanda's,
    seed against seed."""
    if not nanda:
        claims.not_checked("mi-heads-attend-one-digit", "no T_nanda run of notebook 11 here "
                           "(its variants)")
        return
    miiii = {seed: head_shares(r.result.model, p) for seed, r in trained.items()}
    nandas = [head_shares(r.result.model, p) for r in nanda]
    least = [min(v) for v in miiii.values()]

    def listed(rows: list[list[float]]) -> str:
        return "; ".join("[" + ", ".join(f"{v:.2f}" for v in heads) + "]" for heads in rows)

    own = every_run(["ok" if v >= EXCLUSIVE else "contrary" for v in least],
                    [f"seed {seed}" for seed in miiii], f"every T_miiii head >= {EXCLUSIVE:g}")
    claims.check("mi-heads-attend-one-digit", "share of each head's attention on the digits that "
                 f"goes to its digit: T_miiii {listed(list(miiii.values()))} (seeds "
                 f"{', '.join(map(str, miiii))}); T_nanda {listed(nandas)}",
                 every([own, larger(least, [min(v) for v in nandas])]) if stalled is None else stalled,
                 scale="three seeds of T_miiii and T_nanda, generalised (the paper profile)")


def claim_basis_neurons(ours: dict[int, float], basis: list[MiiiiRun], p: int,
                        params: NeuronParams, claims: Claims, stalled: Verdict | None) -> None:
    """Fig. 15: T_basis's neurons are not periodic where T_miiii's are: :func:`model_share` of
    every trained T_miiii above every T_basis's, seed against seed."""
    if not basis:
        claims.not_checked("mi-basis-neurons-aperiodic", "no T_basis run of notebook 11 here "
                           "(its variants)")
        return
    shares = [model_share(r.result.model.eval(), p, params) for r in basis]
    claims.check("mi-basis-neurons-aperiodic", f"median power share of the top {params.n_top} "
                 f"frequency pairs over each model's {params.n_neurons} strongest neurons: "
                 f"T_miiii {', '.join(f'{s:.2f}' for s in ours.values())}; T_basis "
                 f"{', '.join(f'{s:.2f}' for s in shares)}",
                 larger(list(ours.values()), shares) if stalled is None else stalled,
                 scale="three seeds of T_miiii and T_basis, generalised (the paper profile)")


#: ``mlp-combines-the-digits``: the interaction share below the first, then above the second
COMBINED = (0.1, 0.3)


def interaction_share(model: nn.Module, p: int) -> float:
    """The share of the MLP's 2-D spectral power (summed over neurons) that combines both digits,
    as :func:`active_frequency_table` reads it from a snapshot."""
    return fourier.interaction_share(fourier.spectrum_2d(fourier.neuron_grid(model, p)))
