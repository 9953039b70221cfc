"""One miiii training run for the CPU-recipe search (issue 5): which heads q generalise, when.

    .venv/bin/python benchmarks/miiii_recipe.py p=29 frac=0.8 lr=3e-3 lamb=2 drop=0.2 steps=12000

Prints the settings, wall time, ms per epoch, the epoch at which train accuracy reached 99 %, and
per prime q the first logged epoch with validation accuracy >= 0.95 and the final accuracy.
Full batch, AdamW betas (0.9, 0.98), constant lr, no clipping, grokfast from the first gradient.
"""

from __future__ import annotations

import json
import sys
import time

from rt_lib.grokfast import Grokfast
from rt_lib.model import build_model, miiii_config
from rt_lib.tasks.miiii import miiii_task
from rt_lib.train import TrainConfig, train

DEFAULTS = dict(p=29, frac=0.5, d=128, heads=4, lr=1e-3, wd=1.0, lamb=2.0, alpha=0.98, init="grad",
                drop=0.1, steps=3000, variant="miiii", combine="sum", threads=1, seed=0)


def main(argv: list[str]) -> None:
    a = dict(DEFAULTS)
    for kv in argv:
        key, value = kv.split("=", 1)
        if key not in a:
            raise SystemExit(f"unknown setting {key!r}; settings: {sorted(a)}")
        a[key] = value if isinstance(a[key], str) else type(a[key])(value)
    task = miiii_task(a["p"], a["variant"], split="code", train_fraction=a["frac"], combine=a["combine"])
    cfg = miiii_config(a["p"], d_model=a["d"], n_heads=a["heads"], dropout=a["drop"], out_sizes=task.qs)
    model = build_model(cfg, a["seed"])
    tcfg = TrainConfig(steps=a["steps"], batch_size=None, lr=a["lr"], weight_decay=a["wd"],
                       betas=(0.9, 0.98), warmup_steps=0, schedule="constant", grad_clip=None,
                       eval_log_points=40, threads=a["threads"], progress=False, seed=a["seed"])
    hook = Grokfast(a["alpha"], a["lamb"], a["init"]) if a["lamb"] > 0 else None
    start = time.perf_counter()
    h = train(model, task, tcfg, grad_hook=hook).history
    seconds = time.perf_counter() - start
    train99 = h.loc[h["train_acc"] >= 0.99, "step"]
    first = {q: (int(h.loc[h[f"valid_acc_q{q}"] >= 0.95, "step"].iloc[0])
                 if (h[f"valid_acc_q{q}"] >= 0.95).any() else None) for q in task.qs}
    final = {q: round(float(h[f"valid_acc_q{q}"].iloc[-1]), 2) for q in task.qs}
    print(json.dumps(a))
    print(f"{seconds:.0f} s, {1000 * seconds / a['steps']:.1f} ms/epoch; train 99 % at epoch "
          f"{int(train99.iloc[0]) if len(train99) else None}; valid acc {float(h['valid_acc'].iloc[-1]):.3f}")
    print("first epoch with valid acc >= 0.95:", first)
    print("final valid acc:", final)


if __name__ == "__main__":
    main(sys.argv[1:])
