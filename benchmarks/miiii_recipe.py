"""The CPU-recipe search for notebook 11: T_miiii as notebook 11 trains it, over seeds.

    .venv/bin/python benchmarks/miiii_recipe.py seeds=0,1,2 init=he_jax dropout_mask=batch \\
        dropout_at=residual train_fraction=0.9 epochs=10000

Every ``key=value`` is a field of notebook 11's parameters (``MiiiiParams``; unset fields keep the
CPU profile's defaults), so a row here is exactly the T_miiii run notebook 11 would make with those
values and that ``seed`` (model, split, dropout and grokfast draws all derive from it).  ``seeds``
(comma-separated) repeats the run per seed: the outcome at a fixed epoch is chaotic, so a setting
is judged on three or more.  Nothing is saved; one torch thread per process (run two side by side
on two cores, never while other work runs if the wall times matter).  For the very trajectory
notebook 11 records, run under its CPU kernels first (``source scripts/kernel_env.sh``): other
kernels give another run of the same distribution, not the same digits.

Prints per seed: wall time, ms per epoch, the last training loss and accuracy (what a recipe is
chosen on), the epoch train accuracy reached 0.99, the heads in the
order they generalised (validation accuracy >= 0.95 and >= 0.99 from that evaluation on), the
epoch from which every head stayed >= 0.99, and the number of heads >= 0.99 at a few epochs.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import typing

from rt_lib.experiments.miiii_common import MiiiiParams
from rt_lib.training.train import train

CHECKPOINTS = (1500, 3000, 5000, 10000, 15000, 20000)  # epochs at which the heads are counted


def parse(argv: list[str]) -> tuple[dict[str, typing.Any], list[int]]:
    hints = typing.get_type_hints(MiiiiParams)
    fields = {f.name for f in dataclasses.fields(MiiiiParams)}
    values: dict[str, typing.Any] = {}
    seeds = [0]
    for kv in argv:
        key, _, raw = kv.partition("=")
        if key == "seeds":
            seeds = [int(s) for s in raw.split(",")]
            continue
        if key not in fields or key == "seed":
            raise SystemExit(f"unknown setting {key!r}; settings: seeds and {sorted(fields - {'seed'})}")
        hint = hints[key]
        if raw == "None":
            values[key] = None
        elif hint in (int, int | None):
            values[key] = int(raw)
        elif hint in (float, float | None):
            values[key] = float(raw)
        elif hint is bool:
            values[key] = raw.lower() in ("1", "true", "yes")
        else:
            values[key] = raw
    return values, seeds


def first_stable(steps: list[int], ok: list[bool]) -> int | None:
    """The first logged epoch from which ``ok`` holds at every later evaluation."""
    return next((steps[i] for i in range(len(ok)) if all(ok[i:])), None)


def one_run(values: dict[str, typing.Any], seed: int) -> dict[str, typing.Any]:
    params = MiiiiParams(**(values | {"seed": seed, "variants": ("miiii",), "lambda_zero": False,
                                     "dropout_zero": False}))
    task = params.task("miiii")
    config = dataclasses.replace(params.train_config(params.grokfast_lambda, None), progress=False)
    start = time.perf_counter()
    h = train(params.model(task), task, config, grad_hook=params.grokfast(params.grokfast_lambda)).history
    seconds = time.perf_counter() - start
    steps = h["step"].astype(int).tolist()
    row: dict[str, typing.Any] = {"seed": seed, "wall_s": round(seconds),
                                  "ms_per_epoch": round(1000 * seconds / params.epochs, 1)}
    # the training side, on which a recipe is chosen (never the validation split's numbers)
    row["final_train_loss"] = round(float(h["train_loss"].iloc[-1]), 4)
    row["final_train_acc"] = round(float(h["train_acc"].iloc[-1]), 3)
    t99 = h.loc[h["train_acc"] >= 0.99, "step"]
    row["train_0.99_at"] = int(t99.iloc[0]) if len(t99) else None
    for level in (0.95, 0.99):
        at = {q: first_stable(steps, (h[f"valid_acc_q{q}"] >= level).tolist()) for q in task.qs}
        done = sorted((e, q) for q, e in at.items() if e is not None)
        row[f"order_{level}"] = [f"{q}@{e}" for e, q in done]
    every = first_stable(steps, [all(h[f"valid_acc_q{q}"].iloc[i] >= 0.99 for q in task.qs) for i in range(len(h))])
    row["every_head_0.99_from"] = every
    for epoch in (c for c in CHECKPOINTS if c <= params.epochs):
        last = h.loc[h["step"] <= epoch].iloc[-1]
        row[f"heads_0.99_at_{epoch}"] = int(sum(last[f"valid_acc_q{q}"] >= 0.99 for q in task.qs))
    row["final_valid_acc"] = {q: round(float(h[f"valid_acc_q{q}"].iloc[-1]), 3) for q in task.qs}
    return row


def main(argv: list[str]) -> None:
    values, seeds = parse(argv)
    print(json.dumps({"settings": values, "seeds": seeds}), flush=True)
    for seed in seeds:
        print(json.dumps(one_run(values, seed), default=lambda v: v.item()), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
