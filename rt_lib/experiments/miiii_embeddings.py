"""Experiment 12: what miiii's embeddings learned (Syrkis & Søgaard 2024, §4.1, Figs. 7-13).

Analyses notebook 11's runs: it asks :func:`rt_lib.experiments.miiii_common.run` for the same
training settings (``train_params``: the values notebook 11 was given), which loads the finished
runs, or trains them if notebook 11 has not run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from rt_lib.analysis import fourier
from rt_lib.claims.ledger import Claims
from rt_lib.claims.verdicts import BUDGET, HOLDS, NOT_SHOWN, RUNS, Verdict, beyond_noise, every, larger
from rt_lib.experiment import Experiment
from rt_lib.experiments.miiii_common import (
    TRAINING,
    MiiiiParams,
    MiiiiRun,
    epochs_trained,
    model_at,
    not_generalised,
    run,
    runs_folder,
    smoke_train_params,
    training_params,
    valid_at,
)
from rt_lib.runtime.params import Params

NAME = "12_miiii_embeddings"


@dataclass(frozen=True)
class EmbeddingParams(Params):
    """Notebook 12's parameters."""

    variants: tuple[str, ...] = ("nanda", "miiii", "basis")  # the tasks compared
    train_params: dict[str, Any] = field(default_factory=dict)  # notebook 11's parameters (defaults: its CPU profile)
    fractions: tuple[float, ...] = (0.5, 0.9)  # marks on the singular-value curves
    n_vectors: int = 4  # top singular vectors shown
    pos_dims: int = 37  # r also over the first pos_dims dims, as the authors figure shows
    # Every claim here compares runs, so each needs three seeds a side (DEVELOPERS.md, "Margins,
    # not ties"): the seed of notebook 11's runs is read; each other is read where notebook 11
    # trained it (its extra_seeds: the paper profile), else trained here with the same recipe.
    # The CPU profile keeps one: its T_miiii has not generalised by 4,000 epochs, so the paper's
    # claims here are not shown whatever the seeds (three seeds a side, measured on two kernel
    # paths: docs/scale.md)
    seeds: tuple[int, ...] = (0,)  # seeds of every variant compared, for the claims (paper: 0, 1, 2)

    @classmethod
    def smoke_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The smoke test reads notebook 11's smoke runs (:func:`smoke_train_params`)."""
        return smoke_train_params(super().smoke_config(config))

    def check(self) -> None:
        if not all(0 < f <= 1 for f in self.fractions):
            raise ValueError(f"fractions must lie in (0, 1], got {self.fractions}")
        if self.n_vectors < 1:
            raise ValueError(f"n_vectors must be a positive integer, got {self.n_vectors!r}")
        training = self.training()  # also checks variants and train_params
        d_model, seed = training.d_model, training.seed
        if not isinstance(self.pos_dims, int) or not 3 <= self.pos_dims <= d_model:
            raise ValueError(f"pos_dims must be an integer in 3..d_model={d_model}, got {self.pos_dims!r}")
        if len(set(self.seeds)) != len(self.seeds) or seed not in self.seeds:
            raise ValueError(f"seeds must be distinct and hold the seed of notebook 11's runs "
                             f"({seed}), got {list(self.seeds)!r}")

    def smaller_than_paper(self) -> str | None:
        return self.training().smaller_than_paper()  # notebook 11's runs, read here

    def training(self) -> MiiiiParams:
        return training_params(self.train_params, self.variants)


#: Why 12's paper claims are not shown on the CPU: what was measured (docs/scale.md).
MID_TRANSITION = (
    "T_miiii has not generalised by the CPU profile's 4,000 epochs (validation 0.40 on seed 0, "
    "0.56 under other rounding), and its embeddings move with the rounding: on three seeds a "
    "side (docs/scale.md, benchmarks/platform_claims.py --path avx512 --only 11,12,13) ")


EXPERIMENT = Experiment(
    NAME, EmbeddingParams, reads=(TRAINING,),
    title="miiii's embeddings: positions, SVD, Fourier (Figs. 7-13)",
    not_shown_on_cpu={
        "nanda-positions-more-alike-all-dims": (
            "one seed a side in the CPU profile: random vectors' spread of r is no stand-in for the "
            "seeds' (T_nanda's r moved to -0.17 on an Intel Xeon's kernels); the long profile's "
            "three seeds a side (configs/long/12_miiii_embeddings.yaml) decide it"),
        "mi-pos-correlation": (
            MID_TRANSITION + "r over the first 37 dimensions puts T_miiii below T_basis by 0.03 "
            "on this machine's kernels and inside T_basis's range under ATen's AVX-512 ones"),
        "mi-we-spectrum": (
            MID_TRANSITION + "the top-3 frequency share puts T_nanda above T_miiii above "
            "T_basis on both kernel paths, T_miiii's range 0.21-0.27 on one and 0.33-0.39 on "
            "the other"),
        "mi-we-svd-diffuse": (
            MID_TRANSITION + "T_miiii needs 31-32 singular values against T_nanda's 25-27 on "
            "this machine's kernels, 27-29 against 26-28 under ATen's AVX-512 ones"),
        "mi-svd-vectors-periodic": (
            MID_TRANSITION + "the median top vector's power share at one frequency is 0.55-0.98 "
            "for T_nanda, 0.26-0.29 for T_miiii and 0.17-0.18 for T_basis on this machine's "
            "kernels (--set 'seeds=[0, 1, 2]'), each above T_basis; 0.57, 0.42, 0.18 on seed 0 "
            "under ATen's AVX-512 ones")})


#: The top singular vectors whose periodicity is read: those within half the sum of the singular
#: values ("most significant (cutoff at 0.5 as per Figure 8) singular vectors", Figure 9)
VECTOR_CUTOFF = 0.5
PERIODICITY = "top vectors' periodicity"  # the summary's column of it


def pos_columns(pos_dims: int) -> tuple[str, str]:
    """The summary's two columns of Pearson r: over the first ``pos_dims`` dimensions, over all."""
    return f"r(W_pos), first {pos_dims} dims", "r(W_pos), all dims"


def embedding_table(runs: dict[str, MiiiiRun], p: int,
                    fractions: tuple[float, ...] = (0.5, 0.9), pos_dims: int = 37) -> pd.DataFrame:
    """Per variant: positional correlation (over the first ``pos_dims`` dimensions, as the
    authors' figure shows them, and over all), how many singular values of W_E reach each fraction
    (of their sum and of their squares), and the share of the strongest few frequencies.  Every
    run is read at the shortest run's last epoch (a longer one at its weights there), so that
    the rows compare equal budgets."""
    rows = []
    first, every = pos_columns(pos_dims)
    at = min(epochs_trained(r) for r in runs.values())
    for variant, r in runs.items():
        model = model_at(r, at).cpu().eval()
        emb = fourier.token_embedding(model, p)
        s = fourier.singular_values(emb)
        row: dict[str, Any] = {"task": f"T_{variant}",
                               first: fourier.positional_correlation(model, pos_dims),
                               every: fourier.positional_correlation(model)}
        for squared, kind in ((False, "sum of s"), (True, "sum of s²")):
            for f, count in zip(fractions, fourier.cumulative_marks(s, fractions, squared)):
                row[f"{f:.0%} of {kind}"] = count
        row["top-3 frequencies' power share"] = fourier.top_frequency_share(emb)
        # the median top vector's power share at its strongest frequency (1: one sinusoid)
        row[PERIODICITY] = float(np.median(fourier.vector_periodicity(emb, VECTOR_CUTOFF)))
        row["final valid acc"] = valid_at(r, at)
        row["epochs"] = at
        rows.append(row)
    return pd.DataFrame(rows)


def seed_tables(params: EmbeddingParams) -> list[pd.DataFrame]:
    """:func:`embedding_table` of every variant on each of ``params.seeds`` but notebook 11's
    own (none: []), for the claims that compare runs on three seeds a side: each run read from
    notebook 11's folder when it holds it (its ``extra_seeds``), else trained in this one."""
    training = params.training()
    return [embedding_table({r.variant: r for r in run(training, name=NAME, seed=seed,
                                                       reuse=(runs_folder(training),)).values()},
                            training.p, params.fractions, params.pos_dims)
            for seed in params.seeds if seed != training.seed]


def check_claims(table: pd.DataFrame, params: EmbeddingParams, claims: Claims,
                 seeds: list[pd.DataFrame] | None = None) -> None:
    """Record notebook 12's claims from :func:`embedding_table`'s ``table``.  Every one compares
    runs, so every one needs them trained for the same epochs (an unequal budget is not shown)
    and a margin: with one seed, the positional correlations against the spread of r between
    random vectors (an independent noise model), the singular values and spectra not shown
    whatever the difference; with ``seeds`` (the same table on further seeds:
    :func:`seed_tables`), every comparison run against run, three seeds a side."""
    row = table.set_index("task")
    rows = [row] + [t.set_index("task") for t in seeds or []]
    first, every_dim = pos_columns(params.pos_dims)
    d_model = params.training().d_model

    def values(task: str, column: str) -> list[float]:
        """``task``'s ``column`` on every seed."""
        return [float(r.loc[task, column]) for r in rows]

    def shown(task: str, column: str, digits: str) -> str:
        got = [format(v, digits) for v in values(task, column)]
        return got[0] if len(got) == 1 else "[" + ", ".join(got) + "]"

    def same_budget(*tasks: str) -> Verdict:
        got = {t: sorted({int(e) for e in values(t, "epochs")}) for t in tasks}
        if len({e for es in got.values() for e in es}) == 1:
            return Verdict(HOLDS, f"all at {next(iter(got.values()))[0]:,} epochs")
        return Verdict(NOT_SHOWN, "unequal epochs: " + ", ".join(
            f"{t} {', '.join(f'{e:,}' for e in es)}" for t, es in got.items()), BUDGET)

    # The paper's claims here are about the trained T_miiii, which generalised: one caught
    # mid-transition is not yet that model, and its embeddings move with the seed and the
    # rounding (three seeds a side separate the variants on one kernel path and not on another:
    # docs/scale.md), so each is not shown (budget) until every T_miiii run generalised.
    epochs = int(max(values("T_miiii", "epochs")))
    trained = not_generalised("T_miiii", values("T_miiii", "final valid acc"), epochs,
                              params.training().generalised_at)

    def paper(verdict: Verdict) -> Verdict:
        return verdict if trained is None else trained

    # Two independent r's differ by more than 2 sigma of their difference (sqrt 2 x the noise of
    # one) with probability ~5 %: below that, the ordering could be the initialisation's.  With
    # three seeds a side the seeds' own spread decides (run against run).
    several = len(rows) > 1
    for id, dims, column, own in (("mi-pos-correlation", params.pos_dims, first, False),
                                  ("nanda-positions-more-alike-all-dims", d_model, every_dim, True)):
        gap = float(row.loc["T_nanda", column] - row.loc["T_miiii", column])
        noise = np.sqrt(2) * fourier.correlation_noise(dims)
        source = f"r of random vectors in {dims} dims"
        apart = (larger(values("T_nanda", column), values("T_miiii", column)) if several
                 else beyond_noise(gap, noise, source))
        parts = [same_budget("T_nanda", "T_miiii"), apart]
        measured = (f"Pearson r of the two positional embeddings over {dims} dims: T_nanda "
                    f"{shown('T_nanda', column, '+.2f')}, T_miiii {shown('T_miiii', column, '+.2f')}")
        if not own:
            # The paper ties the anti-correlation to the modulo: T_basis (the same digits, labels
            # shuffled) is the control, and T_miiii's r must lie below it too.
            if "T_basis" in row.index:
                measured += f", T_basis {shown('T_basis', column, '+.2f')}"
                parts += [same_budget("T_miiii", "T_basis"),
                          larger(values("T_basis", column), values("T_miiii", column)) if several
                          else beyond_noise(float(row.loc["T_basis", column] - row.loc["T_miiii", column]),
                                            noise, source + ", T_basis against T_miiii")]
            else:
                parts.append(Verdict(NOT_SHOWN, "no T_basis run: nothing to control for", RUNS))
        if not several:
            # the margin is the seeds' spread, which one seed a side does not measure (random
            # vectors' spread is not it: T_nanda's r moved to -0.17 on an Intel Xeon's kernels)
            parts.append(Verdict(NOT_SHOWN, "one seed a side: the spread of r over seeds is "
                                            "not measured", RUNS))
        verdict = every(parts)
        if own:
            claims.ours(id, "over all of the model's dimensions, T_nanda's positional embeddings "
                        "are more alike than T_miiii's (a stand-in for the authors' 37)",
                        measured, verdict, scale="p = 113, d 256 (the paper profile)")
        else:
            claims.check(id, measured + " (the authors' figure shows the first 37)",
                         paper(verdict), scale="p = 113, d 256 (the paper profile)")
    top3 = "top-3 frequencies' power share"
    claims.check("mi-we-spectrum", "top-3 frequency share of W_E: " + ", ".join(
        f"{k} {shown(k, top3, '.2f')}" for k in row.index),
        paper(every([same_budget("T_nanda", "T_miiii", "T_basis"),
                     larger(values("T_nanda", top3), values("T_miiii", top3)),
                     larger(values("T_miiii", top3), values("T_basis", top3))])),
        scale="p = 113, every variant at 65,536 epochs (the paper profile)")
    # Figures 9-10: T_nanda's top singular vectors "look periodic", T_miiii's too "with more
    # frequencies in play" (visual inspection in the paper).  Periodic against T_basis, the
    # control trained on the same digits with shuffled labels: each above it.
    claims.check("mi-svd-vectors-periodic", "median over the top singular vectors of W_E (to "
                 f"{VECTOR_CUTOFF:.0%} of the sum of s) of each one's power share at its strongest "
                 "frequency: " + ", ".join(f"{k} {shown(k, PERIODICITY, '.2f')}" for k in row.index),
                 paper(every([same_budget("T_nanda", "T_miiii", "T_basis"),
                              larger(values("T_nanda", PERIODICITY), values("T_basis", PERIODICITY)),
                              larger(values("T_miiii", PERIODICITY), values("T_basis", PERIODICITY))])),
                 scale="p = 113, every variant at 65,536 epochs (the paper profile)")
    n90 = f"{params.fractions[-1]:.0%} of sum of s"
    claims.check("mi-we-svd-diffuse", f"singular values of W_E to {n90}: T_miiii "
                 f"{shown('T_miiii', n90, 'g')}, T_nanda {shown('T_nanda', n90, 'g')}",
                 paper(every([same_budget("T_nanda", "T_miiii"),
                              larger(values("T_miiii", n90), values("T_nanda", n90))])),
                 scale="p = 113, every variant at 65,536 epochs (the paper profile)")
    claims.done()
