"""At which scale does the random transformer add?  Table 1's decimal-addition claim on a GPU.

    PYTHONPATH=. python3 benchmarks/decimal_scale.py --budget-s 420            # GPU (device auto)
    PYTHONPATH=. python3 benchmarks/decimal_scale.py --device cpu --widths 16 32 --restarts 2 \\
        --trained-width 16 --steps 40 --batch-size 32 --n-test 64 --warmup-steps 5   # tiny, CPU
    PYTHONPATH=. python3 benchmarks/decimal_scale.py --only-lstm --lstm-width 1024 --lstm-restarts 3 \\
        --steps 3619 --budget-s 300            # the fully trained LSTM alone (GPU)

Zhong & Andreas (2024), Table 1: a random transformer (only W_E, W_pos and W_U trained) reaches
100 % on 10-digit decimal addition at width 1024.  At the CPU profile (notebook 03) it reaches an
exact-match accuracy near 0.001.  This script trains, through the project's own code (the task
``rt_lib.tasks.DecimalAddition``, the models of ``rt_lib.experiments.common.model_config``, the
seeds of ``train_grid``, and ``rt_lib.training.train``'s optimiser, schedule, step and evaluation), the
random transformer at several widths, ``--restarts`` restarts at the widest width (restart r has
the seed ``derive(seed, "restart{r}")`` exactly as ``train_grid`` gives it), ``--narrow-restarts``
at the others, and optionally the fully trained transformer at ``--trained-width`` as a reference.

The fully trained 2-layer LSTM (Table 1's baseline; ``model_config``'s "trained LSTM", hidden size
= d_model = ``--lstm-width``) is added with ``--lstm-width W --lstm-restarts R``: R restarts with
the same restart seeds, steps and schedule, at the LSTM's own learning rate (``--lstm-lr``,
default the paper config's ``lstm_lr``, 5e-3, as ``GridParams.kind_overrides`` gives it).  These
runs are required, not optional: planned like the random runs, and a restart the budget does not
reach is listed as "not run".  ``--widths`` with no value (or ``--only-lstm``, which also drops
the trained transformer) skips the random transformer, e.g. to add the LSTM to a finished run.

Settings default to the paper profile, configs/paper/03_decimal_addition.yaml (batch 1000, AdamW
lr 1e-3, weight decay 1e-3, 500 warm-up steps then cosine to 0, n_test 4000, every output digit
scored); each can be overridden on the command line.

Steps.  Every run gets the same number of steps S, each run its full warm-up + cosine schedule:
``--steps`` fixes S; otherwise S is planned from step times measured here (a few timed steps of
each configuration) so that all runs fit ``--plan-fraction`` of the wall-clock budget left
(``--budget-s``, counted from this script's start), capped at ``--max-steps`` (the paper's
10,000).  The trained reference is kept only if it costs the random runs at most
``1 - --keep-trained-if`` of their steps.  Whatever happens, training stops at the budget: a run
stopped there is evaluated where it stopped and its row says so (``status`` "cut at budget",
``steps_done`` < ``steps_planned``); runs not started are listed as "not run", and the trained
reference is skipped ("not run (would not fit)") rather than cut when, at the pace the finished runs
kept against their estimate, it would not end in time.  The CSV (and a
``*_history.csv`` of every evaluation) is rewritten after each run, so rows survive a kill.

Precision.  ``--precision auto`` = TF32 matrix products on CUDA (PyTorch leaves them off by
default; about 5x the fp32 throughput on Hopper), fp32 on CPU; ``fp32`` reproduces PyTorch's
default exactly; ``bf16`` uses the project's bf16 autocast (TrainConfig.bf16).  On CUDA the widest
random transformer's fp32 step time is measured too and printed, for the record.

Columns: test_acc = per-token accuracy over every output token (sum digits and stop), test_exact
= exact match of the whole sum, test_acc_authors = per token under the authors' mask, digit_acc =
accuracy per output position s0 (units) .. s10 and stop (notebook 03's ``digit_accuracy``);
train_loss = mean training loss over the last evaluation window (not one batch), loss_tail = the
last four window means, budget = ``rt_lib.experiments.common.budget_status`` on those means
("still improving" or "converged").
"""

from __future__ import annotations

import time

START = time.perf_counter()  # the budget counts from here, before the heavy imports

import argparse  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import queue  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from dataclasses import replace  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from pathlib import Path  # noqa: E402

import pandas as pd  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402
from torch import nn  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rt_lib.experiments.common import budget_status, model_config  # noqa: E402
from rt_lib.experiments.decimal_addition import digit_accuracy  # noqa: E402
from rt_lib.model import build_model, count_params  # noqa: E402
from rt_lib.runtime.seeding import derive  # noqa: E402
from rt_lib.tasks import DecimalAddition  # noqa: E402
from rt_lib.training.train import (  # noqa: E402
    TrainConfig,
    eval_due,
    evaluate,
    lr_lambda,
    make_optimizer,
    prepare,
    resolve_device,
    train,
    train_step,
)

PAPER_CONFIG = ROOT / "configs" / "paper" / "03_decimal_addition.yaml"
RANDOM, TRAINED, LSTM = "random transformer", "trained transformer", "trained LSTM"


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - START:6.1f}s] {msg}", flush=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    paper = yaml.safe_load(PAPER_CONFIG.read_text())
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--widths", type=int, nargs="*", default=[256, 512, 1024],
                   help="widths of the random transformer (default 256 512 1024; none = skip it)")
    p.add_argument("--restarts", type=int, default=3, help="restarts at the widest width")
    p.add_argument("--narrow-restarts", type=int, default=1, help="restarts at the other widths")
    p.add_argument("--trained-width", type=int, default=512,
                   help="width of the fully trained reference; 0 = none")
    p.add_argument("--trained-restarts", type=int, default=1)
    p.add_argument("--lstm-width", type=int, default=0,
                   help="hidden size (= d_model) of the fully trained 2-layer LSTM; 0 = none")
    p.add_argument("--lstm-restarts", type=int, default=3, help="restarts of the LSTM")
    p.add_argument("--lstm-lr", type=float, default=paper["lstm_lr"],
                   help=f"the LSTM's learning rate (paper config: {paper['lstm_lr']})")
    p.add_argument("--only-lstm", action="store_true",
                   help="train only the LSTM: no random transformer, no trained reference")
    p.add_argument("--keep-trained-if", type=float, default=0.85,
                   help="keep the trained reference if the random runs keep this share of steps")
    p.add_argument("--steps", type=int, default=None, help="fixed steps per run (no planning)")
    p.add_argument("--max-steps", type=int, default=paper["steps"],
                   help=f"cap of the planned steps (paper: {paper['steps']})")
    p.add_argument("--min-steps", type=int, default=None,
                   help="fewest planned steps (default: 2 x warm-up)")
    p.add_argument("--budget-s", type=float, default=420.0,
                   help="wall-clock budget in seconds from the script's start")
    p.add_argument("--plan-fraction", type=float, default=0.88,
                   help="share of the budget left after timing that the plan fills")
    p.add_argument("--time-steps", type=int, default=25, help="timed steps per configuration")
    p.add_argument("--batch-size", type=int, default=paper["batch_size"])
    p.add_argument("--lr", type=float, default=paper["lr"])
    p.add_argument("--trained-lr", type=float, default=paper["trained_lr"] or paper["lr"])
    p.add_argument("--weight-decay", type=float, default=paper["weight_decay"])
    p.add_argument("--warmup-steps", type=int, default=paper["warmup_steps"])
    p.add_argument("--n-digits", type=int, default=paper["n_digits"])
    p.add_argument("--n-test", type=int, default=paper["n_test"])
    p.add_argument("--test-seed", type=int, default=paper["test_seed"])
    p.add_argument("--authors-mask", action="store_true",
                   help="train under the authors' mask (score_first_digit=False)")
    p.add_argument("--n-layers", type=int, default=paper["n_layers"])
    p.add_argument("--n-heads", type=int, default=paper["n_heads"])
    p.add_argument("--seed", type=int, default=paper["seed"], help="base seed (train_grid's)")
    p.add_argument("--eval-points", type=int, default=20, help="evaluations per run")
    p.add_argument("--precision", choices=["auto", "fp32", "tf32", "bf16"], default="auto")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prefetch", choices=["auto", "on", "off"], default="auto",
                   help="draw batches in a background thread (auto: on CUDA)")
    p.add_argument("--check-loop", action="store_true",
                   help="also train the first run with rt_lib.training.train.train and compare histories")
    p.add_argument("--csv", default=None,
                   help="output CSV (default $OUT/decimal_scale.csv, else benchmarks/results/)")
    args = p.parse_args(argv)
    if args.only_lstm:
        args.widths, args.trained_width = [], 0
        if not args.lstm_width:
            p.error("--only-lstm needs --lstm-width")
    if args.csv is None:
        base = Path(os.environ["OUT"]) if os.environ.get("OUT") else ROOT / "benchmarks" / "results"
        args.csv = str(base / "decimal_scale.csv")
    if args.min_steps is None:
        args.min_steps = max(2 * args.warmup_steps, 1)
    return args


class Batches:
    """The training batches of one run, ``task.get_batch(step, batch_size, data_seed)`` for step
    0, 1, ... (exactly what rt_lib.training.train.train draws), moved to the device; with ``prefetch`` a
    background thread draws them ahead (pinned memory on CUDA), so drawing overlaps the GPU."""

    def __init__(self, task, batch_size: int, data_seed: int, steps: int, device: torch.device,
                 prefetch: bool) -> None:
        self.task, self.batch_size, self.data_seed = task, batch_size, data_seed
        self.device, self.pin = device, device.type == "cuda"
        self.thread = None
        if prefetch:
            self.queue: queue.Queue = queue.Queue(maxsize=4)
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self._fill, args=(steps,), daemon=True)
            self.thread.start()

    def _draw(self, step: int):
        x, y = self.task.get_batch(step, self.batch_size, self.data_seed)
        if self.pin:
            x, y = x.pin_memory(), y.pin_memory()
        return step, x, y

    def _fill(self, steps: int) -> None:
        for step in range(steps):
            item = self._draw(step)
            while not self.stop.is_set():
                try:
                    self.queue.put(item, timeout=0.2)
                    break
                except queue.Full:
                    continue
            if self.stop.is_set():
                return

    def get(self, step: int):
        got, x, y = self.queue.get() if self.thread is not None else self._draw(step)
        assert got == step, (got, step)
        return x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)

    def close(self) -> None:
        if self.thread is not None:
            self.stop.set()
            self.thread.join(timeout=5)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_training(model: nn.Module, task, cfg: TrainConfig, deadline: float, prefetch: bool,
                 label: str) -> dict:
    """rt_lib.training.train.train's loop (same seeds, batches, optimiser, schedule, train_step and
    evaluate), plus a wall-clock deadline, a windowed mean of the training loss and a background
    batch drawer.  Returns the history, the steps done and whether the deadline cut the run."""
    device = resolve_device(cfg.device)
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(derive(cfg.seed, "dropout") % 2**63)
        prepare(cfg, device)
        model.to(device).train()
        optimizer = make_optimizer(model, cfg)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
        batches = Batches(task, cfg.batch_size, derive(cfg.seed, "batches"), cfg.steps, device,
                          prefetch)
        due = eval_due(cfg)
        rows: list[dict] = []
        window = torch.zeros((), device=device)
        in_window, done, cut = 0, 0, False
        t0 = time.perf_counter()

        def record(step: int, loss: torch.Tensor, lr_now: float) -> None:
            nonlocal window, in_window
            row = {"step": step, "lr": lr_now, "train_loss": loss.item(),
                   "train_loss_mean": (window / max(in_window, 1)).item()}
            row.update(evaluate(model, task, cfg.eval_batch_size, device, cfg.bf16))
            row["time_s"] = time.perf_counter() - t0
            rows.append(row)
            window, in_window = torch.zeros((), device=device), 0
            log(f"  {label} step {step:>5}: loss {row['train_loss_mean']:.4f} "
                f"acc {row['test_acc']:.3f} exact {row['test_exact']:.3f}")

        loss, lr_now = None, cfg.lr
        try:
            for step in range(cfg.steps):
                if time.perf_counter() > deadline:
                    cut = True
                    break
                x, y = batches.get(step)
                lr_now = optimizer.param_groups[0]["lr"]
                loss = train_step(model, task, optimizer, x, y, cfg, None, step)
                scheduler.step()
                window = window + loss
                in_window += 1
                done = step + 1
                if due(done):
                    record(done, loss, lr_now)
            if cut and loss is not None and (not rows or rows[-1]["step"] != done):
                record(done, loss, lr_now)  # evaluated where the budget stopped it
        finally:
            batches.close()
        sync(device)
        return {"history": pd.DataFrame(rows), "steps_done": done, "cut": cut,
                "wall_s": time.perf_counter() - t0}


class OnDevice(nn.Module):
    """``model`` run on its device from CPU tokens, logits back on the CPU (for
    ``digit_accuracy``, which compares on the CPU)."""

    def __init__(self, model: nn.Module, device: torch.device) -> None:
        super().__init__()
        self.model, self.device = model, device

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.model(x[i:i + 2000].to(self.device)).float().cpu()
                          for i in range(0, len(x), 2000)])


def time_config(kind: str, width: int, task, args, base_cfg: TrainConfig,
                device: torch.device, prefetch: bool) -> dict:
    """Seconds per training step (batch drawing included) and per evaluation, measured on a
    throwaway model of this configuration."""
    mcfg = model_config(kind, task, width, args.n_layers, args.n_heads)
    model = build_model(mcfg, derive(args.seed, "timing")).to(device).train()
    cfg = replace(base_cfg, steps=10**9)
    optimizer = make_optimizer(model, cfg)
    warm = 5
    batches = Batches(task, cfg.batch_size, derive(args.seed, "timing"), warm + args.time_steps,
                      device, prefetch)
    try:
        for step in range(warm + args.time_steps):
            if step == warm:
                sync(device)
                t0 = time.perf_counter()
            x, y = batches.get(step)
            train_step(model, task, optimizer, x, y, cfg, None, step)
        sync(device)
        per_step = (time.perf_counter() - t0) / args.time_steps
    finally:
        batches.close()
    t0 = time.perf_counter()
    evaluate(model, task, cfg.eval_batch_size, device, cfg.bf16)
    sync(device)
    per_eval = time.perf_counter() - t0
    del model, optimizer
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"step_s": per_step, "eval_s": per_eval}


def plan_steps(runs: list[dict], timing: dict, seconds: float, args) -> int:
    """The most steps S (<= max_steps) at which every run fits ``seconds``."""
    per_step = sum(timing[(r["model"], r["width"])]["step_s"] for r in runs)
    fixed = sum((args.eval_points + 2) * timing[(r["model"], r["width"])]["eval_s"] + 1.0
                for r in runs)  # evaluations, model build, digit accuracy
    return max(0, min(args.max_steps, int((seconds - fixed) / per_step)))


def tail(values, n: int = 4) -> str:
    return " ".join(f"{v:.4f}" for v in list(values)[-n:])


def fmt_table(frame: pd.DataFrame) -> str:
    cols = ["model", "width", "restart", "seed", "steps_planned", "steps_done", "status",
            "test_acc", "test_exact", "train_loss", "loss_tail", "budget", "ms_per_step",
            "wall_s"]
    shown = frame[[c for c in cols if c in frame.columns]].copy()

    def cell(v):
        if isinstance(v, float):
            return "-" if v != v else f"{v:.4f}" if abs(v) < 10 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(shown.columns) + " |", "|" + "---|" * len(shown.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> pd.DataFrame:
    args = parse_args(argv)
    deadline = START + args.budget_s
    device = resolve_device(args.device)
    precision = args.precision if args.precision != "auto" else (
        "tf32" if device.type == "cuda" else "fp32")
    if precision == "tf32" and device.type != "cuda":
        precision = "fp32"  # TF32 is a CUDA setting; on the CPU the products are fp32
    base_cfg = TrainConfig(steps=1, batch_size=args.batch_size, lr=args.lr,
                           weight_decay=args.weight_decay, warmup_steps=args.warmup_steps,
                           seed=args.seed, threads=args.threads, device=str(device),
                           bf16=precision == "bf16", progress=False)
    prepare(base_cfg, device)  # before any CUDA product: cuBLAS's deterministic workspace
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    prefetch = args.prefetch == "on" or (args.prefetch == "auto" and device.type == "cuda")
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    log(f"device {device} ({gpu}), torch {torch.__version__}, python {platform.python_version()}, "
        f"precision {precision}, prefetch {prefetch}, budget {args.budget_s:.0f} s")

    task = DecimalAddition(n_digits=args.n_digits, n_test=args.n_test, test_seed=args.test_seed,
                           score_first_digit=not args.authors_mask)
    widest = max(args.widths, default=0)
    runs = [{"model": RANDOM, "width": w, "restart": r}
            for w in sorted(args.widths, reverse=True)
            for r in range(args.restarts if w == widest else args.narrow_restarts)]
    runs += [{"model": LSTM, "width": args.lstm_width, "restart": r}
             for r in range(args.lstm_restarts)] if args.lstm_width else []
    if not runs and not args.trained_width:
        raise SystemExit("nothing to run: give --widths, --lstm-width or --trained-width")
    optional = [{"model": TRAINED, "width": args.trained_width, "restart": r}
                for r in range(args.trained_restarts)] if args.trained_width else []

    timing: dict = {}
    fp32_ms = fp32_lstm_ms = float("nan")
    if args.steps is None or device.type == "cuda":
        for kind, width in dict.fromkeys((r["model"], r["width"]) for r in runs + optional):
            timing[(kind, width)] = time_config(kind, width, task, args, base_cfg, device, prefetch)
            log(f"timed {kind} d={width}: {1000 * timing[(kind, width)]['step_s']:.1f} ms/step, "
                f"{1000 * timing[(kind, width)]['eval_s']:.0f} ms/eval")
        if device.type == "cuda" and precision == "tf32":
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
            if widest:
                fp32_ms = 1000 * time_config(RANDOM, widest, task, args, base_cfg, device,
                                             prefetch)["step_s"]
                log(f"for the record: {RANDOM} d={widest} in fp32 (TF32 off): "
                    f"{fp32_ms:.1f} ms/step")
            if args.lstm_width:
                fp32_lstm_ms = 1000 * time_config(LSTM, args.lstm_width, task, args, base_cfg,
                                                  device, prefetch)["step_s"]
                log(f"for the record: {LSTM} d={args.lstm_width} in fp32 (TF32 off): "
                    f"{fp32_lstm_ms:.1f} ms/step")
            torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True

    if args.steps is not None:
        steps = args.steps
        runs += optional
    else:
        left = args.plan_fraction * (deadline - time.perf_counter())
        base = plan_steps(runs, timing, left, args)
        with_ref = plan_steps(runs + optional, timing, left, args) if optional else 0
        if optional and (with_ref >= args.keep_trained_if * base or with_ref == args.max_steps):
            steps, runs = with_ref, runs + optional
        else:
            steps = base
            if optional:
                log(f"trained reference dropped: it would cut the steps from {base} to {with_ref}")
        if steps < args.min_steps:
            log(f"planned {steps} steps < min_steps {args.min_steps}: running {args.min_steps}; "
                "the last runs will be cut at the budget")
            steps = args.min_steps
    eval_every = max(1, round(steps / args.eval_points))
    planned_s = sum(timing[(r["model"], r["width"])]["step_s"] for r in runs) * steps if timing else float("nan")
    log(f"plan: {len(runs)} runs x {steps} steps (eval every {eval_every}); estimated "
        f"{planned_s:.0f} s of steps, {deadline - time.perf_counter():.0f} s of budget left")

    out = Path(args.csv)
    out.parent.mkdir(parents=True, exist_ok=True)
    hist_path = out.with_name(out.stem + "_history.csv")
    common_cols = {"device": gpu, "torch": torch.__version__, "precision": precision,
                   "batch_size": args.batch_size, "n_digits": args.n_digits,
                   "n_test": args.n_test, "warmup_steps": args.warmup_steps,
                   "score_first_digit": not args.authors_mask, "fp32_ms_per_step_widest": fp32_ms}
    if args.lstm_width:
        common_cols["fp32_ms_per_step_lstm"] = fp32_lstm_ms
    rows, histories = [], []
    pace, spent, estimated = 1.0, 0.0, 0.0  # actual / estimated time of the finished runs

    def write() -> pd.DataFrame:
        frame = pd.DataFrame(rows)
        frame.to_csv(out, index=False)
        if histories:
            pd.concat(histories, ignore_index=True).to_csv(hist_path, index=False)
        return frame

    for i, run in enumerate(runs):
        kind, width, restart = run["model"], run["width"], run["restart"]
        seed = derive(args.seed, f"restart{restart}") % 2**31  # train_grid's restart seeds
        lr = {TRAINED: args.trained_lr, LSTM: args.lstm_lr}.get(kind, args.lr)
        row = {**run, "seed": seed, "lr": lr, "steps_planned": steps}
        if time.perf_counter() > deadline:
            rows.append({**row, "steps_done": 0, "status": "not run", **common_cols})
            write()
            continue
        if (run in optional or kind == LSTM) and timing:
            # the reference is optional: skipped, not cut, if at the pace measured so far (the
            # finished runs' time over their estimate) it would not end before the budget; so
            # is an LSTM restart (a restart cut short would not be the schedule compared)
            est = steps * timing[(kind, width)]["step_s"] * pace
            if kind == LSTM:
                est += args.eval_points * timing[(kind, width)]["eval_s"]
            if time.perf_counter() + est > deadline:
                log(f"{kind} d={width} #{restart} skipped: {est:.0f} s needed at the pace so "
                    f"far, {deadline - time.perf_counter():.0f} s left")
                rows.append({**row, "steps_done": 0, "status": "not run (would not fit)",
                             **common_cols})
                write()
                continue
        mcfg = model_config(kind, task, width, args.n_layers, args.n_heads)
        cfg = replace(base_cfg, steps=steps, lr=lr, seed=seed, eval_every=eval_every)
        label = f"{({RANDOM: 'random', LSTM: 'LSTM'}).get(kind, 'trained')} d={width} #{restart}"
        log(f"run {i + 1}/{len(runs)}: {label} (seed {seed})")
        model = build_model(mcfg, derive(seed, "init"))
        res = run_training(model, task, cfg, deadline, prefetch, label)
        hist = res["history"]
        if args.check_loop and i == 0:
            ref = train(build_model(mcfg, derive(seed, "init")), task, cfg).history
            diff = max(float((hist[c] - ref[c]).abs().max()) for c in ref.columns
                       if c not in ("time_s",))
            log(f"check: rt_lib.training.train.train history vs this loop, max abs difference {diff:.3g}")
            if diff > 1e-5:
                raise SystemExit("this loop does not reproduce rt_lib.training.train.train")
        last = hist.iloc[-1]
        digits = digit_accuracy(OnDevice(model, device), task)
        budget = budget_status(hist.assign(train_loss=hist["train_loss_mean"]))
        row.update({
            "steps_done": res["steps_done"],
            "status": "cut at budget" if res["cut"] else "done",
            "test_acc": float(last["test_acc"]), "test_exact": float(last["test_exact"]),
            "test_acc_authors": float(last["test_acc_authors"]),
            "test_loss": float(last["test_loss"]),
            "train_loss": float(last["train_loss_mean"]),
            "loss_tail": tail(hist["train_loss_mean"]),
            "budget": budget,
            "digit_acc": " ".join(f"{o}:{a:.3f}" for o, a in zip(digits.output, digits.accuracy)),
            "min_digit_acc": float(digits.accuracy.min()),
            "trainable_params": count_params(model),
            "ms_per_step": 1000 * res["wall_s"] / max(res["steps_done"], 1),
            "wall_s": res["wall_s"], **common_cols})
        if timing and not res["cut"]:
            spent += res["wall_s"]
            estimated += steps * timing[(kind, width)]["step_s"]
            pace = max(1.0, spent / estimated)
        rows.append(row)
        histories.append(hist.assign(model=kind, width=width, restart=restart, seed=seed))
        write()
        del model
        if device.type == "cuda":
            torch.cuda.empty_cache()

    frame = write()
    print()
    lstm_lr = f" (LSTM {args.lstm_lr})" if args.lstm_width else ""
    print(f"decimal addition, {args.n_digits} digits, batch {args.batch_size}, lr {args.lr}{lstm_lr}, "
          f"wd {args.weight_decay}, warm-up {args.warmup_steps} + cosine, {precision}, "
          f"{gpu}, torch {torch.__version__}; total {time.perf_counter() - START:.0f} s")
    print(fmt_table(frame))
    done = frame[~frame.status.str.startswith("not run")]
    for (kind, width), g in done.groupby(["model", "width"], sort=False):
        solved = (g.test_exact >= 0.99).sum()
        print(f"  {kind} d={width}: {len(g)} restart(s), exact match min {g.test_exact.min():.4f} "
              f"median {g.test_exact.median():.4f}; >= 0.99 on {solved}/{len(g)}; "
              f"steps {g.steps_done.min()}-{g.steps_done.max()}")
    for r in done.itertuples():
        print(f"  {r.model} d={r.width} #{r.restart} digit_acc {r.digit_acc}")
    print(f"wrote {out} and {hist_path} ({datetime.now(UTC):%Y-%m-%d %H:%M} UTC)")
    return frame


if __name__ == "__main__":
    main()
