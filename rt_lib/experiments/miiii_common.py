"""What notebooks 11-15 share about miiii's runs (Syrkis & Søgaard 2024;
docs/papers.md, miiii: training): the parameters of a run, how it is trained, kept and found
again, and how a reader loads its model or its evaluation at any epoch.

Notebook 11 (:mod:`rt_lib.experiments.miiii_training`) trains the runs; 12 and 13 read them, 14
searches for a recipe with the same parameters, 15 trains random-transformer runs beside them.
Each asks :func:`run` for the runs of its settings: one 1-layer transformer (the miiii
configuration) per task variant, full batch, AdamW with betas (0.9, 0.98), the ln(q)-weighted
loss and grokfast, weight snapshots at log-spaced epochs and a resumable checkpoint, in a folder
named by a hash of its settings, so that a rerun with the same settings resumes or reuses it.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd
from torch import nn

from rt_lib.claims.verdicts import BUDGET, NOT_SHOWN, RUNS, Verdict, beyond_noise
from rt_lib.experiment import PARAMETERS_FILE, Experiment, current_profile, folder_name
from rt_lib.jobs.executor import Job, run_jobs
from rt_lib.jobs.executor import current as current_executor
from rt_lib.jobs.resume import resume_dir
from rt_lib.model import TransformerConfig, build_model, miiii_config
from rt_lib.primes import is_prime
from rt_lib.runtime.io import (
    PROJECT_ROOT,
    CorruptFileError,
    atomic_save_torch,
    damaged,
    folder_of,
    load_torch,
    read_result,
    read_yaml_result,
    results_dir,
    results_root,
)
from rt_lib.runtime.params import Params, check_fits_in_memory, plain
from rt_lib.runtime.seeding import derive
from rt_lib.tasks.miiii import VARIANTS, MultiPrimeTask, miiii_task
from rt_lib.training.grokfast import Grokfast
from rt_lib.training.stored import code_digest, train_stored
from rt_lib.training.train import TrainConfig, TrainResult, evaluate, log_spaced_steps

#: notebook 11, which trains the runs: its results folder holds them, its profiles' configs
#: (configs/<profile>/11_miiii_training.yaml) set their parameters
TRAINING = "11_miiii_training"
#: Where the code that decides what a run computes starts (model, task, loop, filter, seeds):
#: the sources these import (rt_lib.training.stored.training_sources, derived from the code) are
#: hashed into every run's key, so a stored run made by other code is retrained, never reused.
TRAINING_ENTRIES = ("rt_lib.model.transformer", "rt_lib.training.train",
                    "rt_lib.training.grokfast", "rt_lib.tasks.miiii")


def training_code_digest() -> str:
    return code_digest(TRAINING_ENTRIES)[:16]


PAPER_P = 113  # the paper's modulus (Syrkis & Søgaard §2): 29 heads, one per prime below it


@dataclass(frozen=True)
class MiiiiParams(Params):
    """Notebook 11's parameters; defaults = CPU profile (configs/paper/ has the paper's)."""

    # Left out of the notebook's parameters cell: set by the code that builds runs (notebook 15,
    # the executor), not a notebook.
    CELL_OMITS: ClassVar[frozenset[str]] = frozenset({"trainable", "device"})
    DISTINCT: ClassVar[tuple[str, ...]] = ("variants", "extra_seeds", "full_epoch_variants")

    p: int = 37  # prime; one head per prime below it: 2, 3, ..., 31 (11 heads); the paper: 113
    variants: tuple[str, ...] = ("miiii", "nanda", "masked", "basis")  # tasks trained (T_<name>)
    lambda_zero: bool = True  # also T_miiii without grokfast
    # also T_miiii without dropout ("all but q = 2, 3 overfit"; docs/papers.md, miiii: training)
    dropout_zero: bool = True  # also T_miiii without dropout
    split: str = "code"  # code: train_fraction / rest validation; paper: 30 % / n_valid / test
    train_fraction: float | None = 0.8  # share of the p^2 numbers trained on
    n_valid: int = 1000  # validation size of the paper split
    combine: str = "sum"  # heads' losses summed (paper) or averaged (code: mean)
    d_model: int = 128
    n_heads: int = 4
    dropout: float = 0.2  # without dropout only q in {2, 3} generalise (docs/papers.md, miiii: training)
    # "residual" is the miiii code's placement (the paper profile; faster: embeddings undropped,
    # so keys/values come from per-token tables); "gpt2" is where the CPU recipe was found (with
    # "residual" at p = 37 only q = 2, 3 generalised in 10,000 epochs and T_nanda not in 1,500)
    dropout_at: str = "gpt2"  # gpt2: embeddings, attention, sublayer outputs; residual: the miiii code
    # The miiii code's init and dropout draw (docs/papers.md, miiii: the authors' code beyond the text):
    # "he_jax" (jax's he_normal: truncated, fan-in over all axes but the last) and one dropout
    # mask per step for the whole batch
    init: str = "he"  # He normal over the input axis; he_jax: jax he_normal as in the miiii code
    dropout_mask: str = "sample"  # a mask per example; batch: one mask per step, as in the miiii code
    lr: float = 0.003  # AdamW, constant
    weight_decay: float = 1.0
    beta2: float = 0.98  # AdamW betas (0.9, 0.98)
    grokfast_lambda: float = 2.0  # grokfast amplification
    # The λ = 0 run's own recipe: lr and weight decay were tuned with grokfast, whose amplified
    # slow gradient fits the training set against weight decay 1.0; without it that recipe fits
    # 0.66 of the training set.  The grid point with the lowest final training loss (lr 3e-3,
    # 1e-2, 3e-2 at weight decay 1.0; weight decay 1.0, 0.3, 0.1 at lr 3e-3; seed 0, never
    # judged on validation: benchmarks/miiii_recipe.py, docs/scale.md) is weight decay 0.1.
    lambda_zero_lr: float | None = None  # lr of the run without grokfast (None: lr)
    lambda_zero_weight_decay: float | None = 0.1  # its weight decay (None: weight_decay)
    grokfast_alpha: float = 0.98  # grokfast EMA decay
    grokfast_init: str = "grad"  # EMA starts at the first gradient (Lee et al.); zero: the miiii code
    # full-batch epochs of every run: the comparisons (λ = 0, dropout 0, T_nanda, T_basis, the
    # random model of notebook 15) need T_miiii's own budget; what the CPU profile affords for six
    # runs (notebook 11's last cell: which claims need more, measured by benchmarks/miiii_budgets.py)
    epochs: int = 4000  # full-batch epochs of every run (equal budgets for every comparison)
    baseline_epochs: int | None = None  # epochs of the runs other than T_miiii (None: epochs)
    # variants trained for `epochs` like T_miiii whatever baseline_epochs says: in T_masked the
    # first heads generalise after a 1,500-epoch budget would end (p = 37, three seeds: docs/scale.md)
    full_epoch_variants: tuple[str, ...] = ("masked",)  # variants trained for `epochs` whatever baseline_epochs says
    eval_points: int = 60  # log-spaced evaluations
    n_snapshots: int = 12  # log-spaced weight snapshots for notebooks 12-13
    generalised_at: float = 0.95  # validation accuracy counted as generalised
    # The smoke test: two full-batch epochs of every run, two evaluations, two snapshots
    # (what notebooks 12 and 13 read); notebooks 12, 13 and 15 cut their train_params alike
    SMOKE: ClassVar[dict[str, Any]] = {"epochs": 2, "baseline_epochs": 2, "eval_points": 2,
                                       "n_snapshots": 2}
    trainable: str = "all"  # "embeddings": the random transformer of Zhong & Andreas (notebook 15)
    seed: int = 0
    # The claims that compare runs need three seeds a side (DEVELOPERS.md, "Margins, not ties"):
    # every run is trained again on each of these seeds for the claims alone; the tables, the
    # figures and notebooks 12, 13 and 15 read `seed`'s runs.  The CPU profile affords one seed
    # (its claims say which need three); the paper profile trains seeds 1 and 2 as well.
    extra_seeds: tuple[int, ...] = ()  # further seeds of every run, for the claims
    threads: int | None = None  # torch threads (None: $RT_THREADS or 1)
    device: str = "auto"

    #: fields that do not change what a run computes: not part of a run's key or folder
    NOT_IN_RUN: ClassVar[tuple[str, ...]] = ("variants", "lambda_zero", "dropout_zero", "threads",
                                              "generalised_at", "full_epoch_variants",
                                              "extra_seeds",
                                              # in the λ = 0 run's key as its lr and weight decay
                                              "lambda_zero_lr", "lambda_zero_weight_decay")

    @classmethod
    def smoke_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """:attr:`SMOKE`'s cuts, and one extra seed at most: the runs on further seeds go the
        same way (their claims then say too few seeds)."""
        out = super().smoke_config(config)
        if out.get("extra_seeds"):
            out["extra_seeds"] = list(out["extra_seeds"])[:1]
        return out

    def check(self) -> None:
        # the p^2 numbers, their two digits and one label per prime below p (int64), before
        # anything allocates them
        check_fits_in_memory("p", self.p, self.p ** 2 * (2 + self.p / max(math.log(self.p), 1)) * 8,
                             "its p^2 numbers and their labels")
        if self.seed in self.extra_seeds:
            raise ValueError(f"extra_seeds={list(self.extra_seeds)!r} holds seed={self.seed}: its "
                             "runs would count twice; list only further seeds")
        if not is_prime(self.p):
            raise ValueError(f"p must be a prime, got {self.p!r}")
        unknown = [v for v in self.variants if v not in VARIANTS]
        if unknown or not self.variants:
            raise ValueError(f"variants={list(self.variants)!r}: each must be one of {list(VARIANTS)}")
        unknown = [v for v in self.full_epoch_variants if v not in VARIANTS]
        if unknown:
            raise ValueError(f"full_epoch_variants={list(self.full_epoch_variants)!r}: each must be "
                             f"one of {list(VARIANTS)}")
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        miiii_config(self.p, d_model=self.d_model, n_heads=self.n_heads, dropout=self.dropout,
                     trainable=self.trainable, dropout_at=self.dropout_at, init=self.init,
                     dropout_mask=self.dropout_mask)  # checks the model's settings
        if not isinstance(self.epochs, int) or self.epochs < 1:
            raise ValueError(f"epochs must be a positive integer, got {self.epochs!r}")
        if self.baseline_epochs is not None and (
                not isinstance(self.baseline_epochs, int) or self.baseline_epochs < 1):
            raise ValueError(f"baseline_epochs must be a positive integer or None, got {self.baseline_epochs!r}")
        if self.baseline_epochs is not None and self.baseline_epochs > self.epochs:
            # the comparisons read T_miiii at the baselines' end, which a shorter T_miiii lacks
            raise ValueError(f"baseline_epochs={self.baseline_epochs} must not exceed "
                             f"epochs={self.epochs}: the baselines are compared with T_miiii at "
                             f"their last epoch")
        if self.n_snapshots < 1 or self.eval_points < 2:
            raise ValueError("n_snapshots must be >= 1 and eval_points >= 2")
        for v in self.variants:  # builds each task once: checks split, fraction, combine
            self.task(v)
        self.train_config(self.grokfast_lambda, None)  # checks lr, epochs, ...
        seeds = self.extra_seeds
        if (not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)
                or len(set(seeds)) != len(seeds) or self.seed in seeds):
            raise ValueError(f"extra_seeds must be distinct non-negative integers other than seed "
                             f"({self.seed}), got {list(seeds)!r}")
        lr0, wd0 = self.lambda_zero_lr, self.lambda_zero_weight_decay
        if lr0 is not None and (not isinstance(lr0, (int, float)) or lr0 <= 0):
            raise ValueError(f"lambda_zero_lr must be a positive number or None, got {lr0!r}")
        if wd0 is not None and (not isinstance(wd0, (int, float)) or wd0 < 0):
            raise ValueError(f"lambda_zero_weight_decay must be a non-negative number or None, "
                             f"got {wd0!r}")
        Grokfast(self.grokfast_alpha, self.grokfast_lambda, self.grokfast_init)

    def smaller_than_paper(self) -> str | None:
        # the paper's p = 113: 29 heads, every prime below it (docs/papers.md, miiii: model and task)
        return None if self.p >= PAPER_P else f"p = {self.p} of {PAPER_P}"

    def task(self, variant: str) -> MultiPrimeTask:
        return miiii_task(self.p, variant, split=self.split, train_fraction=self.train_fraction,
                          n_valid=self.n_valid, combine=self.combine,
                          split_seed=self.seed, shuffle_seed=self.seed)

    def model_config(self, task: MultiPrimeTask) -> TransformerConfig:
        # vocabulary, context and heads from the task itself, so model and data cannot disagree
        return miiii_config(self.p, d_model=self.d_model, n_heads=self.n_heads,
                            dropout=self.dropout, out_sizes=task.qs, d_vocab=task.d_vocab,
                            n_ctx=task.n_ctx, trainable=self.trainable,
                            dropout_at=self.dropout_at, init=self.init,
                            dropout_mask=self.dropout_mask)

    def model(self, task: MultiPrimeTask) -> nn.Module:
        return build_model(self.model_config(task), derive(self.seed, "init") % 2**31)

    def epochs_for(self, variant: str, lamb: float) -> int:
        """T_miiii with grokfast (its dropout-0 run too: same variant and λ) and the
        ``full_epoch_variants`` get ``epochs``; the other runs (the baselines and λ = 0)
        ``baseline_epochs`` if set."""
        main = variant == "miiii" and lamb == self.grokfast_lambda
        full = main or variant in self.full_epoch_variants or self.baseline_epochs is None
        return self.epochs if full else self.baseline_epochs

    def train_config(self, lamb: float, folder: Path | None, epochs: int | None = None,
                     keep_at: tuple[int, ...] = ()) -> TrainConfig:
        """Full batch, constant lr, no clipping; with a ``folder``: log-spaced weight snapshots,
        and snapshots at ``keep_at`` (:meth:`compared_at`), and a resumable checkpoint there
        (``None``: nothing saved, as in a search trial)."""
        epochs = epochs if epochs is not None else self.epochs
        keep: dict[str, Any] = {}
        if folder is not None:
            snaps = log_spaced_steps(epochs, self.n_snapshots) if self.n_snapshots > 1 else [epochs]
            # a run longer than the baselines keeps its weights at their last epoch too, where
            # the comparisons read it (:func:`row_at`, :func:`model_at`)
            snaps = sorted(set(snaps) | set(keep_at))
            keep = dict(snapshot_steps=tuple(snaps), snapshot_dir=str(folder / "snapshots"),
                        checkpoint_path=str(folder / "last.pt"),
                        checkpoint_every=max(epochs // 10, 1), resume=True)
        return TrainConfig(
            steps=epochs, batch_size=None, lr=self.lr, weight_decay=self.weight_decay,
            betas=(0.9, self.beta2), warmup_steps=0, schedule="constant", grad_clip=None,
            eval_log_points=self.eval_points, seed=self.seed, threads=self.threads,
            device=self.device, **keep)

    def compared_at(self, variant: str, lamb: float) -> tuple[int, ...]:
        """The epochs before its end at which a run is compared with shorter runs: for T_miiii
        with grokfast (the run every baseline is compared with), ``baseline_epochs`` when the
        baselines stop before it; else none."""
        b, main = self.baseline_epochs, variant == "miiii" and lamb == self.grokfast_lambda
        return (b,) if main and b is not None and b < self.epochs_for(variant, lamb) else ()

    def lambda_zero_params(self) -> MiiiiParams:
        """The λ = 0 run's parameters: its own lr and weight decay where set."""
        own = {k: v for k, v in (("lr", self.lambda_zero_lr),
                                 ("weight_decay", self.lambda_zero_weight_decay)) if v is not None}
        return replace(self, **own) if own else self

    def grokfast(self, lamb: float) -> Grokfast | None:
        return Grokfast(self.grokfast_alpha, lamb, self.grokfast_init) if lamb > 0 else None

    def run_key(self, variant: str, lamb: float) -> str:
        """Folder name of one run: the variant, lambda and a hash of every setting and of the
        training code (:data:`TRAINING_SOURCES`)."""
        settings = asdict(self) | {name: None for name in self.NOT_IN_RUN} | {
                                   "code": training_code_digest(), "baseline_epochs": None,
                                   "variant": variant,
                                   "grokfast_lambda": lamb, "epochs": self.epochs_for(variant, lamb)}
        # the run's own epochs are in the key; the field that shares epochs out is left out
        # altogether (not set to None), so that runs stored before it existed keep their keys
        settings.pop("full_epoch_variants")
        # the snapshot kept at the baselines' end (train_config) makes another run; named only
        # where there is one, so that the keys of every other run stay as they were
        if at := self.compared_at(variant, lamb):
            settings["compared_at"] = list(at)
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
        return f"{variant}_lambda{lamb:g}_{digest}"


@dataclass
class MiiiiRun:
    variant: str
    lamb: float
    task: MultiPrimeTask
    result: TrainResult
    folder: Path
    dropout: float | None = None  # set when it differs from the notebook's (the dropout-0 run)

    @property
    def label(self) -> str:
        return (f"T_{self.variant}" + (" (λ = 0)" if self.lamb == 0 else "")
                + (f" (dropout {self.dropout:g})" if self.dropout is not None else ""))


def runs_to_do(params: MiiiiParams) -> list[tuple[str, float, MiiiiParams]]:
    """(variant, grokfast λ, the run's own parameters) of every run notebook 11 trains: each
    variant with grokfast, then T_miiii with λ = 0 and T_miiii with dropout 0 when asked for."""
    todo = [(v, params.grokfast_lambda, params) for v in params.variants]
    if params.lambda_zero and "miiii" in params.variants and params.grokfast_lambda != 0:
        todo.append(("miiii", 0.0, params.lambda_zero_params()))
    if params.dropout_zero and "miiii" in params.variants and params.dropout != 0:
        todo.append(("miiii", params.grokfast_lambda, replace(params, dropout=0.0)))
    return todo


def step_shapes(params: MiiiiParams) -> list:
    """T_miiii's full-batch step (rt_lib.training.footprint); every run of the notebook has its shape
    (the baselines' tasks have the same inputs and fewer or as many heads)."""
    from rt_lib.training.footprint import StepShape

    task = params.task("miiii")
    todo = runs_to_do(params)
    epochs = sum(own.epochs_for(v, lamb) for v, lamb, own in todo) / len(todo)
    return [StepShape(f"T_miiii d={params.d_model}", params.model_config(task), task, None,
                      params.train_config(params.grokfast_lambda, None), steps=round(epochs),
                      runs=len(todo) * (1 + len(params.extra_seeds)))]

#: Notebook 11's experiment as its readers look up its profiles (:meth:`Experiment.profile_params`,
#: the one door from a profile to its parameters); rt_lib.experiments.miiii_training.EXPERIMENT
#: is the same with the notebook's title and claims measured not to show.
TRAINING_EXPERIMENT = Experiment(TRAINING, MiiiiParams, step_shapes=step_shapes)


def runs_folder(params: MiiiiParams) -> Path:
    """Where notebook 11 keeps the runs of ``params``: its profile's folder when every setting
    that changes a run is the profile's (notebooks 12, 13 and 15 then find its runs), else the
    exploration folder those settings name (``11_miiii_training+p=41``)."""
    changes = {k: v for k, v in TRAINING_EXPERIMENT.changes(params, current_profile()).items()
               if k not in params.NOT_IN_RUN}
    return results_root() / folder_name(TRAINING, changes)


def run(params: MiiiiParams, name: str = TRAINING, seed: int | None = None,
        reuse: tuple[Path, ...] = ()) -> dict[str, MiiiiRun]:
    """{label: run}: train (or resume, or reuse) every run; weights and snapshots under
    ``<notebook 11's runs folder>/runs`` (:func:`runs_folder`), or ``results/<name>/runs`` for
    another notebook's own runs.  ``seed``: the runs on that seed instead (one of
    ``params.extra_seeds``: :func:`seed_runs`, or another notebook's further seeds), kept beside
    the others (the seed is in each run's key).

    A run whose folder holds a finished checkpoint is loaded, not retrained: notebooks 12, 13 and
    15 reuse notebook 11's runs by asking for the same settings.  ``reuse``: results folders of
    the notebooks read (their ``runs`` folders), searched first for a finished run of the same
    key, which is loaded from there and never written to; a run none holds is trained here."""
    out = {}
    store = runs_folder(params) if name == TRAINING else results_dir(name)
    these = params if seed is None else replace(params, seed=seed, extra_seeds=())

    def folder(own: MiiiiParams, variant: str, lamb: float) -> Path:
        key = own.run_key(variant, lamb)
        found = [f for f in (Path(r) / "runs" / key for r in reuse) if _finished(f)]
        return found[0] if found else store / "runs" / key

    todo = [(variant, lamb, own, folder(own, variant, lamb),
             f"T_{variant} λ={lamb:g}" + (f" dropout {own.dropout:g}"
                                           if own.dropout != params.dropout else "")
             + (f" seed {seed}" if seed is not None else ""))
            for variant, lamb, own in runs_to_do(these)]
    executor = current_executor()
    unfinished = [t for t in todo if not _finished(t[3])] if executor.kind != "inline" else []
    if unfinished:
        # Each unfinished run is a job that trains it into its folder (resuming a checkpoint a
        # killed job left); the loop below then loads the finished runs, as a rerun would.
        resume = resume_dir(name)
        jobs = [Job(folder.name, train_run, (own, variant, lamb, str(folder), desc))
                for variant, lamb, own, folder, desc in unfinished]
        run_jobs(jobs, f"{resume}/jobs" if resume else str(results_dir(name) / "jobs"),
                 executor, name=name)
    for variant, lamb, own, folder, desc in todo:
        task = own.task(variant)
        config = own.train_config(lamb, folder, own.epochs_for(variant, lamb),
                                  own.compared_at(variant, lamb))
        result = train_stored(own.model(task), task, config, grad_hook=own.grokfast(lamb),
                              desc=desc)
        result.model.cpu()  # the analyses run on CPU, also after a GPU paper run
        # reused runs, and runs found in another notebook's folder, stay untouched (results manifest)
        if folder.parent == store / "runs" and not (folder / "run.pt").exists():
            atomic_save_torch({"params": own, "variant": variant, "lamb": lamb,
                               "config": result.model.cfg}, folder / "run.pt")
        r = MiiiiRun(variant, lamb, task, result, folder,
                     dropout=own.dropout if own.dropout != params.dropout else None)
        out[r.label] = r
    return out


def seed_runs(params: MiiiiParams) -> dict[int, dict[str, MiiiiRun]]:
    """{seed: {label: run}} for each of ``params.extra_seeds`` (none: {}): every run of
    :func:`run` again on that seed, for the claims that need three seeds a side."""
    return {seed: run(params, seed=seed) for seed in params.extra_seeds}


def train_run(own: MiiiiParams, variant: str, lamb: float, folder: str, desc: str) -> None:
    """One run of :func:`run` as a submitted job trains it: into ``folder`` (its checkpoint and
    snapshots), where :func:`run` then finds it finished."""
    task = own.task(variant)
    config = own.train_config(lamb, Path(folder), own.epochs_for(variant, lamb),
                              own.compared_at(variant, lamb))
    train_stored(own.model(task), task, config, grad_hook=own.grokfast(lamb), desc=desc)


def _finished(folder: Path) -> bool:
    """Whether ``folder`` holds a run trained to its end (its checkpoint says so)."""
    path = folder / "last.pt"
    try:
        return path.exists() and bool(load_torch(path).get("finished", False))
    except CorruptFileError:
        return False  # trained again (train() warns and starts from step 0)


def smoke_train_params(config: dict[str, Any]) -> dict[str, Any]:
    """The smoke config of a notebook that reads notebook 11's runs: its ``train_params`` cut as
    notebook 11's own smoke config is, so that it finds the smoke runs."""
    named = config.get("train_params") or {}
    defaults = {k: MiiiiParams.__dataclass_fields__[k].default for k in MiiiiParams.SMOKE}
    return config | {"train_params": MiiiiParams.smoke_config(defaults | named)}


def explored_train_params(train_params: dict[str, Any]) -> dict[str, Any]:
    """``train_params`` of a notebook that reads notebook 11's runs, based on the folder of
    notebook 11 it was handed (the run context's folders or :func:`rt_lib.runtime.io.use_folder`).

    An exploration folder (``./run_all.sh --only 11,12 --set p=41`` hands 12
    ``11_miiii_training+p=41``) gives the parameters its ``parameters.yaml`` records, with
    ``train_params`` on top: a value that is the profile's (the profile's config repeats notebook
    11's, configs/paper/12_miiii_embeddings.yaml) gives way to the run's, one that differs from
    both contradicts the runs read and is refused (:attr:`MiiiiParams.NOT_IN_RUN` aside).  The
    profile's own folder gives ``train_params`` as they are."""
    folder = folder_of(TRAINING)
    if "+" not in folder:
        return dict(train_params)
    path = results_root() / folder / PARAMETERS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"notebook 11's runs are read from {path.parent}, which holds no "
                                f"{PARAMETERS_FILE}: run notebook 11 with those settings first")
    record = read_yaml_result(path)
    profile = TRAINING_EXPERIMENT.profile_params(current_profile()).as_plain()
    ran = record.get("parameters")
    if ran is None and isinstance(record.get("changes"), dict):
        ran = profile | record["changes"]
    if not isinstance(ran, dict):
        raise damaged(path, "it records no parameters of notebook 11")
    ran = {k: v for k, v in ran.items() if k in profile}
    own = {k: v for k, v in train_params.items() if k not in ran or k in MiiiiParams.NOT_IN_RUN}
    clash = {k: v for k, v in train_params.items()
             if k not in own and plain(v) != ran[k] and plain(v) != profile[k]}
    if clash:
        raise ValueError(f"train_params {clash} contradict notebook 11's runs read from {folder} ("
                         + ", ".join(f"{k}={ran[k]!r}" for k in clash) + "): leave them out of "
                         "train_params, or run notebook 11 with them")
    return ran | own


def training_params(train_params: dict[str, Any], variants: tuple[str, ...],
                    **overrides: Any) -> MiiiiParams:
    """Notebook 11's settings (defaults + ``train_params``, on the exploration run of notebook 11
    handed over: :func:`explored_train_params`) for the given variants only: what notebooks 12,
    13 and 15 ask for to load notebook 11's runs."""
    if not isinstance(train_params, dict):
        raise ValueError(f"train_params must be a dict of notebook 11's parameters, got {train_params!r}")
    unknown = (set(train_params) | set(overrides)) - set(MiiiiParams.names())
    if unknown:
        raise ValueError(f"train_params has unknown keys {sorted(unknown)}; "
                         f"allowed: {sorted(MiiiiParams.names())}")
    train_params = explored_train_params(train_params)
    try:
        return MiiiiParams(**(train_params | {"variants": tuple(variants), "lambda_zero": False,
                                              "dropout_zero": False} | overrides))
    except (ValueError, TypeError) as err:
        raise ValueError(f"train_params (notebook 11's parameters): {err}") from None


def load_runs(params: MiiiiParams) -> dict[str, MiiiiRun]:
    """{variant: run} of the grokfast runs (lambda as set), loaded or trained."""
    return {r.variant: r for r in run(params).values()}


def finished_run(params: MiiiiParams, variant: str) -> MiiiiRun | None:
    """Notebook 11's grokfast run of ``variant`` with ``params``' settings, loaded, when it was
    trained to its end; else None, and nothing is trained: for a reader's control run, which
    only some profiles train (the GPU profile trains T_miiii alone)."""
    one = replace(params, variants=(variant,), lambda_zero=False, dropout_zero=False)
    folder = runs_folder(one) / "runs" / one.run_key(variant, one.grokfast_lambda)
    return load_runs(one)[variant] if _finished(folder) else None


def finished_runs(params: MiiiiParams, variant: str) -> list[MiiiiRun]:
    """``variant``'s grokfast run on ``params.seed`` and on each of ``params.extra_seeds``, in
    that order, loaded for the seeds on which notebook 11 trained it to its end (as
    :func:`finished_run`, never trained here): a reader's control runs on as many seeds as the
    profile trained them."""
    one = replace(params, variants=(variant,), lambda_zero=False, dropout_zero=False)
    out = []
    for seed in (params.seed, *params.extra_seeds):
        these = one if seed == params.seed else replace(one, seed=seed, extra_seeds=())
        key = these.run_key(variant, one.grokfast_lambda)
        if _finished(runs_folder(one) / "runs" / key):
            runs = run(one, seed=None if seed == params.seed else seed)
            out.append(next(r for r in runs.values() if r.variant == variant and r.lamb == one.grokfast_lambda))
    return out


def _snapshot(r: MiiiiRun, path: Path) -> tuple[int, nn.Module]:
    """(epoch, model) of one weight snapshot of ``r`` (eval mode, CPU); a damaged snapshot names
    itself and notebook 11, which writes it."""
    def rebuild(path: Path) -> tuple[int, nn.Module]:
        state = load_torch(path)
        model = build_model(r.result.model.cfg, 0)
        model.load_state_dict(state["state_dict"])
        return int(state["step"]), model.eval()

    return read_result(path, rebuild)


def snapshot_models(r: MiiiiRun) -> dict[int, nn.Module]:
    """{epoch: model} for every weight snapshot of a run, in epoch order (eval mode, CPU)."""
    paths = sorted(Path(r.folder, "snapshots").glob("step_*.pt"),
                   key=lambda f: int(f.stem.split("_")[1]))
    if not paths:
        raise FileNotFoundError(f"no weight snapshots in {r.folder / 'snapshots'}")
    return dict(_snapshot(r, path) for path in paths)


def epochs_trained(r: MiiiiRun) -> int:
    """The epoch of ``r``'s last evaluation: its last epoch."""
    return int(r.result.history["step"].iloc[-1])


def model_at(r: MiiiiRun, epoch: int) -> nn.Module:
    """``r``'s model after exactly ``epoch`` epochs: the trained one at its last epoch, else its
    weight snapshot there (in eval mode).  A comparison with a shorter run reads the longer one
    here, at the shorter one's end: equal budgets, never the nearest epoch logged."""
    if epoch == epochs_trained(r):
        return r.result.model
    path = Path(r.folder, "snapshots", f"step_{epoch}.pt")
    if not path.is_file():
        raise ValueError(f"{r.label} kept no weights at epoch {epoch:,} ({path} is missing), "
                         f"where a shorter run it is compared with ended: give notebook 11 "
                         f"baseline_epochs={epoch} (it keeps a snapshot there) or both runs "
                         f"the same epochs")
    return _snapshot(r, path)[1]


def row_at(r: MiiiiRun, epoch: int) -> dict[str, float]:
    """``r``'s evaluation after exactly ``epoch`` epochs ({"train_acc": .., "valid_acc": ..,
    "valid_acc_q2": .., ...}): the one logged there, else its weights there (:func:`model_at`)
    evaluated as training evaluates them."""
    h = r.result.history
    logged = h.loc[h["step"] == epoch]
    if len(logged):
        return {k: float(v) for k, v in logged.iloc[-1].items()}
    return {"step": float(epoch), **evaluate(model_at(r, epoch), r.task)}


def valid_at(r: MiiiiRun, epoch: int) -> float:
    """Mean validation accuracy over heads after exactly ``epoch`` epochs (:func:`row_at`)."""
    return row_at(r, epoch)["valid_acc"]


def seed_values(values: list[float], digits: int = 3) -> str:
    """One value as a number, several as a list (one per seed)."""
    texts = [f"{v:.{digits}f}" for v in values]
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def not_generalised(label: str, valid: list[float], epoch: int, threshold: float) -> Verdict | None:
    """Not shown (budget) when a run of ``label`` (``valid``: its final validation accuracy on
    each seed) had not generalised by ``epoch``: the paper's claims about the trained T_miiii
    (its embeddings, grokfast's part in its convergence) are about a model that generalised, and
    one caught mid-transition moves with the seed and with the rounding (docs/scale.md).  None:
    every run generalised."""
    if min(valid) >= threshold:
        return None
    return Verdict(NOT_SHOWN, f"{label} had not generalised by epoch {epoch:,} (final validation "
                              f"accuracy {seed_values(valid)}, needs >= {threshold:g})", BUDGET)


# -- the seed noise of the runs, for comparisons of one seed a side --------------------------
@dataclass(frozen=True)
class NoiseMeasurement:
    """Seed noise of notebook 11's comparisons: benchmarks/miiii_budgets.py trained the CPU
    profile's runs on seeds 0-2, every run for the same epochs, and kept every 250th epoch's
    validation accuracy.  A notebook run has one seed a side; its difference is judged against
    the spread of the seeds of one measurement that ran both sides
    (rt_lib.claims.verdicts.beyond_noise)."""

    path: Path
    source: str  # how a verdict cites it
    lambda_zero_recipe: tuple[tuple[str, float], ...]  # what its λ = 0 runs trained at, beyond the profile

    def ran(self, params: MiiiiParams, run: str) -> bool:
        """Whether its rows of ``run`` trained at ``params`` (up to settings in NOISE_ANY)."""
        measured = MiiiiParams()
        if run == "T_miiii λ=0":
            measured = replace(measured, **dict(self.lambda_zero_recipe))
        return all(getattr(params, f) == getattr(measured, f)
                   for f in MiiiiParams.names() if f not in NOISE_ANY)

    def spread(self, run: str, epoch: int) -> float | None:
        """Standard deviation over seeds of ``run``'s validation accuracy at ``epoch``; None
        without three seeds evaluated there."""
        values = _noise_table(self.path)
        values = values.loc[(values["run"] == run) & (values["step"] == epoch), "value"]
        return float(values.std()) if len(values) >= 3 else None

    def noise(self, params: MiiiiParams, run: str, epoch: int) -> float | None:
        """:meth:`spread` of ``run`` at ``epoch`` where this measurement :meth:`ran` it at
        ``params``; else None."""
        return self.spread(run, epoch) if self.ran(params, run) else None


#: settings that do not change the runs' distribution at a given epoch: a run that differs from
#: a measurement's in anything else has no measured seed noise there
NOISE_ANY = MiiiiParams.NOT_IN_RUN + ("seed", "epochs", "baseline_epochs", "eval_points",
                                      "n_snapshots", "device")
_RESULTS = PROJECT_ROOT / "benchmarks" / "results"
#: First the measurement on this project's CPU with λ = 0 at its own recipe
#: (MiiiiParams.lambda_zero_params; 4,000 epochs); then the one on another machine's CPU (other
#: kernels, the same distribution; 8,000 epochs) with λ = 0 at the recipe tuned with grokfast.
NOISE_MEASUREMENTS = (
    NoiseMeasurement(_RESULTS / "miiii_lambda0_own_recipe.csv",
                     "benchmarks/miiii_budgets.py, seeds 0-2, λ = 0 at its own recipe",
                     (("weight_decay", 0.1),)),
    NoiseMeasurement(_RESULTS / "miiii_budgets_h200cpu.csv",
                     "benchmarks/miiii_budgets.py, seeds 0-2", ()),
)


@cache
def _noise_table(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path)
    return frame[frame["metric"] == "valid_acc"]


def seed_noise(params: MiiiiParams, run: str, epoch: int) -> float | None:
    """Standard deviation over seeds of ``run``'s validation accuracy (``run``: a run name of
    benchmarks/miiii_budgets.py, e.g. "T_miiii λ=0") at ``epoch``, from the first measurement
    that ran it at ``params``; None when none did."""
    return next((noise for measurement in NOISE_MEASUREMENTS
                 if (noise := measurement.noise(params, run, epoch)) is not None), None)


def apart_by_seed_noise(params: MiiiiParams, a: float, b: float, run_a: str, run_b: str, epoch: int,
           params_b: MiiiiParams | None = None) -> Verdict:
    """One seed a side: ``a - b`` against the seed noise of both runs at ``epoch``, from one
    measurement that ran both (``run_b`` trained with ``params_b`` where it has settings of its
    own, e.g. λ = 0's recipe)."""
    sides = ((params, run_a), (params_b or params, run_b))
    for measurement in NOISE_MEASUREMENTS:
        noise = [measurement.noise(own, run, epoch) for own, run in sides]
        if None not in noise:
            return beyond_noise(a - b, math.hypot(*noise), f"{measurement.source}, epoch {epoch}")
    return Verdict(NOT_SHOWN, f"one seed a side, and no seed noise measured for these settings "
                              f"at epoch {epoch} (benchmarks/miiii_budgets.py)", RUNS)
