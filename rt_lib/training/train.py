"""One training loop for every experiment: AdamW, warm-up + cosine, clipping, sparse evaluation.

The optimiser follows Zhong & Andreas (docs/papers.md, random transformers: training): AdamW with
weight decay on matrices only, betas (0.9, 0.999), grad-norm clip 1, linear warm-up then cosine
decay to 0; the recipe (steps, batch, lr, decay, warm-up) is each notebook's (TrainConfig).
Batches are a pure function of (seed, step), so a run resumed from a checkpoint sees exactly the
batches the uninterrupted run would have.
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd
import torch
from torch import nn
from tqdm.auto import tqdm

from rt_lib.model import eval_mode, fast_paths
from rt_lib.runtime.io import CorruptFileError, atomic_save_torch, load_torch
from rt_lib.runtime.seeding import derive, set_threads
from rt_lib.tasks.base import Task


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    # The recipe has no defaults here: its values live in each notebook's parameters (rt_lib/
    # experiments/, its CPU profile; configs/ for the others), the one place a run takes them
    # from.  Below them, the optimiser's settings unless a notebook sets them (miiii: its own
    # betas, no clipping): (docs/papers.md, random transformers: training)
    steps: int  # optimiser steps
    batch_size: int | None  # rows per step; None = full batch (finite tasks)
    lr: float  # peak learning rate after warm-up
    weight_decay: float  # AdamW decay on matrices; none on biases and LayerNorm
    betas: tuple[float, float] = (0.9, 0.999)  # AdamW defaults, as in the authors' code
    warmup_steps: int  # linear warm-up from 0 to lr
    schedule: Literal["cosine", "constant"] = "cosine"  # after warm-up: cosine to 0, or flat
    # global grad-norm clip (docs/papers.md, random transformers: training); None disables
    grad_clip: float | None = 1.0
    eval_every: int = 100  # evaluation is sparse: it costs a pass over every eval set
    eval_log_points: int | None = None  # if set: evaluate at ~this many log-spaced steps instead
    # (grokking runs span decades of epochs: every decade gets the same number of points)
    eval_last: int = 0  # also evaluate after each of the last eval_last steps (a score averaged
    # over the final epochs: the miiii search's objective, Syrkis & Søgaard's main.py)
    snapshot_steps: tuple[int, ...] = ()  # steps after which the model's weights are kept
    snapshot_dir: str | None = None  # where: <snapshot_dir>/step_<n>.pt (analysis over training)
    eval_batch_size: int = 8192  # rows per evaluation chunk, to bound memory
    seed: int = 0  # the run's one seed: model init and batch order derive from it
    threads: int | None = None  # torch threads; None -> $RT_THREADS or 1 (see seeding.set_threads)
    device: str = "auto"  # "auto" = CUDA when available, else CPU
    bf16: bool = False  # bf16 autocast of the forward pass (loss and optimiser stay fp32)
    deterministic: bool = True  # deterministic kernels: with >1 thread, the embedding backward
    # (index accumulate) otherwise adds in a varying order and runs drift apart in the last bits
    stop_metric: str | None = None  # e.g. "test_acc": stop early once it reaches stop_value
    stop_value: float = 1.0  # threshold for stop_metric
    checkpoint_path: str | None = None  # where to save model + optimiser state; None = nowhere
    checkpoint_every: int | None = None  # steps between checkpoints (always one at the end)
    resume: bool = False  # continue from checkpoint_path if it exists
    progress: bool = True  # tqdm bar; also off with TQDM_DISABLE=1

    def __post_init__(self) -> None:
        if not isinstance(self.steps, int) or self.steps < 1:
            raise ValueError(f"steps must be a positive integer, got {self.steps!r}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be positive or None, got {self.batch_size}")
        if not self.lr > 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"schedule={self.schedule!r} is not one of ['cosine', 'constant']")
        if self.eval_every < 1:
            raise ValueError(f"eval_every must be >= 1, got {self.eval_every}")
        if self.eval_log_points is not None and self.eval_log_points < 2:
            raise ValueError(f"eval_log_points must be >= 2 or None, got {self.eval_log_points}")
        if not isinstance(self.eval_last, int) or not 0 <= self.eval_last <= self.steps:
            raise ValueError(f"eval_last must be an integer in 0..steps={self.steps}, got {self.eval_last!r}")
        if self.snapshot_steps and self.snapshot_dir is None:
            raise ValueError("snapshot_steps needs a snapshot_dir")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device={self.device!r} is not 'auto', 'cpu' or 'cuda[:n]'")


@dataclass
class TrainResult:
    model: nn.Module
    history: pd.DataFrame  # one row per evaluation: step, lr, train_loss, <set>_<metric>, time_s
    wall_time_s: float
    steps_done: int
    config: TrainConfig = field(repr=False)

    def final(self, column: str) -> float:
        return float(self.history[column].iloc[-1])


def log_spaced_steps(steps: int, points: int) -> list[int]:
    """About ``points`` distinct steps in 1..steps, evenly spaced in log(step), ending at steps."""
    grid = torch.logspace(0, math.log10(steps), points, dtype=torch.float64)
    return sorted({min(steps, max(1, round(float(v)))) for v in grid} | {steps})


def eval_due(cfg: TrainConfig) -> Callable[[int], bool]:
    """Whether an evaluation is due after ``done`` optimiser steps: every ``eval_every`` steps, or
    at about ``eval_log_points`` log-spaced steps, after each of the last ``eval_last`` steps, and
    always after the last step.  The one schedule of :func:`train` and
    :func:`rt_lib.training.batched.train_batched`."""
    last = cfg.steps - cfg.eval_last  # evaluations after every step past this one
    if cfg.eval_log_points is not None:
        at = set(log_spaced_steps(cfg.steps, cfg.eval_log_points))  # holds cfg.steps
        return lambda done: done in at or done > last
    return lambda done: done % cfg.eval_every == 0 or done == cfg.steps or done > last


def prepare(cfg: TrainConfig, device: torch.device) -> None:
    """Threads and (non-)deterministic kernels for a run on ``device``."""
    set_threads(cfg.threads)
    if cfg.deterministic and device.type == "cuda":
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS needs it to be
    torch.use_deterministic_algorithms(cfg.deterministic, warn_only=True)
    # Deterministic mode also fills every new uninitialised tensor with NaN, a guard against a
    # kernel that reads memory before writing it; the fills are a visible part of miiii's step
    # (benchmarks/profile_miiii.py: aten::fill_).  Every tensor the training step allocates is
    # written before it is read (a NaN read would reach the loss), so a step's bits are the same
    # without them (tests/training/test_train.py).
    torch.utils.deterministic.fill_uninitialized_memory = False


def resolve_device(device: str) -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def lr_lambda(cfg: TrainConfig) -> Callable[[int], float]:
    """Multiplier of the peak lr at a step: linear warm-up, then cosine to 0 (or constant)."""

    def factor(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        if cfg.schedule == "constant":
            return 1.0
        span = max(cfg.steps - cfg.warmup_steps, 1)
        return 0.5 * (1.0 + math.cos(math.pi * min(step - cfg.warmup_steps, span) / span))

    return factor


def param_groups(params: Iterable[torch.Tensor], weight_decay: float,
                 matrix_ndim: int = 2) -> list[dict]:
    """AdamW groups of the trainable ``params``: ``weight_decay`` on matrices, none on vectors
    (biases, LayerNorm; docs/papers.md, random transformers: training).  A matrix has at least
    ``matrix_ndim`` axes: 2, or 3 where
    restarts are stacked along a leading seed axis (rt_lib/training/batched.py)."""
    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("the model has no trainable parameters")
    decay = [p for p in params if p.ndim >= matrix_ndim]
    no_decay = [p for p in params if p.ndim < matrix_ndim]
    groups = [{"params": decay, "weight_decay": weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return groups


def make_optimizer(model: nn.Module | Iterable[torch.Tensor], cfg: TrainConfig,
                   matrix_ndim: int = 2) -> torch.optim.AdamW:
    """AdamW over the trainable parameters of ``model`` (a module, or its parameters: the stacked
    restarts of rt_lib/training/batched.py, with ``matrix_ndim`` 3); vectors (biases, LayerNorm)
    get no weight decay.  The one construction for both training paths."""
    params = model.parameters() if isinstance(model, nn.Module) else model
    return torch.optim.AdamW(param_groups(params, cfg.weight_decay, matrix_ndim), lr=cfg.lr,
                             betas=cfg.betas)


@torch.no_grad()
def evaluate(model: nn.Module, task: Task, batch_size: int = 8192,
             device: torch.device | None = None, bf16: bool = False) -> dict[str, float]:
    """Mean of the task's per-example scores on every eval set: {"test_acc": ..., ...}."""
    device = device or next(model.parameters()).device
    out: dict[str, float] = {}
    with eval_mode(model):
        for set_name, (x, y) in task.eval_sets().items():
            sums: dict[str, float] = {}
            for start in range(0, len(x), batch_size):
                xb = x[start : start + batch_size].to(device)
                yb = y[start : start + batch_size].to(device)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                    # the training forward (rt_lib/model/fast_paths.py): last-position tasks
                    # by the shortcut where one applies
                    logits = (fast_paths.last_logits(model, xb) if task.last_only
                              else fast_paths.logits(model, xb))
                for key, values in task.scores(logits.float(), yb).items():
                    sums[key] = sums.get(key, 0.0) + values.double().sum().item()
            for key, total in sums.items():
                out[f"{set_name}_{key}"] = total / len(x)
    return out


class NonFiniteLossError(FloatingPointError):
    """Training met an infinite or NaN loss: the run stops, naming itself and the step."""

    @classmethod
    def of(cls, run: str, what: str, cfg: TrainConfig, kept: str = "") -> NonFiniteLossError:
        """``run: what of <steps> (lr, weight decay)kept``, the one wording for every loop."""
        return cls(f"{run}: {what} of {cfg.steps} (lr {cfg.lr:g}, weight decay "
                   f"{cfg.weight_decay:g}){kept}")


class DeviceBatches:
    """Training batches on the training device, a batch that repeats copied there once.

    A finite task's full batch is the same pair of tensors at every step
    (:meth:`rt_lib.tasks.base.FiniteTask.get_batch`).  Copied to a GPU at every step from
    pageable memory, each copy first waits for the GPU to finish the step before (CUDA's rule
    for such copies), so the loop could never run ahead of the kernels; kept there after the
    first step, the loop queues a step while the last one runs.  The numbers are the same:
    the same rows reach the same kernels.  On the CPU ``.to`` returns the tensor itself."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._last: tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]] | None = None

    def __call__(self, *batch: torch.Tensor) -> tuple[torch.Tensor, ...]:
        last = self._last
        if last is not None and len(last[0]) == len(batch) and all(
                a is b for a, b in zip(last[0], batch)):
            return last[1]
        moved = tuple(t.to(self.device, non_blocking=True) for t in batch)
        self._last = (batch, moved)
        return moved


def train_step(model: nn.Module, task: Task, optimizer: torch.optim.Optimizer, x: torch.Tensor,
               y: torch.Tensor, cfg: TrainConfig,
               grad_hook: Callable[[nn.Module, int], None] | None = None,
               step: int = 0) -> torch.Tensor:
    """One optimiser step on the batch (x, y); returns the loss, still on the device.

    No ``.item()`` here: the loss is read only when an evaluation is due, so on a GPU the loop
    runs ahead of the kernels (the shared-prefix forward's ``unique`` is the one wait).  The
    benchmarks time exactly this function.  The forward is the plain one's arithmetic
    regrouped for speed (:func:`rt_lib.model.fast_paths.logits`); a task scored at the last
    position takes the shortcut of :func:`rt_lib.model.fast_paths.last_logits` where one applies."""
    compact = task.compact_logits  # a multi-head task's loss over the classes that exist
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=cfg.bf16):
        logits = (fast_paths.last_logits(model, x, compact) if task.last_only
                  else fast_paths.logits(model, x, compact=compact))
    loss = task.loss(logits.float(), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_hook is not None:
        grad_hook(model, step)
    if cfg.grad_clip is not None:
        nn.utils.clip_grad_norm_(
            [p for p in model.parameters() if p.grad is not None], cfg.grad_clip)
    optimizer.step()
    return loss.detach()


def train(model: nn.Module, task: Task, cfg: TrainConfig,
          grad_hook: Callable[[nn.Module, int], None] | None = None,
          desc: str | None = None) -> TrainResult:
    """Train ``model`` on ``task``; ``grad_hook(model, step)`` may edit grads before clipping.

    Dropout draws from torch's global generator: it is seeded from ``cfg.seed`` for this run
    (and restored from the checkpoint on resume), inside a fork, so a run's result depends on
    its settings alone, not on what ran before it, and the caller's generator is untouched."""
    device = resolve_device(cfg.device)
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(derive(cfg.seed, "dropout") % 2**63)
        return _train(model, task, cfg, grad_hook, desc, device)


def _rng_state(device: torch.device) -> dict:
    state = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: dict, device: torch.device) -> None:
    torch.set_rng_state(state["cpu"].cpu())
    if device.type == "cuda" and "cuda" in state:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


# Settings that do not change what a run computes (where it is saved, how it is shown): a run
# finished under other ones (e.g. copied from the run store into another results folder) is done.
_BOOKKEEPING = ("checkpoint_path", "checkpoint_every", "resume", "progress", "snapshot_dir")


def _same_run(saved: dict, cfg: TrainConfig) -> bool:
    now = asdict(cfg)
    return all(saved.get(k) == v for k, v in now.items() if k not in _BOOKKEEPING)


def _train(model: nn.Module, task: Task, cfg: TrainConfig,
           grad_hook: Callable[[nn.Module, int], None] | None, desc: str | None,
           device: torch.device) -> TrainResult:
    prepare(cfg, device)
    model.to(device).train()
    optimizer = make_optimizer(model, cfg)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    rows: list[dict[str, float]] = []
    start_step, elapsed_before = 0, 0.0
    ckpt = Path(cfg.checkpoint_path) if cfg.checkpoint_path else None
    state, finished = None, False
    if cfg.resume and ckpt is not None and ckpt.exists():
        try:
            state = load_torch(ckpt, map_location=device)
        except CorruptFileError as err:  # rebuilt from step 0, never used
            warnings.warn(f"{err}: not resumed from it; training from step 0", stacklevel=2)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        start_step, rows, elapsed_before = state["step"], state["history"], state["time_s"]
        if grad_hook is not None and hasattr(grad_hook, "load_state_dict"):
            grad_hook.load_state_dict(state.get("grad_hook", {}))
        if "rng" in state:  # dropout continues where the interrupted run left off
            _set_rng_state(state["rng"], device)
        # A run that ended (all steps, or its early stop) under these very settings is done:
        # resuming must not train on past its stop.  Other settings (e.g. the stop lifted) go on.
        finished = state.get("finished", False) and _same_run(state["config"], cfg)

    data_seed = derive(cfg.seed, "batches")
    disable = not cfg.progress or os.environ.get("TQDM_DISABLE", "") not in ("", "0")
    bar = tqdm(range(start_step, start_step if finished else cfg.steps), desc=desc or task.name,
               disable=disable, initial=start_step, total=cfg.steps, leave=False)
    t0 = time.perf_counter() - elapsed_before

    def save(step: int, finished: bool = False) -> None:
        if ckpt is None:
            return
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "step": step, "history": rows,
                 "time_s": time.perf_counter() - t0, "config": asdict(cfg),
                 "rng": _rng_state(device), "finished": finished}
        if grad_hook is not None and hasattr(grad_hook, "state_dict"):
            state["grad_hook"] = grad_hook.state_dict()
        atomic_save_torch(state, ckpt)

    # The first step whose loss was infinite or NaN (0: none yet), kept on the device so that
    # the loop never waits for it; read where the loss is read anyway and before every save,
    # which also checks the weights: no checkpoint or snapshot holds a non-finite value.
    first_bad = torch.zeros((), dtype=torch.long, device=device)

    def check_finite(done: int, saving: bool = False) -> None:
        """Raise if a loss so far was not finite or, before a save, if a weight is not."""
        what = None
        if bad := int(first_bad.item()):
            what = f"the training loss is not finite (inf or NaN) at step {bad}"
        elif saving and not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            what = f"the weights are not finite (inf or NaN) after step {done}"
        if what:
            kept = f"; {ckpt} keeps the last step saved before it" if ckpt and ckpt.exists() else ""
            raise NonFiniteLossError.of(desc or task.name, what, cfg, kept)

    due = eval_due(cfg)
    snapshots = set(cfg.snapshot_steps)
    on_device = DeviceBatches(device)
    step = start_step
    for step in bar:
        x, y = on_device(*task.get_batch(step, cfg.batch_size, data_seed))
        lr_now = optimizer.param_groups[0]["lr"]
        loss = train_step(model, task, optimizer, x, y, cfg, grad_hook, step)
        scheduler.step()
        first_bad = torch.where((first_bad == 0) & ~torch.isfinite(loss), step + 1, first_bad)

        if step + 1 in snapshots:
            check_finite(step + 1, saving=True)
            atomic_save_torch({"step": step + 1, "state_dict": model.state_dict()},
                              Path(cfg.snapshot_dir) / f"step_{step + 1}.pt")
        if due(step + 1):
            check_finite(step + 1)
            row = {"step": step + 1, "lr": lr_now, "train_loss": loss.item()}
            row.update(evaluate(model, task, cfg.eval_batch_size, device, cfg.bf16))
            row["time_s"] = time.perf_counter() - t0
            rows.append(row)
            if cfg.stop_metric is not None:
                if cfg.stop_metric not in row:
                    raise KeyError(f"stop_metric={cfg.stop_metric!r} is not among {sorted(row)}")
                bar.set_postfix({cfg.stop_metric: f"{row[cfg.stop_metric]:.3f}"})
                if row[cfg.stop_metric] >= cfg.stop_value:
                    step += 1
                    break
        if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0:
            check_finite(step + 1, saving=True)
            save(step + 1)
    else:
        step = start_step if finished else cfg.steps
    bar.close()
    check_finite(step, saving=not finished)
    if not finished:  # a finished run loaded as it was is left byte for byte (results manifest)
        save(step, finished=True)
    history = pd.DataFrame(rows)
    return TrainResult(model=model, history=history, wall_time_s=time.perf_counter() - t0,
                       steps_done=step, config=cfg)
