"""Restarts as one batched model against the same restarts one by one (issue 6 groundwork).

    .venv/bin/python benchmarks/bench_batched.py [n_restarts] [width] [steps]

Random transformers (embeddings trained) on modular addition p = 59, full batch, one thread;
prints the wall time of each way and the ratio.
"""

from __future__ import annotations

import sys
import time

from rt_lib.batched import train_batched
from rt_lib.model import TransformerConfig, build_model
from rt_lib.tasks.modular import modular_addition
from rt_lib.train import TrainConfig, train


def main(n: int = 10, width: int = 128, steps: int = 100) -> None:
    task = modular_addition(59)
    cfg = TransformerConfig(d_vocab=59, n_ctx=2, d_model=width, n_heads=4, d_vocab_out=59,
                            trainable="embeddings")
    tcfgs = [TrainConfig(steps=steps, batch_size=None, lr=3e-3, warmup_steps=10,
                         eval_every=steps, threads=1, progress=False, seed=s) for s in range(n)]
    start = time.perf_counter()
    for i, tcfg in enumerate(tcfgs):
        train(build_model(cfg, i), task, tcfg)
    sequential = time.perf_counter() - start
    start = time.perf_counter()
    train_batched([build_model(cfg, i) for i in range(n)], task, tcfgs)
    batched = time.perf_counter() - start
    print(f"{n} restarts, width {width}, {steps} full-batch steps (p = 59), one thread")
    print(f"| way | wall s | steps/s per restart |\n| --- | --- | --- |")
    print(f"| sequential | {sequential:.1f} | {n * steps / sequential:.1f} |")
    print(f"| batched | {batched:.1f} | {n * steps / batched:.1f} |")
    print(f"speed-up: {sequential / batched:.2f}x")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
