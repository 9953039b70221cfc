"""Notebook 11's comparisons at equal epochs, over seeds: which budget shows them.

    .venv/bin/python benchmarks/miiii_budgets.py seeds=0,1,2 epochs=10000 jobs=2 \\
        out=benchmarks/results/miiii_budgets.csv

Trains, per seed, every run notebook 11 compares with T_miiii, all for the same ``epochs``, with
the CPU profile's settings (``MiiiiParams`` defaults; any ``key=value`` of its fields overrides):
T_miiii, T_miiii with λ = 0 (at its own recipe, as notebook 11 trains it: ``lambda_zero_lr``,
``lambda_zero_weight_decay``; ``lambda_zero_weight_decay=null`` trains it at T_miiii's), T_miiii
with dropout 0, T_nanda, T_basis, and notebook 15's random transformer (embeddings alone trained)
on T_miiii and T_nanda.  Each run is exactly the one
notebook 11 (or 15) makes with those settings and that seed; the evaluations are every
``every`` epochs instead of log-spaced, so that every run is read at the same epochs.

Writes one row per (run, seed, evaluation) to ``out`` (appended by each run as it finishes, so an
interrupted benchmark keeps the runs done), then prints, at each epoch of ``at``, the
comparisons of notebooks 11 and 15 over the seeds with rt_lib.claims.verdicts' margin (three seeds a
side, ranges apart).  ``summary=PATH`` prints the table of a CSV written before, training
nothing.  One torch thread per run, ``jobs`` runs at a time (on 2 cores never beside other work
when the wall times matter).
"""

from __future__ import annotations

import dataclasses
import multiprocessing as mp
import signal
import sys
import time
import typing
from pathlib import Path

import pandas as pd

from rt_lib.claims.verdicts import larger
from rt_lib.experiments.miiii_common import MiiiiParams
from rt_lib.runtime.params import coerce, load_value
from rt_lib.training.train import train

#: run name -> (variant, overrides of MiiiiParams, grokfast on)
RUNS: dict[str, tuple[str, dict[str, typing.Any], bool]] = {
    "T_miiii": ("miiii", {}, True),
    "T_miiii λ=0": ("miiii", {}, False),
    "T_miiii dropout 0": ("miiii", {"dropout": 0.0}, True),
    "T_nanda": ("nanda", {}, True),
    "T_basis": ("basis", {}, True),
    "random T_miiii": ("miiii", {"trainable": "embeddings"}, True),
    "random T_nanda": ("nanda", {"trainable": "embeddings"}, True),
}


def parse(argv: list[str]) -> dict[str, typing.Any]:
    opts: dict[str, typing.Any] = {"seeds": [0, 1, 2], "epochs": 10000, "every": 250, "jobs": 2,
                                   "out": "benchmarks/results/miiii_budgets.csv",
                                   "runs": list(RUNS), "at": None, "summary": None, "params": {}}
    hints = typing.get_type_hints(MiiiiParams)
    for kv in argv:
        key, _, raw = kv.partition("=")
        if key in ("seeds", "at"):
            opts[key] = [int(s) for s in raw.split(",")]
        elif key in ("epochs", "every", "jobs"):
            opts[key] = int(raw)
        elif key in ("out", "summary"):
            opts[key] = raw
        elif key == "runs":
            opts["runs"] = raw.split(",")
            unknown = set(opts["runs"]) - set(RUNS)
            if unknown:
                raise SystemExit(f"runs: unknown {sorted(unknown)}; known: {list(RUNS)}")
        elif key in hints and key not in ("seed", "epochs", "variants"):
            try:  # as --set reads a value: YAML with Python's numbers, checked against the field
                opts["params"][key] = coerce(key, load_value(raw), hints[key])
            except (TypeError, ValueError) as err:
                raise SystemExit(str(err)) from None
        else:
            raise SystemExit(f"unknown setting {key!r}")
    return opts


def one_run(job: tuple[str, int, int, int, dict, str]) -> str:
    name, seed, epochs, every, overrides, out = job
    variant, own, grokfast = RUNS[name]
    params = MiiiiParams(**(overrides | own | {"seed": seed, "epochs": epochs,
                                               "baseline_epochs": None, "threads": 1}))
    lamb = params.grokfast_lambda if grokfast else 0.0
    if not grokfast:  # as notebook 11 trains its λ = 0 run: at its own lr and weight decay
        params = params.lambda_zero_params()
    task = params.task(variant)
    config = dataclasses.replace(params.train_config(lamb, None, epochs), eval_log_points=None,
                                 eval_every=every, progress=False)
    start = time.perf_counter()
    h = train(params.model(task), task, config, grad_hook=params.grokfast(lamb)).history
    seconds = time.perf_counter() - start
    cols = ["train_acc", "valid_acc"] + [c for c in h if c.startswith("valid_acc_q")]
    # long rows (run, seed, step, metric, value): the runs have different heads
    rows = h[["step"] + cols].melt(id_vars="step", var_name="metric").assign(
        run=name, seed=seed, ms_per_epoch=round(1000 * seconds / epochs, 1))
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:  # one write per run: rows of runs that finished survive a kill
        rows.to_csv(f, header=f.tell() == 0, index=False)
    return f"{name} seed {seed}: {seconds:.0f} s, valid {h['valid_acc'].iloc[-1]:.3f}"


def heads(values: pd.DataFrame, level: float = 0.95) -> int:
    """Heads at validation accuracy >= ``level`` among one run's rows at one epoch."""
    per_head = values[values["metric"].str.startswith("valid_acc_q")]
    return int((per_head["value"] >= level).sum())


def summary(frame: pd.DataFrame, at: list[int] | None) -> pd.DataFrame:
    """Per epoch of ``at``: each run's validation accuracy over seeds, and notebook 11's and 15's
    comparisons with their verdicts (rt_lib.claims.verdicts.larger: three seeds a side, ranges apart)."""
    last = int(frame["step"].max())
    at = at or sorted({e for e in (1500, 3000, 4000, 5000, 6000, 8000, 10000, last) if e <= last})
    rows = []
    for epoch in at:
        now = frame[frame["step"] == epoch]
        if now.empty:
            continue
        acc: dict[str, list[float]] = {}
        n_heads: dict[str, list[int]] = {}
        for (run, _), values in now.groupby(["run", "seed"], sort=True):
            acc.setdefault(run, []).append(
                float(values.loc[values["metric"] == "valid_acc", "value"].iloc[0]))
            n_heads.setdefault(run, []).append(heads(values))
        row: dict[str, typing.Any] = {"epoch": epoch}
        for run in acc:
            row[f"{run} valid"] = " ".join(f"{a:.2f}" for a in acc[run])
            row[f"{run} heads"] = " ".join(map(str, n_heads[run]))
        for claim, a, b in (("grokfast (valid)", "T_miiii", "T_miiii λ=0"),
                            ("dropout (valid)", "T_miiii", "T_miiii dropout 0"),
                            ("dropout (heads)", "T_miiii", "T_miiii dropout 0"),
                            ("trained vs random (heads)", "T_miiii", "random T_miiii")):
            if a in acc and b in acc:
                source = n_heads if "heads" in claim else acc
                row[claim] = larger(source[a], source[b]).status
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str]) -> None:
    opts = parse(argv)
    if opts["summary"]:
        print(summary(pd.read_csv(opts["summary"]), opts["at"]).T.to_string())
        return
    if Path(opts["out"]).exists():
        raise SystemExit(f"{opts['out']} exists: move it away or name another out=")
    jobs = [(name, seed, opts["epochs"], opts["every"], opts["params"], opts["out"])
            for seed in opts["seeds"] for name in opts["runs"]]
    print(f"{len(jobs)} runs of {opts['epochs']} epochs, {opts['jobs']} at a time", flush=True)
    with mp.get_context("spawn").Pool(opts["jobs"]) as pool:
        # SIGTERM to this process alone (kill PID) leaves through the pool's exit, which stops
        # the workers; the default would end this process and leave them training as orphans
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        for line in pool.imap_unordered(one_run, jobs):
            print(line, flush=True)
    print(summary(pd.read_csv(opts["out"]), opts["at"]).T.to_string())


if __name__ == "__main__":
    main(sys.argv[1:])
