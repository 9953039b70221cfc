"""Notebooks 05 and 10 with the baselines their claims need, at longer budgets.

    # the runs in benchmarks/results/ (the first on an H200, stopped by its time limit after the
    # 1,500-step budget; the second on the project's 2-core CPU, one thread):
    RT_RESULTS=/tmp/bench python3 benchmarks/baselines_scale.py part=memorisation \
        steps=1500,6000,12000 restarts=3 device=cuda out=benchmarks/results/memorisation_budgets_h200.csv
    RT_RESULTS=/tmp/bench RT_THREADS=1 .venv/bin/python benchmarks/baselines_scale.py \
        part=memorisation steps=3000,6000 restarts=1 trained=0 device=cpu \
        out=benchmarks/results/memorisation_plateau_cpu.csv
    # Figure 6's baseline on the 2-core CPU, one thread each (restart 0 only: a 6,000-step run
    # takes about 25 minutes of one core): the trained imitator's lr on its training loss, then
    # both imitators at 6,000 steps (each run's curve in imitation_budgets_cpu.history.csv)
    export RT_RESULTS=/tmp/bench RT_THREADS=1
    .venv/bin/python benchmarks/baselines_scale.py part=imitation steps=1500 restarts=1 \
        targets=256 'models=trained transformer' trained_lrs=1e-3,3e-3,1e-2,3e-4 device=cpu \
        out=benchmarks/results/imitation_lr_cpu.csv
    .venv/bin/python benchmarks/baselines_scale.py part=imitation steps=1500 restarts=1 \
        targets=256 'models=random transformer' device=cpu out=benchmarks/results/imitation_lr_cpu.csv
    .venv/bin/python benchmarks/baselines_scale.py part=imitation steps=6000 restarts=1 \
        targets=256 'models=trained transformer' device=cpu out=benchmarks/results/imitation_budgets_cpu.csv
    .venv/bin/python benchmarks/baselines_scale.py part=imitation steps=6000 restarts=1 \
        targets=256 'models=random transformer' device=cpu out=benchmarks/results/imitation_budgets_cpu.csv

``part=memorisation`` (Table 3, notebook 05): the random transformer trained for each budget of
``steps`` (its lr schedule stretched to the budget, as a notebook run with ``--set steps=N`` does),
to find its plateau: the budget after which its train accuracy no longer rises; the fully trained
one at the first budget (it fits every label there; ``trained=0`` leaves it out).
``part=imitation`` (Figure 6, notebook 10): the random and the fully trained imitator on the
narrowest and widest targets (``targets``) at each budget: whether the trained one succeeds on the
wide target, where the random one fails; ``trained_lrs`` runs the trained imitator at each lr
(its training loss, the mean of its last three evaluations' batches, picks one; never the test
KL) and ``models`` picks the imitators.

Every other setting is the notebook's CPU profile (its ``Params`` defaults); ``device`` picks
where it runs (``auto``: a GPU when there is one).  One row per (budget, model, restart), appended
to ``out`` as each budget finishes, so an interrupted run keeps what it finished.  The restarts
are the notebook's (seed 0, restarts 0..N-1).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from rt_lib.experiments import circuit_imitation, memorisation
from rt_lib.tasks.random_labels import bits_net_of_chance


def parse(argv: list[str]) -> dict:
    opts = {"part": "memorisation", "steps": [1500, 6000, 24000], "restarts": 3,
            "targets": [8, 256], "device": "auto", "out": None, "trained": 1,
            "models": ["random transformer", "trained transformer"], "trained_lrs": [None]}
    for kv in argv:
        key, _, raw = kv.partition("=")
        if key in ("steps", "targets"):
            opts[key] = [int(s) for s in raw.split(",")]
        elif key == "trained_lrs":
            opts[key] = [float(s) for s in raw.split(",")]
        elif key == "models":
            opts[key] = [s.strip() for s in raw.split(",")]
        elif key in ("restarts", "trained"):
            opts[key] = int(raw)
        elif key in ("part", "device", "out"):
            opts[key] = raw
        else:
            raise SystemExit(f"unknown setting {key!r}; settings: {sorted(opts)}")
    if opts["part"] not in ("memorisation", "imitation"):
        raise SystemExit("part must be memorisation or imitation")
    opts["out"] = opts["out"] or f"benchmarks/results/{opts['part']}_budgets.csv"
    return opts


def memorisation_rows(steps: int, restarts: int, device: str, trained: bool) -> pd.DataFrame:
    models = ("random transformer", "trained transformer") if trained else ("random transformer",)
    params = memorisation.MemorisationParams(models=models, steps=steps, restarts=restarts,
                                             eval_every=max(steps // 10, 1), device=device)
    result = memorisation.run(params, save_models=False)
    task = params.task()
    m = result.metrics
    m["net_bits_per_param"] = [bits_net_of_chance(float(a), task) / int(n)
                               for a, n in zip(m["train_acc"], m["trainable_params"])]
    return m[["model", "width", "restart", "train_acc", "net_bits_per_param", "wall_time_s"]]


# the columns of <out>.history.csv, in the order of the files in benchmarks/results/
HISTORY_COLUMNS = ["step", "train_loss", "test_kl", "target_width", "model", "imitator_width",
                   "restart", "steps", "lr", "kl_ratio"]


def imitation_rows(steps: int, restarts: int, device: str, targets: list[int], models: list[str],
                   trained_lr: float | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per run, every run's evaluations) of notebook 10's ``run`` at these settings;
    ``trained_lr`` None: the notebook's own (``ImitationParams.trained_lr``)."""
    lr = {} if trained_lr is None else {"trained_lr": trained_lr}
    params = circuit_imitation.ImitationParams(models=tuple(models), target_widths=tuple(targets),
                                       steps=steps, restarts=restarts,
                                       eval_every=max(steps // 10, 1), device=device, **lr)
    result = circuit_imitation.run(params)
    m = result.metrics
    keys = list(zip(m["target_width"], m["model"], m["imitator_width"], m["restart"]))
    m["lr"] = [params.lr_of(k) for k in m["model"]]
    # the lr is chosen on the training loss (the mean of the last three evaluations' batches),
    # never on the test KL
    m["train_loss_tail"] = [float(result.histories[key]["train_loss"].tail(3).mean())
                            for key in keys]
    curves = pd.concat(  # each run's test KL at every evaluation (one budget's schedule)
        result.histories[key][["step", "train_loss", "test_kl", "kl_ratio"]].assign(
            target_width=tw, model=k, imitator_width=w, restart=r, steps=steps,
            lr=params.lr_of(k))
        for key in keys for tw, k, w, r in [key])[HISTORY_COLUMNS]
    return (m[["target_width", "model", "imitator_width", "lr", "restart", "train_loss_tail",
               "test_kl", "baseline_kl", "kl_ratio", "wall_time_s"]], curves)


def main(argv: list[str]) -> None:
    opts = parse(argv)
    out = Path(opts["out"])
    out.parent.mkdir(parents=True, exist_ok=True)
    for i, steps in enumerate(opts["steps"]):
        start = time.perf_counter()
        if opts["part"] == "memorisation":
            rows = memorisation_rows(steps, opts["restarts"], opts["device"],
                                     trained=i == 0 and bool(opts["trained"]))
            emit(out, opts, steps, rows, start)
        else:
            for lr in opts["trained_lrs"]:
                rows, curves = imitation_rows(steps, opts["restarts"], opts["device"],
                                              opts["targets"], opts["models"], lr)
                emit(out, opts, steps, rows, start)
                with open(out.with_suffix(".history.csv"), "a") as f:
                    curves.to_csv(f, header=f.tell() == 0, index=False)


def emit(out: Path, opts: dict, steps: int, rows: pd.DataFrame, start: float) -> None:
    rows.insert(0, "steps", steps)
    with open(out, "a") as f:
        rows.to_csv(f, header=f.tell() == 0, index=False)
    print(f"{opts['part']}, {steps} steps: {time.perf_counter() - start:.0f} s", flush=True)
    print(rows.drop(columns="wall_time_s").round(4).to_string(index=False), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
