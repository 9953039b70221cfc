"""Training throughput at the authors' modular-addition config (Zhong & Andreas, SPEC A task 1).

    .venv/bin/python benchmarks/bench_train.py            # widths 128 and 512, one thread
    .venv/bin/python benchmarks/bench_train.py --widths 128 --steps 5 --threads 2

p = 199, batch 4000, 2 layers, 4 heads, AdamW step included.  For each width, random
(embeddings only) and fully trained, it times full optimiser steps with the whole sequence
computed in fp32 (what a plain implementation does), with only the scored last position computed
in the last block, and with that plus bf16 autocast.  FLOPs are counted by torch's
FlopCounterMode on one step (forward + backward), so GFLOP/s is what the step really needed.
Reference: the authors' HF GPT-2 code ran 2.9 steps/s (width 128, random) and 0.38 (width 512)
on this kind of machine with one thread.  A benchmark, not a test: it prints, it asserts nothing.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from rt_lib.model import TransformerConfig, build_model
from rt_lib.seeding import set_threads
from rt_lib.tasks import modular_addition
from rt_lib.train import TrainConfig, make_optimizer

AUTHORS_STEPS_PER_S = {(128, "embeddings"): 2.9, (512, "embeddings"): 0.38}


def one_step(model, opt, x, y, last_only: bool, bf16: bool) -> None:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = model(x, last_only=last_only)
    if not last_only:
        logits = logits[:, -1]
    loss = torch.nn.functional.cross_entropy(logits.float(), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def measure(width: int, trainable: str, last_only: bool, bf16: bool, steps: int,
            batch: int, p: int) -> dict:
    task = modular_addition(p, 0.95, 0)
    cfg = TransformerConfig(d_vocab=p, n_ctx=2, d_model=width, n_layers=2, n_heads=4,
                            trainable=trainable)
    model = build_model(cfg, 0)
    opt = make_optimizer(model, TrainConfig(progress=False))
    x, y = task.get_batch(0, batch, seed=0)
    with FlopCounterMode(display=False) as counter:
        one_step(model, opt, x, y, last_only, bf16)
    flops = counter.get_total_flops()
    one_step(model, opt, x, y, last_only, bf16)  # warm-up (allocator, oneDNN kernels)
    start = time.perf_counter()
    for _ in range(steps):
        one_step(model, opt, x, y, last_only, bf16)
    seconds = (time.perf_counter() - start) / steps
    return {"steps_per_s": 1 / seconds, "gflops": flops / seconds / 1e9,
            "gflop_per_step": flops / 1e9}


def matmul_peak(threads: int, dtype: torch.dtype, n: int = 2048) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(2):
        a @ b
    reps, start = 5, time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per configuration")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=4000)
    parser.add_argument("--p", type=int, default=199)
    args = parser.parse_args()
    set_threads(args.threads)
    peak32, peak16 = matmul_peak(args.threads, torch.float32), matmul_peak(args.threads, torch.bfloat16)
    print(f"threads={args.threads}  matmul peak: fp32 {peak32:.0f} GFLOP/s, bf16 {peak16:.0f} GFLOP/s")
    variants = [("full sequence, fp32", False, False), ("last position, fp32", True, False),
                ("last position, bf16", True, True)]
    header = (f"{'width':>5} {'trainable':<11} {'variant':<21} {'steps/s':>8} {'GFLOP/step':>10} "
              f"{'GFLOP/s':>8} {'% peak':>7} {'vs authors':>10}")
    print(header)
    print("-" * len(header))
    for width in args.widths:
        for trainable in ("embeddings", "all"):
            for name, last_only, bf16 in variants:
                r = measure(width, trainable, last_only, bf16, args.steps, args.batch, args.p)
                ref = AUTHORS_STEPS_PER_S.get((width, trainable))
                ratio = f"{r['steps_per_s'] / ref:.2f}x" if ref else "-"
                peak = peak16 if bf16 else peak32
                print(f"{width:>5} {trainable:<11} {name:<21} {r['steps_per_s']:>8.2f} "
                      f"{r['gflop_per_step']:>10.1f} {r['gflops']:>8.1f} "
                      f"{100 * r['gflops'] / peak:>6.0f}% {ratio:>10}", flush=True)


if __name__ == "__main__":
    main()
