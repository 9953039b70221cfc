"""Training throughput of every configuration the notebooks train, and of the paper configs.

    benchmarks/run.sh                                  # set up, then everything below (~19 min)
    .venv/bin/python benchmarks/bench_all.py --only miiii --threads 1
    .venv/bin/python benchmarks/bench_all.py --groups cpu --seconds 2

For each case: steps/s of the step the notebooks run (``rt_lib.training.train.train_step`` plus drawing the
batch), GFLOP per step counted by torch's ``FlopCounterMode`` (forward + backward), achieved GFLOP/s
and its fraction of the machine's matmul peak (a 2048^2 matmul timed at the start of the same run,
fp32 and bf16), and peak memory (CPU: the case process's peak resident set above its size after
imports; CUDA: ``max_memory_allocated``).  Every case runs in its own process, so peaks do not mix.

Groups: ``cpu`` = each notebook's CPU-profile models; ``paper`` = the paper configurations the
issue names (modular addition p = 199 at widths 16-1024 with the authors' HF GPT-2 side by side
when ``transformers`` is installed, needle at width 1024, miiii p = 113 d = 256 against a plain
eager implementation, bf16 variants); ``restarts`` = 10 seeds trained one after the other vs as one
batched model (``rt_lib.training.batched``).  A benchmark, not a test: it prints, writes
``results/benchmarks/bench_all.csv`` and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from rt_lib.runtime.io import results_dir
from rt_lib.runtime.seeding import set_threads
from rt_lib.training.footprint import peak_resident_bytes, resident_bytes
from rt_lib.training.train import TrainConfig, make_optimizer, resolve_device, train_step

HERE = Path(__file__).resolve().parent
AUTHORS_STEPS_PER_S = {128: 2.9, 512: 0.38}  # the issue: their HF GPT-2, random, one thread


@dataclass
class Setup:
    """What one case trains: a model, a task, its TrainConfig and grokfast hook, or any other
    ``step()`` (the authors' GPT-2, the plain miiii) with its own FLOP count."""

    model: nn.Module | None = None
    task: object = None
    cfg: TrainConfig | None = None
    hook: Callable | None = None
    step: Callable[[], None] | None = None


# ---------------------------------------------------------------- cases: the notebooks' CPU profile

def _grid_cases(label: str, params) -> dict[str, Callable[[], Setup]]:
    """One case per (model kind, width) of a restart-grid notebook's parameters."""
    from rt_lib.experiments.common import model_config
    from rt_lib.model import build_model

    out = {}
    for width in params.widths:
        for kind in params.models:
            def build(kind=kind, width=width) -> Setup:
                task = params.task() if not hasattr(params, "target_widths") else params.task(
                    params.target_widths[-1])
                cfg = model_config(kind, task, width, params.n_layers, params.n_heads,
                                   **params.transformer_overrides())
                tcfg = replace(params.train_config(), **params.kind_overrides().get(kind, {}))
                return Setup(build_model(cfg, 0), task, tcfg)
            out[f"{label} · {kind} d={width}"] = build
    return out


def _miiii_cases(label: str, params, variants=None, lamb=None) -> dict[str, Callable[[], Setup]]:
    out = {}
    for variant in variants or params.variants:
        def build(variant=variant) -> Setup:
            task = params.task(variant)
            lam = params.grokfast_lambda if lamb is None else lamb
            return Setup(params.model(task), task, params.train_config(lam, None), params.grokfast(lam))
        out[f"{label} · T_{variant} d={params.d_model}"] = build
    return out


def cpu_cases() -> dict[str, Callable[[], Setup]]:
    from rt_lib.experiments import (
        circuit_imitation,
        decimal_addition,
        embedding_ablations,
        memorisation,
        modular_addition,
        needle_in_a_haystack,
        parentheses,
        tinystories,
    )
    from rt_lib.experiments.miiii_common import MiiiiParams
    from rt_lib.experiments.miiii_search import SearchParams
    from rt_lib.experiments.random_miiii import RandomMiiiiParams

    cases = {}
    cases |= _grid_cases("01 modular p=59", modular_addition.ModularAdditionParams())
    cases |= _grid_cases("02 needle", needle_in_a_haystack.NeedleParams())
    cases |= _grid_cases("03 decimal", decimal_addition.DecimalParams())
    cases |= _grid_cases("04 parentheses", parentheses.ParenthesesParams())
    cases |= _grid_cases("05 memorisation", memorisation.MemorisationParams())
    ab = embedding_ablations.AblationParams()
    for task in ab.tasks:
        cases |= _grid_cases(f"06 ablation {task}", ab.params_for(task))
    if os.environ.get("RT_TINYSTORIES"):
        cases |= _grid_cases("08 tinystories", tinystories.TinyStoriesParams())
    cases |= _grid_cases("10 imitation", circuit_imitation.ImitationParams())
    cases |= _miiii_cases("11 miiii p=37", MiiiiParams())
    search = SearchParams(fixed={"p": 11, "epochs": 1500})
    cases |= _miiii_cases("14 search trial p=11", search.trial_params({"d_model": 128, "n_heads": 4}))
    rnd = RandomMiiiiParams()
    for w in rnd.widths:
        cases |= _miiii_cases("15 random miiii", rnd.random(w))
    return cases


# ---------------------------------------------------------------------- cases: paper configurations

def _authors_gpt2(width: int, p: int = 199, batch: int = 4000) -> Setup:
    """The authors' model as they ran it: Hugging Face GPT-2, 2 layers, 4 heads, only wte, wpe
    and lm_head trained, logits at every position (here the 2-token input [a, b]: the least work
    their setup can do), AdamW + clipping."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from rt_lib.tasks.modular import modular_addition

    cfg = GPT2Config(vocab_size=p, n_positions=2, n_embd=width, n_layer=2, n_head=4,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     activation_function="gelu_new", tie_word_embeddings=False)
    model = GPT2LMHeadModel(cfg)
    for name, param in model.named_parameters():
        param.requires_grad_(name.startswith(("transformer.wte", "transformer.wpe", "lm_head")))
    opt = torch.optim.AdamW([p_ for p_ in model.parameters() if p_.requires_grad], lr=1e-3,
                            weight_decay=1e-3)
    task = modular_addition(p, 0.95, 0)

    def step() -> None:
        x, y = task.get_batch(0, batch, 0)
        loss = nn.functional.cross_entropy(model(input_ids=x).logits[:, -1], y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_([p_ for p_ in model.parameters() if p_.requires_grad], 1.0)
        opt.step()
    return Setup(model=model, step=step)


def _plain_miiii(params) -> Setup:
    from plain_miiii import PlainMiiii, plain_loss

    task = params.task("miiii")
    model = PlainMiiii(params.p, task.qs, params.d_model, params.n_heads, params.dropout)
    cfg = params.train_config(params.grokfast_lambda, None)
    opt = make_optimizer(model, cfg)
    hook = params.grokfast(params.grokfast_lambda)

    def step() -> None:
        x, y = task.get_batch(0, None, 0)
        loss = plain_loss(model(x), y, task.loss_weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        hook(model, 0)
        opt.step()
    return Setup(model=model, step=step)


def paper_cases() -> dict[str, Callable[[], Setup]]:
    import yaml

    from rt_lib.experiments import modular_addition, needle_in_a_haystack
    from rt_lib.experiments.common import model_config
    from rt_lib.experiments.miiii_common import MiiiiParams
    from rt_lib.model import build_model

    def paper(name: str) -> dict:
        return yaml.safe_load((HERE.parent / "configs" / "paper" / f"{name}.yaml").read_text())

    mod = modular_addition.ModularAdditionParams(**paper(modular_addition.NAME))
    ndl = needle_in_a_haystack.NeedleParams(**paper(needle_in_a_haystack.NAME))
    mi = MiiiiParams(**paper("11_miiii_training"))
    cases: dict[str, Callable[[], Setup]] = {}

    def grid(params, kind: str, width: int, bf16: bool = False) -> Callable[[], Setup]:
        def build() -> Setup:
            task = params.task()
            cfg = model_config(kind, task, width, params.n_layers, params.n_heads)
            return Setup(build_model(cfg, 0), task, replace(params.train_config(), bf16=bf16))
        return build

    for width in (16, 128, 512, 1024):
        cases[f"paper 01 modular p=199 · random d={width}"] = grid(mod, "random transformer", width)
        if width in AUTHORS_STEPS_PER_S:
            cases[f"paper 01 modular p=199 · random d={width} bf16"] = grid(
                mod, "random transformer", width, bf16=True)
            cases[f"paper 01 modular p=199 · authors' HF GPT-2 d={width}"] = (
                lambda width=width: _authors_gpt2(width))
    cases["paper 02 needle · random d=1024"] = grid(ndl, "random transformer", 1024)
    cases["paper 11 miiii p=113 · rt_lib d=256"] = lambda: _miiii_cases("", mi, ["miiii"])[
        " · T_miiii d=256"]()
    cases["paper 11 miiii p=113 · rt_lib d=256 bf16"] = lambda: _bf16(_miiii_cases(
        "", mi, ["miiii"])[" · T_miiii d=256"]())
    cases["paper 11 miiii p=113 · plain eager d=256"] = lambda: _plain_miiii(mi)
    return cases


def _bf16(setup: Setup) -> Setup:
    return replace(setup, cfg=replace(setup.cfg, bf16=True))


# ------------------------------------------------------------------------------------ measuring

def measure_case(name: str, group: str, seconds: float, max_steps: int, device: str) -> dict:
    """Build and time one case in this process (called in a fresh process per case)."""
    base = resident_bytes() / 2**20
    cases = cpu_cases() if group == "cpu" else paper_cases()
    setup = cases[name]()
    dev = resolve_device(device)
    if setup.step is None:
        model, task, cfg = setup.model.to(dev).train(), setup.task, setup.cfg
        opt = make_optimizer(model, cfg)
        seed = [0]

        def step() -> None:
            x, y = task.get_batch(seed[0], cfg.batch_size, 0)
            train_step(model, task, opt, x.to(dev), y.to(dev), cfg, setup.hook, seed[0])
            seed[0] += 1
    else:
        step = setup.step
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    with FlopCounterMode(display=False) as counter:
        step()  # also the warm-up: allocator, oneDNN kernels
    flops = counter.get_total_flops()
    if setup.model is not None and isinstance(getattr(setup.model, "lstm", None), nn.LSTM):
        flops += _lstm_flops(setup.model, setup.task, setup.cfg)
    step()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    n, start = 0, time.perf_counter()
    while n < max_steps and (n == 0 or time.perf_counter() - start < seconds):
        step()
        n += 1
    sync()
    per_step = (time.perf_counter() - start) / n
    peak = (torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda"
            else peak_resident_bytes() / 2**20 - base)
    return {"case": name, "group": group, "steps_per_s": 1 / per_step, "timed_steps": n,
            "gflop_per_step": flops / 1e9, "gflops": flops / per_step / 1e9,
            "bf16": bool(setup.cfg is not None and setup.cfg.bf16), "peak_mib": peak}


def _lstm_flops(model: nn.Module, task, cfg: TrainConfig) -> float:
    """FlopCounterMode does not see the fused LSTM kernel: 4 gates x (input + hidden) d x d
    multiply-adds per token and layer, x3 for forward + backward."""
    x, _ = task.get_batch(0, cfg.batch_size, 0)
    d, layers = model.cfg.d_model, model.cfg.n_layers
    return 3 * 2 * 4 * 2 * d * d * layers * x.numel()


def matmul_peak(dtype: torch.dtype, device: torch.device, n: int = 2048) -> float:
    a, b = torch.randn(n, n, dtype=dtype, device=device), torch.randn(n, n, dtype=dtype, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(2):
        a @ b
    sync()
    reps = 5 if device.type == "cpu" else 50
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync()
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e9


def run_case_process(name: str, group: str, args) -> dict | None:
    cmd = [sys.executable, __file__, "--case", name, "--group", group, "--threads", str(args.threads),
           "--seconds", str(args.seconds), "--max-steps", str(args.max_steps), "--device", args.device]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE)
    if proc.returncode != 0:
        print(f"  {name}: failed ({proc.stderr.strip().splitlines()[-1] if proc.stderr else '?'})")
        return None
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------- restarts

def restart_cases() -> dict[str, tuple[Callable, int | None]]:
    """{name: (builder of (task, model cfg, TrainConfig), batch)}: Table 1's narrow rows."""
    import yaml

    from rt_lib.experiments import modular_addition, needle_in_a_haystack, parentheses
    from rt_lib.experiments.common import model_config

    def paper(module) -> dict:
        return yaml.safe_load((HERE.parent / "configs" / "paper" / f"{module.NAME}.yaml").read_text())

    out = {}
    grid = [(module, cls, profile, width)
            for module, cls in ((modular_addition, modular_addition.ModularAdditionParams),
                                (needle_in_a_haystack, needle_in_a_haystack.NeedleParams),
                                (parentheses, parentheses.ParenthesesParams))
            for profile, width in (("paper", 16), ("cpu", 16), ("cpu", 128))]
    for module, cls, profile, width in grid:
        params = cls(**paper(module)) if profile == "paper" else cls()

        def build(params=params, width=width):
            task = params.task()
            return task, model_config("random transformer", task, width, params.n_layers,
                                      params.n_heads), params.train_config()
        out[f"{profile} {module.NAME[:2]} {module.NAME[3:]} · random d={width} "
            f"batch {params.batch_size or 'full'}"] = build
    return out


def _sync(device: torch.device) -> None:
    """Wait for the device's queued work, so that a wall time covers it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_restarts(args, n: int = 10, steps: int = 6) -> list[dict]:
    """Sequential (n models, one after another) vs batched (one stacked model) optimiser steps,
    timed in steady state (after 2 warm-up steps), same batches, one process."""
    from rt_lib.model import build_model
    from rt_lib.training.batched import BatchedRestarts
    from rt_lib.training.train import DeviceBatches

    set_threads(args.threads)
    device = resolve_device(args.device)
    rows = []
    for name, build in restart_cases().items():
        if args.only and args.only not in name:
            continue
        task, mcfg, tcfg = build()
        # both ways on --device (the GPU rung asks whether stacking pays there: issue 59)
        cfgs = [replace(tcfg, seed=s, progress=False, device=args.device) for s in range(n)]
        models = [build_model(mcfg, s).to(device) for s in range(n)]
        opts = [make_optimizer(m, c) for m, c in zip(models, cfgs)]
        from rt_lib.runtime.seeding import derive
        seeds = [derive(c.seed, "batches") for c in cfgs]

        # batches reach the device as train() moves them: a full batch once, not every step
        moves = [DeviceBatches(device) for _ in range(n)]

        def sequential(step: int, models=models, opts=opts, cfgs=cfgs, seeds=seeds, task=task,
                       moves=moves) -> None:
            for m, o, c, s, move in zip(models, opts, cfgs, seeds, moves):
                x, y = move(*task.get_batch(step, c.batch_size, s))
                train_step(m, task, o, x, y, c, None, step)

        batched = BatchedRestarts([build_model(mcfg, s) for s in range(n)], task, cfgs)
        timings = {}
        for way, fn in (("sequential", sequential), ("batched", batched.step)):
            for s in range(2):
                fn(s)
            _sync(device)
            start = time.perf_counter()
            for s in range(2, 2 + steps):
                fn(s)
            _sync(device)
            timings[way] = (time.perf_counter() - start) / steps
        row = {"case": f"{n} restarts: {name}", "sequential_s_per_step": timings["sequential"],
               "batched_s_per_step": timings["batched"],
               "speedup": timings["sequential"] / timings["batched"]}
        print(f"{row['case']:<62} {row['sequential_s_per_step'] * 1e3:>9.0f} ms "
              f"{row['batched_s_per_step'] * 1e3:>9.0f} ms {row['speedup']:>7.2f}x", flush=True)
        rows.append(row)
    return rows


# --------------------------------------------------------------------------------------- main

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", nargs="+", default=["cpu", "paper", "restarts"],
                        choices=["cpu", "paper", "restarts"])
    parser.add_argument("--only", default=None, help="run the cases whose name contains this")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0, help="timing per case (at least 1 step)")
    parser.add_argument("--max-steps", type=int, default=50)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    args = parser.parse_args()
    set_threads(args.threads)
    if args.case:  # child process: one case, one JSON line
        print(json.dumps(measure_case(args.case, args.group, args.seconds, args.max_steps,
                                      args.device)))
        return

    device = resolve_device(args.device)
    peak32, peak16 = matmul_peak(torch.float32, device), matmul_peak(torch.bfloat16, device)
    cpu = os.cpu_count()
    print(f"device {device.type}, threads {args.threads} of {cpu} cores, torch {torch.__version__}; "
          f"matmul peak fp32 {peak32:.0f} GFLOP/s, bf16 {peak16:.0f} GFLOP/s")
    rows: list[dict] = []
    header = (f"{'case':<62} {'steps/s':>8} {'GFLOP/step':>10} {'GFLOP/s':>8} {'% peak':>7} "
              f"{'peak MiB':>9}")
    for group in [g for g in args.groups if g != "restarts"]:
        names = list((cpu_cases() if group == "cpu" else paper_cases()).keys())
        print(f"\n[{group}]\n{header}\n{'-' * len(header)}", flush=True)
        for name in names:
            if args.only and args.only not in name:
                continue
            r = run_case_process(name, group, args)
            if r is None:
                continue
            r["pct_peak"] = 100 * r["gflops"] / (peak16 if r["bf16"] else peak32)
            rows.append(r)
            print(f"{name:<62} {r['steps_per_s']:>8.2f} {r['gflop_per_step']:>10.2f} "
                  f"{r['gflops']:>8.1f} {r['pct_peak']:>6.0f}% {r['peak_mib']:>9.0f}", flush=True)
    _ratios(rows)
    if "restarts" in args.groups:
        print(f"\n[restarts]\n{'case':<62} {'sequential':>12} {'batched':>12} {'speedup':>8}")
        rows += bench_restarts(args)
    out = results_dir("benchmarks") / "bench_all.csv"
    import pandas as pd
    pd.DataFrame(rows).to_csv(out, index=False)
    print(f"\nwritten: {out}")


def _ratios(rows: list[dict]) -> None:
    """The issue's targets, from the rows just measured."""
    by = {r["case"]: r["steps_per_s"] for r in rows}
    lines = []
    for width, ref in AUTHORS_STEPS_PER_S.items():
        ours = by.get(f"paper 01 modular p=199 · random d={width}")
        ours16 = by.get(f"paper 01 modular p=199 · random d={width} bf16")
        hf = by.get(f"paper 01 modular p=199 · authors' HF GPT-2 d={width}")
        if ours is None:
            continue
        line = f"modular p=199 d={width}: {ours / ref:.2f}x the authors' {ref} steps/s (fp32)"
        if ours16:
            line += f", {ours16 / ref:.2f}x (bf16)"
        if hf:
            line += f"; side by side vs HF GPT-2 ({hf:.2f} steps/s): {ours / hf:.2f}x fp32"
            line += f", {ours16 / hf:.2f}x bf16" if ours16 else ""
        lines.append(line)
    fast, plain = by.get("paper 11 miiii p=113 · rt_lib d=256"), by.get(
        "paper 11 miiii p=113 · plain eager d=256")
    if fast and plain:
        fast16 = by.get("paper 11 miiii p=113 · rt_lib d=256 bf16")
        lines.append(f"miiii p=113 full batch: {plain ** -1:.2f} s/step plain eager, "
                     f"{fast ** -1:.2f} s/step rt_lib: {fast / plain:.2f}x"
                     + (f" ({fast16 / plain:.2f}x in bf16)" if fast16 else ""))
    if lines:
        print("\n" + "\n".join(lines))


if __name__ == "__main__":
    main()
