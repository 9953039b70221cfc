"""What every random-transformer experiment shares: named model kinds and one restart grid.

A notebook names its model kinds ("random transformer", "trained transformer", "trained LSTM",
"random LSTM"), widths and restarts; :func:`train_grid` trains each combination through the one
training loop and returns a metrics table with a row per run (seeded and recorded).
"""

from __future__ import annotations

import hashlib
import importlib
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd
import yaml
from torch import nn

from rt_lib.jobs.executor import Job, run_jobs
from rt_lib.jobs.executor import current as current_executor
from rt_lib.jobs.resume import resume_dir
from rt_lib.model import LSTMConfig, TransformerConfig, build_model, count_params
from rt_lib.runtime.io import atomic_save_torch, atomic_write_text, load_torch, read_result, results_dir
from rt_lib.runtime.params import Params, check_positive_ints
from rt_lib.runtime.seeding import derive
from rt_lib.tasks.base import EvalCapped, Task
from rt_lib.training.batched import can_batch, train_batched
from rt_lib.training.stored import train_stored
from rt_lib.training.train import TrainConfig, TrainResult

if TYPE_CHECKING:
    from rt_lib.experiment import Experiment

#: Written by every grid beside its metrics: ``smaller_than_paper``, how the task is smaller
#: than the paper's (None: the paper's, or not said), for Table 1's claims (notebook 07).
TASK_FILE = "task.yaml"

#: Table 1's tasks (notebooks 06 and 07): task -> (notebook whose metrics.csv holds its
#: restarts, Table 1's test metric, its name)
TABLE1_SOURCES = {
    "modular addition": ("01_modular_addition", "test_acc", "accuracy"),
    "needle": ("02_needle_in_a_haystack", "test_acc", "accuracy"),
    # Per-token accuracy of decimal addition has a floor near 0.4 at 3 digits (the final carry
    # and stop tokens are almost free): the whole sum, exactly, is the metric that shows adding.
    "decimal addition": ("03_decimal_addition", "test_exact", "exact match"),
    "parentheses": ("04_parentheses", "test_acc", "accuracy"),
}

#: kind -> (architecture, trainable parts, transformer settings).  "random" = only the token
#: embedding, position embedding and unembedding train
#: (docs/papers.md, random transformers: model).  The last four are the embedding ablations of Table 2:
#: which of the three trained matrices a random transformer needs.
MODEL_KINDS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "random transformer": ("transformer", "embeddings", {}),
    "trained transformer": ("transformer", "all", {}),
    "trained LSTM": ("lstm", "all", {}),
    "random LSTM": ("lstm", "embeddings", {}),
    "random: unembedding only": ("transformer", "unembed", {}),
    "random: embeddings only": ("transformer", "embed", {}),
    "random: W_E + W_U, random W_pos": ("transformer", "token_unembed", {}),
    "random: W_E + W_U, sinusoidal W_pos": ("transformer", "token_unembed",
                                            {"pos_embed": "sinusoidal"}),
    # not Table 2's: its sinusoids at the token embeddings' scale instead of amplitude 1
    "random: W_E + W_U, sinusoidal W_pos scaled to W_E": (
        "transformer", "token_unembed", {"pos_embed": "sinusoidal", "pos_scale": None}),
}


def check_kinds(kinds: Sequence[str]) -> None:
    unknown = [k for k in kinds if k not in MODEL_KINDS]
    if unknown or not kinds:
        raise ValueError(f"models={list(kinds)!r}: each must be one of {list(MODEL_KINDS)}")


def model_config(kind: str, task: Task, width: int, n_layers: int, n_heads: int,
                 **transformer_overrides) -> TransformerConfig | LSTMConfig:
    arch, trainable, settings = MODEL_KINDS[kind]
    if arch == "lstm":
        return LSTMConfig(d_vocab=task.d_vocab, d_model=width, n_layers=2,
                          d_vocab_out=task.d_vocab_out, trainable=trainable)
    return TransformerConfig(d_vocab=task.d_vocab, n_ctx=task.n_ctx, d_model=width,
                             n_layers=n_layers, n_heads=n_heads, d_vocab_out=task.d_vocab_out,
                             trainable=trainable, **{**settings, **transformer_overrides})


@dataclass(frozen=True, kw_only=True)
class GridParams(Params):
    """Parameters every restart-grid notebook shares; a notebook's class adds its task's fields
    and sets the recipe, which has no default here (widths, steps, batch, lr, warm-up,
    evaluations: each notebook's CPU profile, its one home).  Every value is checked when the
    object is built (:class:`~rt_lib.runtime.params.Params`), before any work, naming the parameter."""

    models: tuple[str, ...] = ("random transformer", "trained transformer", "trained LSTM")  # also: "random LSTM"
    widths: tuple[int, ...]  # d_model; Table 1 reports 16 and 1024
    n_layers: int = 2  # depth of the transformer (docs/papers.md, random transformers: model)
    n_heads: int = 4  # attention heads (docs/papers.md, random transformers: model)
    restarts: int = 1  # seeds per model and width
    batch_restarts: bool = False  # True: the restarts train as one stacked model (small models: faster on CPU)
    # small models gain (benchmarks/bench_all.py: 1.5-2.3x at width 16), long sequences lose
    steps: int  # optimiser steps for every model
    batch_size: int | None  # None = full batch (finite tasks only)
    lr: float  # AdamW peak lr: the random transformer's, and every kind's without its own
    lstm_lr: float = 5e-3  # lr of the LSTMs, trained and random: the paper's
    lstm_steps: int | None = None  # LSTM steps (None: same as steps)
    trained_steps: int | None = None  # steps of the fully trained transformer (None: same as steps)
    trained_lr: float | None = None  # lr of the fully trained transformer; None = lr
    weight_decay: float = 1e-3  # on matrices only (docs/papers.md, random transformers: training)
    warmup_steps: int  # linear warm-up, then cosine to 0
    eval_every: int  # steps between evaluations
    # Rows kept of each evaluation set (None: all of them).  A finite task evaluates its whole
    # training split too: at the paper's p = 199 that is 37,621 rows per evaluation, a
    # minute at width 1024 on a CPU, so the smoke test keeps the first rows of each set (a
    # random sample: the split is shuffled).  Declared by the notebooks of finite tasks; left
    # out of the printed parameters (notebook 06 prints them), being a smoke-test knob.
    eval_rows: int | None = field(default=None, repr=False)  # rows per evaluation set; None: all
    seed: int = 0  # every restart's seed derives from this one
    threads: int | None = None  # torch threads (None: $RT_THREADS or 1)
    bf16: bool = False  # bf16 autocast of the forward pass
    device: str = "auto"  # CUDA when available

    # One restart (the shapes and code paths of the profile; medians and ranges over restarts
    # run in nbval's three restarts of the CPU profile, and a second one doubled the smoke's
    # training), two steps of 8 rows (a step of the paper's 1,000 rows of 63 tokens takes
    # minutes at width 1024 on one core), one evaluation at the end, of at most 32 rows per set
    # (n_test of the stream tasks).
    DISTINCT: ClassVar[tuple[str, ...]] = ("widths", "models")
    SMOKE: ClassVar[dict[str, Any]] = {
        "restarts": 1, "steps": 2, "lstm_steps": None, "trained_steps": None, "batch_size": 8,
        "warmup_steps": 1, "eval_every": 2, "eval_rows": 32}

    def check(self) -> None:
        check_kinds(self.models)
        check_positive_ints("widths", self.widths)
        check_positive_ints("restarts", [self.restarts])
        check_positive_ints("n_layers", [self.n_layers])
        check_positive_ints("n_heads", [self.n_heads])
        if self.eval_rows is not None:
            check_positive_ints("eval_rows", [self.eval_rows])
        for w in self.widths:
            if w % self.n_heads:
                raise ValueError(f"widths: width {w} is not divisible by n_heads={self.n_heads}")
        # Building both training configs validates steps, lr, batch_size, ... with their messages.
        for extra in self.kind_overrides().values():
            replace(self.train_config(), **extra)
        self.check_task()

    def task(self) -> Task:
        """The notebook's task, built from its fields (subclasses)."""
        raise NotImplementedError

    def check_task(self) -> None:
        """Validate the task's own fields: building the task checks them, with its messages."""
        self.task()

    def smaller_than_paper(self) -> str | None:
        """How this task is smaller than the paper's, in words (None: the paper's); also written
        beside the results (:data:`TASK_FILE`), where notebook 07 reads it.  Each notebook says."""
        return super().smaller_than_paper()

    def lstm_overrides(self) -> dict:
        """The paper's LSTM lr (docs/papers.md, random transformers: training); optionally fewer
        steps, the LSTM being slowest on CPU."""
        extra: dict[str, Any] = {"lr": self.lstm_lr}
        if self.lstm_steps is not None:
            extra["steps"] = self.lstm_steps
        return extra

    def train_config(self) -> TrainConfig:
        return TrainConfig(steps=self.steps, batch_size=self.batch_size, lr=self.lr,
                           weight_decay=self.weight_decay, warmup_steps=self.warmup_steps,
                           eval_every=self.eval_every, seed=self.seed, threads=self.threads,
                           bf16=self.bf16, device=self.device)

    def kind_overrides(self) -> dict[str, dict]:
        """Training changes per model kind: the LSTM's lr and steps, the trained transformer's
        lr and steps (each kind's recipe; a fair table gives every kind the same steps)."""
        out = {"trained LSTM": self.lstm_overrides(), "random LSTM": self.lstm_overrides()}
        trained: dict[str, Any] = {}
        if self.trained_steps is not None:
            trained["steps"] = self.trained_steps
        if self.trained_lr is not None:
            trained["lr"] = self.trained_lr
        if trained:
            out["trained transformer"] = trained
        return out

    def lr_of(self, kind: str) -> float:
        """The peak lr a model ``kind`` trains at (its :meth:`kind_overrides`, else ``lr``)."""
        return self.kind_overrides().get(kind, {}).get("lr", self.lr)

    def transformer_overrides(self) -> dict[str, Any]:
        """Model settings beyond width/depth/heads (e.g. the language model's dropout)."""
        return {}


@dataclass(frozen=True)
class StreamGridParams(GridParams):
    """The CPU recipe the stream tasks share (needle 02, decimal addition 03, parentheses 04):
    three restarts of small batches at the random transformer's lr, each notebook adding its
    task, its fixed test set (``n_test``, ``test_seed``: declared by each task, whose fields come
    first in the parameters' order) and its steps (docs/scale.md says how each was chosen)."""

    SMOKE: ClassVar[dict[str, Any]] = GridParams.SMOKE | {"n_test": 32}
    restarts: int = 3  # seeds per model and width (paper: 10)
    batch_size: int | None = 64  # sequences per step (paper: 1,000)
    lr: float = 1e-2  # AdamW peak lr of the random transformer (paper: 1e-3)
    trained_lr: float | None = 1e-3  # lr of the fully trained transformer: the paper's (None: lr)
    warmup_steps: int = 100  # linear warm-up, then cosine to 0 (paper: 500)
    eval_every: int = 100  # steps between test evaluations


def grid_step_shapes(params: GridParams, task: Task | None = None,
                     kinds: Sequence[str] | None = None) -> list:
    """One :class:`~rt_lib.training.footprint.StepShape` per model kind at the widest width, with the
    kind's steps and its runs (restarts over every width, a narrower width counted by its share
    of the matrix products, (width / widest)^2)."""
    from rt_lib.training.footprint import StepShape

    task = task if task is not None else params.task()
    widest = max(params.widths)
    runs = params.restarts * sum((w / widest) ** 2 for w in params.widths)
    out = []
    for kind in kinds or params.models:
        cfg = model_config(kind, task, widest, params.n_layers, params.n_heads,
                           **params.transformer_overrides())
        tcfg = replace(params.train_config(), **params.kind_overrides().get(kind, {}))
        out.append(StepShape(f"{kind} d={widest}", cfg, task, params.batch_size, tcfg,
                             steps=tcfg.steps, runs=runs))
    return out


def experiment_of(notebook: str) -> Experiment:
    """The experiment of ``notebook`` (``"02_needle_in_a_haystack"``), declared by the module
    named after it without its number (``rt_lib.experiments.needle_in_a_haystack``).  A notebook's
    module imports no other notebook's module (tests/test_layers.py): one that builds on another
    notebook's settings (06 trains 01-04's tasks again, 09 reads the checkpoints of 01-05 and 08)
    asks for its experiment here and goes through its public face, its parameters and profiles."""
    stem = notebook[3:] if re.fullmatch(r"\d\d_[a-z0-9_]+", notebook) else ""
    target = f"rt_lib.experiments.{stem}"
    try:
        module = importlib.import_module(target) if stem else None
    except ModuleNotFoundError as err:
        if err.name != target:  # the module exists but an import inside it failed
            raise
        module = None
    experiment = getattr(module, "EXPERIMENT", None)
    if experiment is None or experiment.name != notebook:
        raise ValueError(f"no experiment {notebook!r}: a notebook NN_name declares it in "
                         f"rt_lib/experiments/name.py")
    return experiment


def run_task_grid(name: str, params: GridParams, save_models: bool = True,
                  task: Task | None = None, also: Sequence[GridParams] = (),
                  owner: str | None = None) -> GridResult:
    """Build ``params``' task and train its grid; checkpoints under ``results/<name>/models``
    (replacing what an earlier run left there), each with the parameters that rebuild its task
    (``params.task()``, used by notebook 09).  ``task``: the task already built from ``params``
    (saves building it twice).  ``also``: further grids on the same task (e.g. one model kind at
    more widths), trained after it into the same result and checkpoint folder.

    ``owner``: the notebook that trains ``name``'s task on the side (notebook 06 trains 01-04's):
    everything it writes goes under ``results/<owner>/<name>/``, never into ``name``'s own
    folder, whose task statement notebook 07 reads and which a kept run must not show as a
    notebook that did not finish."""
    if owner is not None and save_models:
        raise ValueError(f"{owner} trains {name}'s grid on the side: it saves no models there")
    task = task if task is not None else params.task()
    folder = results_dir(owner) / name if owner is not None else results_dir(name)
    ckpt = None
    if save_models:
        # The folder holds this run's models only: a checkpoint left by earlier settings (another
        # width) would be read as this run's by notebook 09, which compares at the widest width
        # saved.
        shutil.rmtree(folder / "models", ignore_errors=True)
        ckpt = str(folder / "models")
    resume = resume_dir(name)
    # Submitted runs (--executor local|slurm) keep their results beside the mid-run checkpoints
    # (removed by the runner once the notebook finished); outside the runner, in the results.
    store = f"{resume}/jobs" if resume is not None else str(folder / "jobs")
    parts = [train_grid(task, grid, ckpt, meta={"notebook": name, "params": grid},
                        resume_dir=resume, job_store=store) for grid in (params, *also)]
    result = GridResult(metrics=pd.concat([p.metrics for p in parts], ignore_index=True), task=task)
    try:
        smaller = params.smaller_than_paper()
    except NotImplementedError:
        smaller = "not said"
    atomic_write_text(folder / TASK_FILE, yaml.safe_dump({"smaller_than_paper": smaller}))
    for part in parts:
        result.histories.update(part.histories)
        result.models.update(part.models)
    return result


@dataclass
class GridResult:
    """What every training experiment's ``run()`` returns."""

    metrics: pd.DataFrame  # one row per (model, width, restart) (and task or target, if several)
    histories: dict[tuple, pd.DataFrame] = field(default_factory=dict)  # key -> eval rows
    models: dict[tuple, nn.Module] = field(default_factory=dict)  # (model, width, restart) -> model
    task: Task | None = None  # the task trained on, when there is one


def train_grid(task: Task, params: GridParams, checkpoint_dir: str | None = None,
               meta: Mapping[str, Any] | None = None,
               resume_dir: str | None = None, job_store: str | None = None) -> GridResult:
    """Train every model kind of ``params`` at every width ``params.restarts`` times; seeds
    derive from ``params.seed``.

    With ``params.batch_restarts`` the restarts of a transformer train as one stacked model
    (:mod:`rt_lib.training.batched`; equal to one-by-one runs up to float rounding) where that is supported:
    no early stop, checkpoints, dropout or bf16 (the paper profiles' 10 restarts).  Off by default:
    on CPU it pays only for small models (benchmarks/bench_all.py, group "restarts").

    Training settings change per model kind (``params.kind_overrides()``: the LSTM's own lr,
    docs/papers.md, random transformers: training) and every transformer gets
    ``params.transformer_overrides()`` (e.g. dropout);
    ``meta`` is stored in every checkpoint (what rebuilds the task).
    ``resume_dir``: each run checkpoints there (every tenth of its steps) and resumes from it, so
    an interrupted grid continues where it stopped and ends as the uninterrupted one would.

    Under the ``local`` or ``slurm`` executor (:mod:`rt_lib.jobs.executor`, ``--executor``) each
    restart of each model and width is one job, its result kept in the folder ``job_store``
    under a key of its settings (a rerun submits only the runs missing); without a
    ``job_store`` (small grids other notebooks train on the side) the grid trains here.
    """
    rows, result = [], GridResult(metrics=pd.DataFrame(), task=task)
    if params.eval_rows is not None:
        task = EvalCapped(task, params.eval_rows)
    executor = current_executor()
    submit = executor.kind != "inline" and job_store is not None
    train_cfg, restarts = params.train_config(), params.restarts
    groups = []  # (width, kind, model config, seeds, train configs, models, batched)
    for width in params.widths:
        for kind in params.models:
            cfg = model_config(kind, task, width, params.n_layers, params.n_heads,
                               **params.transformer_overrides())
            extra = params.kind_overrides().get(kind, {})
            seeds = [derive(params.seed, f"restart{r}") % 2**31 for r in range(restarts)]
            tcfgs = [replace(train_cfg, seed=s, **extra) for s in seeds]
            # built here only for runs trained here (a submitted job builds its own)
            models = [] if submit else [build_model(cfg, derive(s, "init")) for s in seeds]
            # Submitted runs train one restart per job (a GPU each): never batched.
            batched = (not submit and params.batch_restarts and restarts > 1
                       and can_batch(cfg, tcfgs[0]))
            if resume_dir is not None and not batched:
                slug = kind.replace(" ", "_")
                tcfgs = [replace(c, resume=True, checkpoint_every=max(c.steps // 10, 1),
                                 checkpoint_path=f"{resume_dir}/{slug}_d{width}_r{r}.pt")
                         for r, c in enumerate(tcfgs)]
            groups.append((width, kind, cfg, seeds, tcfgs, models, batched))
    if not submit:
        trained = [train_batched(models, task, tcfgs) if batched else
                   [train_stored(m, task, c, desc=f"{kind} d={width} #{r}")
                    for r, (m, c) in enumerate(zip(models, tcfgs))]
                   for width, kind, _, _, tcfgs, models, batched in groups]
    else:
        # A job builds its model from the config and seed (the same weights as built here):
        # the pickle each job carries stays small however wide the model.
        job_task = task.for_jobs(Path(job_store) / "data")  # large data: a file, not a pickle
        jobs = [Job(_job_key(params, kind, width, r, cfg, c), train_one,
                    (cfg, derive(s, "init"), job_task, c, f"{kind} d={width} #{r}"))
                for width, kind, cfg, seeds, tcfgs, _, _ in groups
                for r, (s, c) in enumerate(zip(seeds, tcfgs))]
        name = str((meta or {}).get("notebook", "grid"))
        flat = iter(run_jobs(jobs, job_store, executor, name=name))
        trained = [[next(flat) for _ in seeds] for _, _, _, seeds, *_ in groups]
    for (width, kind, cfg, seeds, _, _, _), results in zip(groups, trained):
        for restart, (res, run_seed) in enumerate(zip(results, seeds)):
            # Analyses run on CPU whatever trained the model (a GPU paper run included).
            model = res.model = res.model.cpu()
            key = (kind, width, restart)
            result.histories[key] = res.history
            result.models[key] = res.model
            last = res.history.iloc[-1]
            rows.append({
                "model": kind, "width": width, "restart": restart, "seed": run_seed,
                **{c: float(last[c]) for c in res.history.columns
                   if c not in ("step", "lr", "time_s")},  # train_loss and every eval metric
                "trainable_params": count_params(model),
                "total_params": count_params(model, trainable_only=False),
                "steps": res.steps_done, "budget": budget_status(res.history),
                "wall_time_s": res.wall_time_s,
            })
            if checkpoint_dir is not None:
                slug = kind.replace(" ", "_")
                atomic_save_torch(
                    {"config": cfg, "state_dict": res.model.state_dict(), "seed": run_seed,
                     "model": kind, "width": width, "restart": restart, **(meta or {})},
                    f"{checkpoint_dir}/{slug}_d{width}_r{restart}.pt")
    result.metrics = pd.DataFrame(rows)
    return result


def train_one(model_cfg: Any, init_seed: int, task: Task, cfg: TrainConfig,
              desc: str) -> TrainResult:
    """One run of a grid, as a submitted job runs it: the model built from ``model_cfg`` and
    ``init_seed`` (as :func:`train_grid` builds it), trained; it comes back on the CPU."""
    res = train_stored(build_model(model_cfg, init_seed), task, cfg, desc=desc)
    res.model = res.model.cpu()
    return res


def _job_key(params: GridParams, kind: str, width: int, restart: int, cfg: Any,
             tcfg: TrainConfig) -> str:
    """``<kind>_d<width>_r<restart>_<digest>``: the digest covers every setting of the run (the
    grid's parameters, which build the task, and the model's and training's configs)."""
    settings = repr((params, params.eval_rows, cfg, tcfg))
    digest = hashlib.sha256(settings.encode()).hexdigest()[:12]
    return f"{re.sub(r'[^A-Za-z0-9]+', '_', kind).strip('_')}_d{width}_r{restart}_{digest}"


def budget_status(history: pd.DataFrame, tail: float = 0.25, tolerance: float = 0.1,
                  floor: float = 0.1, solved: float = 0.05) -> str:
    """Whether a run had finished learning when its step budget ran out, read from its training
    loss alone (never a test metric): "converged" when the training loss ends below ``solved``
    nats, or changed over the last ``tail`` of the run by less than ``tolerance`` of its value or
    by less than ``floor`` nats (a plateau, however high, is where the budget left it; a loss near
    zero that keeps shrinking no longer moves an accuracy), else "still improving" (the run was cut
    short: more steps would change its number).  The loss is averaged over the last two
    evaluations at each end, each being one batch's loss."""
    loss = history["train_loss"].to_numpy()
    steps = history["step"].to_numpy()
    before = loss[steps <= steps[-1] * (1 - tail)][-2:] if len(loss) >= 4 else loss[:0]
    if not len(before):
        return "unknown"
    end = loss[-2:].mean()
    drop = before.mean() - end
    return ("converged" if end < solved or drop < max(tolerance * before.mean(), floor)
            else "still improving")


def load_checkpoint(path: str | Path) -> nn.Module:
    """Rebuild a model saved by :func:`train_grid` (config + weights); a checkpoint that does
    not load (damaged, or not a grid's) raises :class:`~rt_lib.runtime.io.DamagedFileError` naming it and
    the notebook to rerun."""
    def rebuild(path: Path) -> nn.Module:
        state = load_torch(path)
        model = build_model(state["config"], 0)
        model.load_state_dict(state["state_dict"])
        return model.eval()

    return read_result(path, rebuild)
