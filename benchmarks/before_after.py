"""Before/after: one optimiser step in the same plain loop, for whichever rt_lib is imported.

    PYTHONPATH=/path/to/old/checkout .venv/bin/python benchmarks/before_after.py before
    .venv/bin/python benchmarks/before_after.py after

Runs with older checkouts too (no train_step, no dropout_at needed), so two commits can be timed
side by side on the same machine: modular addition p = 199 (batch 4000, random, widths 16 and 128,
one thread) and the miiii step at p = 113 (paper split, one thread) and p = 37 (CPU profile, two
threads).  Prints milliseconds per step; asserts nothing.
"""
import sys
import time

import torch

from rt_lib.model import TransformerConfig, build_model, miiii_config

try:  # the shortcut by name (since the plain forward); before, the forward took it itself
    from rt_lib.model.fast_paths import last_logits
except ImportError:
    def last_logits(model, x):
        return model(x, last_only=True)
from rt_lib.tasks.miiii import miiii_task
from rt_lib.tasks.modular import modular_addition
from rt_lib.training.grokfast import Grokfast
from rt_lib.training.train import TrainConfig, make_optimizer

tag = sys.argv[1]
def timeit(model, task, x, y, tcfg, hook=None, n=10, threads=1):
    torch.set_num_threads(threads)
    opt = make_optimizer(model, tcfg)
    model.train()

    def step(i):
        logits = last_logits(model, x)
        loss = task.loss(logits, y)
        opt.zero_grad()
        loss.backward()
        if hook:
            hook(model, i)
        if tcfg.grad_clip:
            trained = [p for p in model.parameters() if p.grad is not None]
            torch.nn.utils.clip_grad_norm_(trained, tcfg.grad_clip)
        opt.step()

    for i in range(2):
        step(i)
    t = time.perf_counter()
    for i in range(n):
        step(i)
    return (time.perf_counter() - t) / n * 1e3


# the authors' modular-addition recipe (what TrainConfig's defaults were before it had none)
PAPER = dict(steps=1000, batch_size=4000, lr=1e-3, weight_decay=1e-3, warmup_steps=500)
task = modular_addition(199, 0.95, 0)
x, y = task.get_batch(0, 4000, 0)
for w in (16, 128):
    m = build_model(TransformerConfig(d_vocab=199, n_ctx=2, d_model=w, n_heads=4, trainable="embeddings"), 0)
    ms = timeit(m, task, x, y, TrainConfig(**PAPER), n=20 if w == 16 else 8)
    print(tag, f"modular p=199 d={w} batch 4000 random: {ms:.1f} ms", flush=True)
for p, d, split, thr in ((113, 256, "paper", 1), (37, 128, "code", 2)):
    task = miiii_task(p, "miiii", split=split, train_fraction=0.8 if split == "code" else None)
    x, y = task.get_batch(0, None, 0)
    tc = TrainConfig(**PAPER | dict(lr=3e-3, weight_decay=1, betas=(0.9, 0.98), grad_clip=None))
    places = ["gpt2"] + (["residual"] if "dropout_at" in TransformerConfig.__dataclass_fields__ else [])
    for place in places:
        # each placement with a per-example mask, as this benchmark has always timed it
        kw = {"dropout_at": place, "dropout_mask": "sample"} if len(places) > 1 else {}
        m = build_model(miiii_config(p, d_model=d, n_heads=4, dropout=0.1, **kw), 0)
        ms = timeit(m, task, x, y, tc, Grokfast(0.98, 0.5), n=5 if p == 113 else 30, threads=thr)
        print(tag, f"miiii p={p} d={d} {split} split, {thr} thread(s), dropout {place}: {ms:.1f} ms", flush=True)
