"""The fully trained transformer's own learning rate in notebook 08.

    source scripts/data_env.sh; RT_RESULTS=/tmp/ts_lr .venv/bin/python benchmarks/tinystories_lr.py \\
        lrs=3e-3,1e-2,3e-2 widths=32,64,128 restarts=1 out=benchmarks/results/tinystories_lr.csv

Notebook 08 trains its fully trained transformer at the random transformer's lr (``lr``, 1e-2, the
lr its recipe search chose for the random model).  This script trains the fully trained model
alone with the notebook's CPU profile (``TinyStoriesParams`` defaults: data, steps, batch,
schedule) at each lr of ``lrs`` and each width, ``restarts`` seeds each (restart r has the seed
the notebook gives restart r), and writes one row per run: the mean training loss over the
second half of the logged steps (what the lr is chosen on) and, for the record only, the final
validation cross-entropy (never used to choose).  Then prints, per width, the lr with the lowest
training loss.  Rows are appended per lr, so an interrupted run keeps what it finished.  One torch
thread per process (``RT_THREADS``); run two lrs side by side on two cores with ``lrs=``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from rt_lib.experiments.tinystories import TinyStoriesParams, run


def parse(argv: list[str]) -> dict:
    opts = {"lrs": [3e-3, 1e-2, 3e-2], "widths": [32, 64, 128], "restarts": 1,
            "out": "benchmarks/results/tinystories_lr.csv", "summary": None, "steps": None}
    for kv in argv:
        key, _, raw = kv.partition("=")
        if key == "lrs":
            opts[key] = [float(s) for s in raw.split(",")]
        elif key == "widths":
            opts[key] = [int(s) for s in raw.split(",")]
        elif key in ("restarts", "steps"):  # steps: a quick check of the script (None: the profile's)
            opts[key] = int(raw)
        elif key in ("out", "summary"):
            opts[key] = raw
        else:
            raise SystemExit(f"unknown setting {key!r}; settings: {sorted(opts)}")
    return opts


def one_lr(lr: float, widths: list[int], restarts: int, steps: int | None) -> pd.DataFrame:
    steps_set = {} if steps is None else {"steps": steps, "warmup_steps": 1, "eval_every": 1}
    params = TinyStoriesParams(models=("trained transformer",), widths=tuple(widths),
                               random_widths=(), lr=lr, restarts=restarts, **steps_set)
    result = run(params, save_models=False)
    rows = []
    for (_kind, width, restart), h in result.histories.items():
        late = h[h["step"] > h["step"].max() / 2]
        rows.append({"lr": lr, "width": width, "restart": restart,
                     "train_loss_late": float(late["train_loss"].mean()),
                     "valid_loss": float(h["valid_loss"].iloc[-1]), "steps": int(h["step"].max())})
    return pd.DataFrame(rows)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Per width and lr: the training loss (mean over restarts) and the lr it picks."""
    table = frame.groupby(["width", "lr"]).agg(train_loss_late=("train_loss_late", "mean"),
                                               valid_loss=("valid_loss", "mean"),
                                               restarts=("restart", "count")).reset_index()
    best = table.loc[table.groupby("width")["train_loss_late"].idxmin(), ["width", "lr"]]
    table["chosen"] = [(w, lr) in set(map(tuple, best.to_numpy())) for w, lr in
                       zip(table["width"], table["lr"])]
    return table.round(4)


def main(argv: list[str]) -> None:
    opts = parse(argv)
    if opts["summary"]:
        print(summary(pd.read_csv(opts["summary"])).to_string(index=False))
        return
    out = Path(opts["out"])
    out.parent.mkdir(parents=True, exist_ok=True)
    for lr in opts["lrs"]:
        start = time.perf_counter()
        rows = one_lr(lr, opts["widths"], opts["restarts"], opts["steps"])
        with open(out, "a") as f:
            rows.to_csv(f, header=f.tell() == 0, index=False)
        print(f"lr {lr:g}: {time.perf_counter() - start:.0f} s", flush=True)
    print(summary(pd.read_csv(out)).to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1:])
