"""Restarts as one batched model: N seeds of one configuration trained together.

The N models' parameters are stacked along a new leading axis (``torch.func.stack_module_state``)
and the forward pass is ``vmap``-ed over it, so each step is one set of larger matmuls instead of N
small ones.  AdamW is elementwise, so one AdamW over the stacked tensors is exactly N independent
AdamWs (same lr schedule, weight decay per element); the summed loss gives each seed its own
gradient.  Results equal N separate :func:`rt_lib.training.train.train` runs up to float rounding (tested).

Gradient clipping is per seed (each seed's global norm, as ``clip_grad_norm_`` would compute it).
Limits, checked: no gradient hook, per-run checkpoints, early stop, bf16 or dropout; one shared
training batch per step when the task is finite and full batch, otherwise each seed draws its own
batches as in a separate run.  The stacked run keeps one checkpoint of its own
(:func:`train_batched`'s ``checkpoint_path``: every seed's weights, the AdamW moments, the schedule
and the histories), so a grid cut by a GPU job's deadline resumes where it stopped and ends as the
uncut one would, bit for bit (issue 59; tested).
"""

from __future__ import annotations

import copy
import os
import time
import warnings
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from tqdm.auto import tqdm

from rt_lib.model import TransformerConfig, build_model, fast_paths
from rt_lib.runtime.io import CorruptFileError, atomic_save_torch, load_torch
from rt_lib.runtime.seeding import derive
from rt_lib.tasks.base import Task
from rt_lib.training.train import (
    _BOOKKEEPING,
    DeviceBatches,
    NonFiniteLossError,
    TrainConfig,
    TrainResult,
    eval_due,
    evaluate,
    lr_lambda,
    make_optimizer,
    prepare,
    resolve_device,
)


def unsupported(model_cfg: object, cfg: TrainConfig) -> str | None:
    """Why restarts of this model and training configuration cannot train as one batched model
    (None: they can)."""
    if not isinstance(model_cfg, TransformerConfig):
        return "batched training stacks transformers only"
    if model_cfg.dropout:
        return "batched training does not support dropout"
    if cfg.checkpoint_path or cfg.stop_metric or cfg.bf16:
        return ("batched training supports no per-run checkpoints (train_batched keeps one "
                "of its own: checkpoint_path), early stop or bf16")
    return None


def can_batch(model_cfg: object, cfg: TrainConfig) -> bool:
    """Whether restarts of this model and training configuration can train as one batched model."""
    return unsupported(model_cfg, cfg) is None


def _check(models: Sequence[nn.Module], cfgs: Sequence[TrainConfig]) -> None:
    if not models or len(models) != len(cfgs):
        raise ValueError("give one TrainConfig per model (and at least one model)")
    first = cfgs[0]
    for cfg in cfgs:
        if replace(cfg, seed=first.seed) != first:
            raise ValueError("batched runs may differ in their seed only")
    if any(getattr(m, "cfg", None) != getattr(models[0], "cfg", None) for m in models):
        raise ValueError("batched runs need one model configuration")
    reason = unsupported(getattr(models[0], "cfg", None), first)
    if reason:
        raise ValueError(reason)


class FastLogits(nn.Module):
    """The training forward, ``fast_paths.last_logits(model, tokens)`` (``last_only``) or
    ``fast_paths.logits(model, tokens)``, ``compact`` where the task's loss reads the logits of
    the classes that exist only, as a module's forward, for ``functional_call`` (which runs a
    module's forward only); its parameters are the model's, under ``model.``."""

    def __init__(self, model: nn.Module, last_only: bool, compact: bool = False):
        super().__init__()
        self.model, self.last_only, self.compact = model, last_only, compact

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if self.last_only:
            return fast_paths.last_logits(self.model, tokens, self.compact)
        return fast_paths.logits(self.model, tokens, compact=self.compact)


class BatchedRestarts:
    """N models of one configuration as one stacked model, stepped together (see the module)."""

    def __init__(self, models: Sequence[nn.Module], task: Task, cfgs: Sequence[TrainConfig]):
        _check(models, cfgs)
        self.task, self.cfgs, self.cfg, self.n = task, list(cfgs), cfgs[0], len(models)
        self.device = resolve_device(self.cfg.device)
        prepare(self.cfg, self.device)
        models = [m.to(self.device).train() for m in models]
        self.params, self.buffers = stack_module_state(models)  # {name: [n, ...]}
        trainable = {k for k, p in models[0].named_parameters() if p.requires_grad}
        for name, value in self.params.items():
            value.requires_grad_(name in trainable)
        self.shared = self.cfg.batch_size is None  # finite full batch: every seed sees the same
        # The module vmap calls with the stacked weights (its own stay on "meta", unused): SDPA
        # has no vmap batching rule on CPU, so plain matmuls; distinct prefixes have a
        # data-dependent shape, so per-seed batches share every one-token prefix ("vocab").
        base = build_model(models[0].cfg, 0, fused_attention=False,
                           last_position=models[0].last_position if self.shared else "vocab")
        base = base.to("meta")
        # the training forward, as in train_step (last-position tasks: the shortcut where one applies)
        fast = FastLogits(base, task.last_only, task.compact_logits)

        def forward(p: dict, b: dict, x: torch.Tensor) -> torch.Tensor:
            p, b = ({f"model.{k}": v for k, v in d.items()} for d in (p, b))
            return functional_call(fast, (p, b), (x,))

        self.forward = vmap(forward, in_dims=(0, 0, None if self.shared else 0))
        # the seed axis leads: matrices have >= 3 axes, vectors 2
        self.optimizer = make_optimizer(self.params.values(), self.cfg, matrix_ndim=3)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda(self.cfg))
        self.data_seeds = [derive(c.seed, "batches") for c in cfgs]
        self.on_device = DeviceBatches(self.device)
        self.views = [copy.deepcopy(m) for m in models]  # per-seed modules for evaluation

    def step(self, step: int) -> torch.Tensor:
        """One optimiser step of every seed on its own batch; the per-seed losses [n]."""
        task = self.task
        if self.shared:
            x, y = task.get_batch(step, None, self.data_seeds[0])
            ys = [y] * self.n
        else:
            pairs = [task.get_batch(step, self.cfg.batch_size, s) for s in self.data_seeds]
            x, ys = torch.stack([p[0] for p in pairs]), [p[1] for p in pairs]
        x, *ys = self.on_device(x, *ys)  # a shared full batch is copied to the GPU once
        logits = self.forward(self.params, self.buffers, x)
        # unbind, not logits[i]: each index's backward would fill a zero tensor of all n seeds
        losses = torch.stack([task.loss(lg.float(), y) for lg, y in zip(logits.unbind(0), ys)])
        self.optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        if self.cfg.grad_clip is not None:
            grads = [v.grad for v in self.params.values() if v.grad is not None]
            norms = torch.stack([g.flatten(1).pow(2).sum(1) for g in grads]).sum(0).sqrt()  # [n]
            coef = (self.cfg.grad_clip / (norms + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.view(-1, *[1] * (g.ndim - 1)))
        self.optimizer.step()
        self.scheduler.step()
        return losses.detach()

    def model(self, i: int) -> nn.Module:
        """Seed i's current weights as an ordinary module (for evaluation and checkpoints)."""
        view = self.views[i]
        kept = view.state_dict().keys()  # not the non-persistent buffers (miiii's output masks)
        with torch.no_grad():
            view.load_state_dict({k: v[i] for k, v in (self.params | self.buffers).items()
                                  if k in kept})
        return view


def _settings(cfgs: Sequence[TrainConfig]) -> list[dict]:
    """What a checkpoint must have been made under to be resumed: each seed's settings but
    those that change no number (train's bookkeeping: where it is saved, how progress shows)."""
    return [{k: v for k, v in asdict(c).items() if k not in _BOOKKEEPING} for c in cfgs]


def train_batched(models: Sequence[nn.Module], task: Task, cfgs: Sequence[TrainConfig],
                  checkpoint_path: str | Path | None = None,
                  checkpoint_every: int | None = None) -> list[TrainResult]:
    """Train ``models[i]`` with ``cfgs[i]`` (identical but for the seed), all at once.

    ``checkpoint_path``: the stacked run's checkpoint, saved every ``checkpoint_every`` steps
    and at the end (marked finished); where it exists and was made under these very settings
    the run resumes from it (a finished one is loaded, not trained on), so that a run cut short
    ends as the uncut run would.  One made under other settings, or damaged, is warned about
    and not used."""
    run = BatchedRestarts(models, task, cfgs)
    cfg, n = run.cfg, run.n
    due = eval_due(cfg)
    rows: list[list[dict]] = [[] for _ in range(n)]
    ckpt = Path(checkpoint_path) if checkpoint_path is not None else None
    first_bad = torch.zeros(n, dtype=torch.long, device=run.device)
    start, elapsed, finished = 0, 0.0, False
    state = None
    if ckpt is not None and ckpt.exists():
        try:
            state = load_torch(ckpt, map_location=run.device)
        except CorruptFileError as err:  # trained again from step 0, never used
            warnings.warn(f"{err}: not resumed from it; training from step 0", stacklevel=2)
        if state is not None and state.get("settings") != _settings(cfgs):
            warnings.warn(f"{ckpt} was made by other settings: not resumed from it; training "
                          "from step 0", stacklevel=2)
            state = None
    if state is not None:
        with torch.no_grad():
            for name, value in run.params.items():
                value.copy_(state["params"][name])
        run.optimizer.load_state_dict(state["optimizer"])
        run.scheduler.load_state_dict(state["scheduler"])
        start, rows, elapsed = state["step"], state["histories"], state["time_s"]
        first_bad, finished = state["first_bad"].to(run.device), state["finished"]
    t0 = time.perf_counter() - elapsed

    def save(step: int, done: bool = False) -> None:
        if ckpt is None:
            return
        # "config" as train's checkpoints have it: where_runs_stand reads its steps
        atomic_save_torch({"params": {k: v.detach() for k, v in run.params.items()},
                           "optimizer": run.optimizer.state_dict(),
                           "scheduler": run.scheduler.state_dict(), "step": step,
                           "histories": rows, "time_s": time.perf_counter() - t0,
                           "config": asdict(cfg), "settings": _settings(cfgs),
                           "seeds": [c.seed for c in cfgs], "first_bad": first_bad,
                           "finished": done}, ckpt)

    def check_finite() -> None:
        for i, bad in enumerate(first_bad.tolist()):
            if bad:
                raise NonFiniteLossError.of(
                    f"{task.name}, seed {cfgs[i].seed} of {n} stacked",
                    f"the training loss is not finite (inf or NaN) at step {bad}", cfg)

    disable = not cfg.progress or os.environ.get("TQDM_DISABLE", "") not in ("", "0")
    for step in tqdm(range(start, start if finished else cfg.steps),
                     desc=f"{task.name} x{n} seeds", disable=disable, initial=start,
                     total=cfg.steps, leave=False):
        lr_now = run.optimizer.param_groups[0]["lr"]
        losses = run.step(step)
        # each member's first step with an infinite or NaN loss (0: none), read with the losses
        first_bad = torch.where((first_bad == 0) & ~torch.isfinite(losses), step + 1, first_bad)
        if due(step + 1) or step + 1 == cfg.steps:
            check_finite()
        if due(step + 1):
            for i in range(n):
                row = {"step": step + 1, "lr": lr_now, "train_loss": float(losses[i])}
                row.update(evaluate(run.model(i), task, cfg.eval_batch_size))
                row["time_s"] = time.perf_counter() - t0
                rows[i].append(row)
        if checkpoint_every and (step + 1) % checkpoint_every == 0 and step + 1 < cfg.steps:
            check_finite()
            save(step + 1)
    if not finished:  # a finished checkpoint loaded as it was is left byte for byte
        save(cfg.steps, done=True)
    wall = time.perf_counter() - t0
    return [TrainResult(model=run.model(i), history=pd.DataFrame(rows[i]), wall_time_s=wall / n,
                        steps_done=cfg.steps, config=cfgs[i]) for i in range(n)]


__all__ = ["BatchedRestarts", "can_batch", "train_batched"]
