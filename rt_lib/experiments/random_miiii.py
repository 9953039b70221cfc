"""Experiment 15 (beyond both papers): the random transformer of Zhong & Andreas on miiii's tasks.

The miiii model with its attention and MLP frozen at their (He) initialisation and only W_E, W_pos
and W_U trained (``trainable="embeddings"``), on T_nanda and T_miiii: which prime remainders can a
random transformer compute?  The fully trained baseline is notebook 11's run with the same settings
(loaded, or trained if notebook 11 has not run).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pandas as pd

from rt_lib.claims.ledger import Claims
from rt_lib.claims.verdicts import bool_verdict, larger
from rt_lib.experiment import Experiment
from rt_lib.experiments import miiii_common
from rt_lib.experiments.miiii_common import MiiiiParams, MiiiiRun, smoke_train_params, training_params
from rt_lib.runtime.params import Params, check_positive_ints

NAME = "15_random_miiii"


@dataclass(frozen=True)
class RandomMiiiiParams(Params):
    """Notebook 15's parameters."""

    # T_miiii alone in the CPU profile (T_nanda, 2.5 minutes of one core, left out to fit the
    # profile's 45 minutes: notebook 01 shows a random transformer adding); the paper's: both
    variants: tuple[str, ...] = ("miiii",)  # tasks; also "nanda"
    train_params: dict[str, Any] = field(default_factory=dict)  # notebook 11's parameters (defaults: its CPU profile)
    # notebook 11's settings changed for the random models only (none: they train as long as
    # the trained ones, so that the heads compare at equal epochs)
    random_overrides: dict = field(default_factory=dict)  # settings changed for the random transformers only
    widths: tuple[int, ...] = (128,)  # d_model of the random transformers

    @classmethod
    def smoke_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The smoke test reads notebook 11's smoke runs (:func:`smoke_train_params`)."""
        out = smoke_train_params(super().smoke_config(config))
        random = out.get("random_overrides", {})
        cut = {k: min(v, MiiiiParams.SMOKE[k]) for k, v in random.items() if k in MiiiiParams.SMOKE}
        return out | {"random_overrides": random | cut}

    def check(self) -> None:
        check_positive_ints("widths", self.widths)
        self.trained()
        for w in self.widths:
            self.random(w)

    def smaller_than_paper(self) -> str | None:
        return self.trained().smaller_than_paper()  # notebook 11's runs, read here

    def trained(self) -> MiiiiParams:
        return training_params(self.train_params, self.variants)

    def random(self, width: int) -> MiiiiParams:
        # random_overrides on top of the trained runs' settings (those of the exploration run of
        # notebook 11 handed over, if any), not taken for train_params contradicting them
        return training_params(self.train_params, self.variants, **(
            self.random_overrides | {"d_model": width, "trainable": "embeddings"}))


def step_shapes(params: RandomMiiiiParams) -> list:
    """The widest random transformer on T_miiii (the trained runs are notebook 11's)."""
    shapes = [s for w in params.widths for s in miiii_common.step_shapes(params.random(w))]
    widest = max(params.widths)
    runs = (sum((w / widest) ** 2 for w in params.widths) * len(params.variants)
            * (1 + len(params.trained().extra_seeds)))
    return [replace(shapes[-1], label=f"random {shapes[-1].label}", runs=runs)]


EXPERIMENT = Experiment(
    NAME, RandomMiiiiParams, reads=(miiii_common.TRAINING,), step_shapes=step_shapes,
    title="the random transformer on miiii's tasks (beyond both papers)",
    not_shown_on_cpu={
        "random-solves-fewer-heads-d128": (
            "at equal epochs on seeds 0-2 (benchmarks/miiii_budgets.py) the random transformer "
            "generalises q = 2 and 3 and the trained one 2-3 heads up to epoch 6,000, 3-4 at "
            "8,000: the CPU profile's 4,000 epochs tie, 8,000 separate them")})


def run(params: RandomMiiiiParams, seed: int | None = None) -> dict[str, MiiiiRun]:
    """{label: run}: "trained transformer (d=..)" and "random transformer (d=..)" per variant,
    labelled ``<model> · T_<variant>``.  ``seed``: the runs on one of notebook 11's
    ``extra_seeds`` instead (:func:`seed_runs`)."""
    out: dict[str, MiiiiRun] = {}
    trained = params.trained()
    for r in miiii_common.run(trained, seed=seed).values():  # notebook 11's: reused when finished
        out[f"trained (d={trained.d_model}) · T_{r.variant}"] = r
    for width in params.widths:
        for r in miiii_common.run(params.random(width), name=NAME, seed=seed).values():
            out[f"random (d={width}) · T_{r.variant}"] = r
    return out


def seed_runs(params: RandomMiiiiParams) -> dict[int, dict[str, MiiiiRun]]:
    """{seed: {label: run}}: :func:`run` on each of notebook 11's ``extra_seeds`` (none in the
    CPU profile: {}), for the claims that compare runs, three seeds a side."""
    return {seed: run(params, seed=seed) for seed in params.trained().extra_seeds}


def per_head_table(runs: dict[str, MiiiiRun], variant: str) -> pd.DataFrame:
    """Rows = heads q of one variant; one column of final validation accuracy per model."""
    table: pd.DataFrame | None = None
    for label, r in runs.items():
        if r.variant != variant:
            continue
        last = r.result.history.iloc[-1]
        col = pd.DataFrame({"q": list(r.task.qs),
                            label.split(" · ")[0]: [float(last[f"valid_acc_q{q}"]) for q in r.task.qs]})
        table = col if table is None else table.merge(col, on="q")
    if table is None:
        raise ValueError(f"no run of T_{variant} among {list(runs)}")
    return table


def solved(table: pd.DataFrame, column: str, threshold: float = 0.95) -> list[int]:
    """The heads q whose validation accuracy in ``column`` reaches ``threshold``."""
    return [int(q) for q, acc in zip(table["q"], table[column]) if acc >= threshold]


def heads_at(r: MiiiiRun, epoch: int, threshold: float = 0.95) -> list[int]:
    """The heads q of ``r`` at validation accuracy ``threshold`` or more after exactly ``epoch``
    epochs (:func:`rt_lib.experiments.miiii_common.row_at`): a run compared with a shorter
    one is read at the shorter one's end."""
    row = miiii_common.row_at(r, epoch)
    return [int(q) for q in r.task.qs if row[f"valid_acc_q{q}"] >= threshold]


def check_claims(runs: dict[str, MiiiiRun], params: RandomMiiiiParams, claims: Claims,
                 seeds: dict[int, dict[str, MiiiiRun]] | None = None) -> None:
    """Record notebook 15's claims, all beyond both papers (ours, counted apart).  ``seeds``: the
    same runs on further seeds (:func:`seed_runs`); a claim of one run holds when it holds on
    every seed, a comparison of head counts needs three seeds a side (fewer is not shown,
    whatever the difference).  The trained and the random runs are compared at the same epoch
    (the shorter run's last)."""
    every_seed = [runs, *(seeds or {}).values()]

    def listed(values: list) -> str:
        return "; ".join(str(v) for v in values) if len(values) > 1 else str(values[0])

    def of(these: dict[str, MiiiiRun], width: int) -> dict[str, MiiiiRun]:
        return {r.variant: r for label, r in these.items()
                if label.startswith(f"random (d={width})")}

    def trained_of(these: dict[str, MiiiiRun]) -> MiiiiRun:
        return next(r for label, r in these.items()
                    if label.startswith("trained") and r.variant == "miiii")

    n = f" on {len(every_seed)} seeds" if len(every_seed) > 1 else ""
    for width in params.widths:
        if "nanda" in of(runs, width):
            accs = [float(of(these, width)["nanda"].result.history["valid_acc"].iloc[-1])
                    for these in every_seed]
            claims.ours(f"random-learns-modular-addition-d{width}", "a random transformer learns "
                        "T_nanda, modular addition in the miiii model (Zhong & Andreas §4 there)",
                        f"T_nanda validation accuracy {listed([f'{a:.3f}' for a in accs])} at "
                        f"width {width}{n}",
                        # all(), not min(): a NaN seed (a diverged run) never lets it hold
                        bool_verdict(all(a >= 0.9 for a in accs),
                                     "needs >= 0.9" + (" on every seed" if n else "")))
        if "miiii" not in of(runs, width):
            continue
        epoch = int(of(runs, width)["miiii"].result.history["step"].iloc[-1])
        reached = [heads_at(of(these, width)["miiii"], epoch) for these in every_seed]
        claims.ours(f"random-reaches-smallest-primes-d{width}", "the random transformer solves "
                    "the smallest primes' heads (2 and 3) of T_miiii",
                    f"heads at 0.95 at epoch {epoch}{n}: {listed(reached)}",
                    bool_verdict(all({2, 3} <= set(got) for got in reached),
                                 "needs 2 and 3" + (" on every seed" if n else "")))
        at = min(epoch, int(trained_of(runs).result.history["step"].iloc[-1]))
        got_trained = [heads_at(trained_of(these), at) for these in every_seed]
        got_random = [heads_at(of(these, width)["miiii"], at) for these in every_seed]
        claims.ours(f"random-solves-fewer-heads-d{width}", "the random transformer solves fewer "
                    "prime heads of T_miiii than the fully trained one in the same epochs",
                    f"epoch {at}{n}: random {listed(got_random)}, trained {listed(got_trained)}",
                    larger([len(h) for h in got_trained], [len(h) for h in got_random]),
                    scale="both for T_miiii's epochs on three seeds (the paper profile)")
    claims.done()

__all__ = ["NAME", "RandomMiiiiParams", "run", "seed_runs", "per_head_table", "solved", "heads_at", "check_claims"]
