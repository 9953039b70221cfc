"""Experiment 14: the hyperparameter search of Syrkis & Søgaard (2024, Table 1) with Optuna.

The study lives in a database: SQLite under ``results/14_miiii_search/`` by default, or any
SQLAlchemy URL (``postgresql://user:pw@host/db``) or Optuna's journal file (``journal:<path>``,
no server: a file on a shared file system), so workers on several machines join one study:

    python -m rt_lib.experiments.miiii_search --storage sqlite:///study.db --trials 10

Each trial trains T_miiii with notebook 11's settings (``fixed``) and one point of the search
space, and scores it as the authors' search did (``main.py`` at the paper commit): the validation
loss averaged over the last 10 epochs, minimised (``valid_loss_last10``); the final validation
accuracy (mean over heads, maximised) or loss are options.  The search space, fixed settings and
objective are stored on the study; a worker with different ones is refused.  Optuna and
SQLAlchemy are imported where a study is opened or read, not with the module: the runner imports
every experiment module, and a run of other notebooks (a GPU job's bundle) need not install them.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from rt_lib.claims.ledger import Claims
from rt_lib.claims.verdicts import bool_verdict
from rt_lib.experiment import Experiment
from rt_lib.experiments.miiii_common import MiiiiParams
from rt_lib.jobs.executor import Job, run_jobs
from rt_lib.jobs.executor import current as current_executor
from rt_lib.jobs.resume import resume_dir
from rt_lib.runtime.io import damaged, results_dir
from rt_lib.runtime.params import Params
from rt_lib.runtime.seeding import default_jobs
from rt_lib.training.stored import train_stored

if TYPE_CHECKING:  # annotations only; imported where used (the module docstring)
    import optuna

NAME = "14_miiii_search"

#: The paper's Table 1: the values searched for each hyperparameter.
TABLE1_SPACE: dict[str, list] = {
    "dropout": [0.0, 0.5, 0.2, 0.1],
    "grokfast_lambda": [0.0, 0.5, 2.0],
    "weight_decay": [0.0, 0.1, 0.5, 1.0],
    "d_model": [128, 256],
    "lr": [3e-4, 1e-4],
    "n_heads": [4, 8],
}
#: The settings the authors' search chose (Syrkis & Søgaard 2024, Table 2).  Its weight decay,
#: 1/3, is not in Table 1's space: the paper profile searches Table 1's space with 1/3 added.
TABLE2: dict[str, float] = {"dropout": 0.1, "grokfast_lambda": 0.5, "weight_decay": 1 / 3,
                            "d_model": 256, "lr": 3e-4, "n_heads": 4}
#: The CPU profile's space: Table 1's, with learning rates for p = 11 over 1,500 epochs.
CPU_SPACE: dict[str, list] = TABLE1_SPACE | {"lr": [3e-3, 1e-3]}
#: objective -> direction.  valid_loss_last10: the authors' (validation loss averaged over the last
#: 10 epochs, less noisy than one epoch's); the others read the last epoch only.
OBJECTIVES = {"valid_loss_last10": "minimize", "valid_acc": "maximize", "valid_loss": "minimize"}
LAST_EPOCHS = 10  # the epochs valid_loss_last10 averages over


JOURNAL = "journal:"  # storage "journal:<path>": Optuna's journal file, shared through the file system


def default_storage() -> str:
    path = results_dir(NAME) / "study.db"
    return f"sqlite:///{path.resolve()}"


@dataclass(frozen=True)
class SearchParams(Params):
    """Notebook 14's parameters."""

    space: dict = field(default_factory=lambda: dict(CPU_SPACE))  # name -> values to try
    # other MiiiiParams fields for every trial (CPU: p = 11, short runs)
    fixed: dict = field(default_factory=lambda: {"p": 11, "epochs": 1500, "eval_points": 4,
                                                 "train_fraction": 0.8})
    n_trials: int = 6  # finished trials the study should hold
    objective: str = "valid_loss_last10"  # as the authors searched (min); or valid_acc (max), valid_loss (min)
    storage: str | None = None  # SQLAlchemy URL; None: SQLite under results/14_miiii_search/
    study_name: str = "miiii_table1_cpu"
    sampler_seed: int = 0  # TPE's seed (each worker adds its own offset)

    @classmethod
    def smoke_config(cls, config: dict[str, Any]) -> dict[str, Any]:
        """The smoke test: two trials of a few epochs (at least the 10 the objective averages)."""
        out = dict(config)
        fixed = dict(out.get("fixed") or cls().fixed)
        fixed["epochs"] = min(fixed.get("epochs", MiiiiParams.epochs), 12)
        fixed["eval_points"] = min(fixed.get("eval_points", MiiiiParams.eval_points), 2)
        return out | {"fixed": fixed, "n_trials": min(out.get("n_trials", cls.n_trials), 2)}

    def check(self) -> None:
        if not self.space:
            raise ValueError(f"space must be a non-empty dict of name -> values, got {self.space!r}")
        fields_ = set(MiiiiParams.__dataclass_fields__)
        for name, given in (("space", self.space), ("fixed", self.fixed)):
            bad = [k for k in given if k not in fields_]
            if bad:
                raise ValueError(f"{name}: unknown hyperparameters {bad}; "
                                 f"allowed: {sorted(fields_)}")
        both = set(self.space) & set(self.fixed)
        if both:
            raise ValueError(f"{sorted(both)} are both searched (space) and fixed")
        for name, values in self.space.items():
            if not isinstance(values, (list, tuple)) or not values:
                raise ValueError(f"space[{name!r}] must be a non-empty list, got {values!r}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective={self.objective!r} is not one of {list(OBJECTIVES)}")
        if not isinstance(self.n_trials, int) or self.n_trials < 1:
            raise ValueError(f"n_trials must be a positive integer, got {self.n_trials!r}")
        # every corner of the space must make a valid run (e.g. d_model divisible by n_heads)
        for name, values in self.space.items():
            for value in values:
                self.trial_params({name: value})

    def smaller_than_paper(self) -> str | None:
        return self.trial_params({}).smaller_than_paper()  # every trial's p (fixed)

    def url(self) -> str:
        return self.storage or default_storage()

    def trial_params(self, point: dict[str, Any]) -> MiiiiParams:
        return MiiiiParams(**(self.fixed | point | {"variants": ("miiii",), "lambda_zero": False,
                                                             "dropout_zero": False}))


def _is_damaged(err: BaseException) -> bool:
    """Whether opening a study failed on the bytes of its file: SQLite's "file is not a
    database" or "database disk image is malformed" (a plain DatabaseError: a locked database
    or a schema race is one of its subclasses), or a journal line that is not JSON."""
    import sqlalchemy

    return type(err) is sqlalchemy.exc.DatabaseError or isinstance(err, json.JSONDecodeError)


def storage_file(url: str) -> Path | None:
    """The file a storage URL keeps its studies in (SQLite, journal); None for a server's."""
    if url.startswith(JOURNAL):
        return Path(url.removeprefix(JOURNAL))
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        return Path(url.removeprefix("sqlite:///"))
    return None


def _storage(url: str, attempts: int = 10) -> optuna.storages.BaseStorage:
    import optuna
    import sqlalchemy

    if url.startswith(JOURNAL):  # a file on a shared file system: no database server needed
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(url.removeprefix(JOURNAL)))
    # SQLite serialises writers: wait for the lock instead of failing when workers collide.
    kwargs = {"connect_args": {"timeout": 120}} if url.startswith("sqlite") else {}
    for attempt in range(attempts):
        try:
            return optuna.storages.RDBStorage(url, engine_kwargs=kwargs)
        except sqlalchemy.exc.SQLAlchemyError as err:
            # Workers that start together race to create the schema; the loser finds it made.
            # A damaged file stays damaged: no use waiting for it.
            if attempt == attempts - 1 or _is_damaged(err):
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def open_study(params: SearchParams, worker: int = 0) -> optuna.Study:
    """Create or join the study; refuses one made with another space, objective or settings,
    and a storage file that does not read (naming it: :class:`~rt_lib.runtime.io.DamagedFileError`)."""
    import optuna
    import sqlalchemy

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = params.url()
    try:
        study = optuna.create_study(
            storage=_storage(url), study_name=params.study_name, load_if_exists=True,
            direction=OBJECTIVES[params.objective],
            sampler=optuna.samplers.TPESampler(seed=params.sampler_seed + worker,
                                               n_startup_trials=4))
    except (sqlalchemy.exc.SQLAlchemyError, ValueError) as err:
        file = storage_file(url)
        if file is None or not _is_damaged(err):
            raise
        # Not rebuilt here: the file holds every trial run so far (each one a training run).
        raise damaged(file, err, first="move it aside (it holds the trials run so far), then ",
                      notebook=NAME) from err
    setup = json.dumps({"space": params.space, "fixed": params.fixed,
                        "objective": params.objective}, sort_keys=True)
    stored = study.user_attrs.get("setup")
    if stored is None:
        study.set_user_attr("setup", setup)
    elif stored != setup:
        raise ValueError(f"study {params.study_name!r} in {params.url()} was made with {stored}; "
                         f"this search has {setup}: choose another study_name")
    return study


def objective(params: SearchParams, trial: optuna.Trial) -> float:
    point = {name: trial.suggest_categorical(name, list(values))
             for name, values in params.space.items()}
    run_params = params.trial_params(point)
    task = run_params.task("miiii")
    config = replace(run_params.train_config(run_params.grokfast_lambda, None),
                     eval_last=min(LAST_EPOCHS, run_params.epochs))
    result = train_stored(run_params.model(task), task, config,
                   grad_hook=run_params.grokfast(run_params.grokfast_lambda),
                   desc=f"trial {trial.number}")
    h = result.history
    last = h.iloc[-1]
    trial.set_user_attr("valid_loss_last10", float(h.loc[h["step"] > run_params.epochs - LAST_EPOCHS,
                                                          "valid_loss"].mean()))
    trial.set_user_attr("valid_acc", float(last["valid_acc"]))
    trial.set_user_attr("valid_loss", float(last["valid_loss"]))
    trial.set_user_attr("train_acc", float(last["train_acc"]))
    trial.set_user_attr("worker", os.getpid())
    trial.set_user_attr("seconds", round(result.wall_time_s, 2))
    return float(trial.user_attrs[params.objective])


def finished(study: optuna.Study) -> int:
    import optuna

    return sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


def step_shapes(params: SearchParams) -> list:
    """The costliest corner of the space (widest, most heads, rt_lib.training.footprint), for every trial."""
    from rt_lib.experiments.miiii_common import step_shapes as miiii_shapes

    corner = {k: max(v) for k, v in params.space.items() if k in ("d_model", "n_heads")}
    trial = params.trial_params(corner)
    return [replace(s, label=f"trial {s.label}", runs=params.n_trials)
            for s in miiii_shapes(trial)]


EXPERIMENT = Experiment(NAME, SearchParams, title="Optuna search over Table 1's space",
                        step_shapes=step_shapes)


def run_trials(params: SearchParams, n: int, worker: int = 0) -> optuna.Study:
    """Add ``n`` trials to the study (a worker: any number of these may run at once)."""
    study = open_study(params, worker)
    study.optimize(lambda t: objective(params, t), n_trials=n)
    return study


def run_until(params: SearchParams) -> optuna.Study:
    """Run trials until the study has ``n_trials`` finished ones (none if it already has):
    re-running the notebook reuses the study instead of growing it."""
    study = open_study(params)
    missing = params.n_trials - finished(study)
    executor = current_executor()
    if missing > 0 and executor.kind != "inline":
        # Batches of trials as jobs (--executor local|slurm), each a worker joining the study
        # with a sampler seed of its own; a rerun after a failed job asks only for the trials
        # still missing.
        at_once = (executor.array_parallelism if executor.kind == "slurm"
                   else executor.local_parallelism or default_jobs())
        n_jobs, done = min(missing, at_once), finished(study)
        sizes = [missing // n_jobs + (i < missing % n_jobs) for i in range(n_jobs)]
        resume = resume_dir(NAME)
        run_jobs([Job(f"trials{done}_batch{i}", add_trials, (params, size, done + i + 1))
                  for i, size in enumerate(sizes)],
                 f"{resume}/jobs" if resume else str(results_dir(NAME) / "jobs"), executor, NAME)
        return open_study(params)
    if missing > 0:
        study.optimize(lambda t: objective(params, t), n_trials=missing)
    return study


def add_trials(params: SearchParams, n: int, worker: int) -> int:
    """A submitted batch: ``n`` trials as worker ``worker``; returns the study's finished count."""
    return finished(run_trials(params, n, worker))


def trials_table(study: optuna.Study) -> pd.DataFrame:
    """One row per finished trial: its hyperparameters, objective and scores, best first."""
    import optuna

    rows = []
    for t in study.trials:
        if t.state != optuna.trial.TrialState.COMPLETE:
            continue
        rows.append({"trial": t.number, **t.params, "value": t.value,
                     **{k: v for k, v in t.user_attrs.items() if k != "worker"}})
    table = pd.DataFrame(rows)
    if len(table):
        ascending = study.direction == optuna.study.StudyDirection.MINIMIZE
        table = table.sort_values(["value", "trial"], ascending=[ascending, True])
    return table.reset_index(drop=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Join a miiii Optuna study as one worker.")
    ap.add_argument("--storage", default=None, help="SQLAlchemy URL (default: SQLite under results/)")
    ap.add_argument("--study", default="miiii_table1", help="study name")
    ap.add_argument("--trials", type=int, default=1, help="trials this worker adds")
    ap.add_argument("--space", default=None, help="JSON dict name -> values (default Table 1)")
    ap.add_argument("--fixed", default="{}", help="JSON dict of fixed MiiiiParams fields")
    ap.add_argument("--objective", default="valid_loss_last10", choices=list(OBJECTIVES))
    ap.add_argument("--worker", type=int, default=None, help="sampler seed offset (default: pid)")
    args = ap.parse_args(argv)
    params = SearchParams(space=json.loads(args.space) if args.space else dict(TABLE1_SPACE),
                          fixed=json.loads(args.fixed), storage=args.storage, n_trials=1,
                          study_name=args.study, objective=args.objective)
    worker = args.worker if args.worker is not None else os.getpid()
    study = run_trials(params, args.trials, worker)
    print(f"study {params.study_name!r}: {finished(study)} finished trials; "
          f"best {study.best_value:.4f} with {study.best_params}")


def check_claims(best: pd.Series, params: SearchParams, claims: Claims) -> None:
    """Record Table 2's claim: the search over the paper's space, at p = 113 with the authors'
    objective, returns Table 2's settings (:data:`TABLE2`).  A search at another p, over a
    space without Table 2's values, or with another objective cannot test it: not checked."""
    p = params.fixed.get("p", MiiiiParams.p)
    missing = [n for n, v in TABLE2.items()
               if n in params.space and not any(abs(float(x) - v) < 1e-9 for x in params.space[n])]
    if p != 113 or missing or params.objective != "valid_loss_last10":
        why = (f"the search runs at p = {p}" if p != 113 else
               f"its space lacks Table 2's {', '.join(missing)}" if missing else
               f"its objective is {params.objective}, not the authors' valid_loss_last10")
        claims.not_checked("mi-optuna-table2", f"{why}: Table 2's choice is for p = 113, the "
                           "authors' objective and a space holding its values (the paper profile)")
        return
    found = {n: float(best[n]) for n in TABLE2 if n in params.space}
    differ = {n: v for n, v in found.items() if abs(v - TABLE2[n]) > 1e-9}
    claims.check("mi-optuna-table2", "best trial: " + ", ".join(f"{n} {v:g}" for n, v in found.items()),
                 bool_verdict(not differ, "every searched setting equal to Table 2's"
                              + (f"; differ: {sorted(differ)}" if differ else "")))


if __name__ == "__main__":
    main()

