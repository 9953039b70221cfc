"""Restarts as one batched model (issue 6 groundwork): N seeds of one configuration trained together.

The N models' parameters are stacked along a new leading axis (``torch.func.stack_module_state``)
and the forward pass is ``vmap``-ed over it, so each step is one set of larger matmuls instead of N
small ones.  AdamW is elementwise, so one AdamW over the stacked tensors is exactly N independent
AdamWs (same lr schedule, weight decay per element); the summed loss gives each seed its own
gradient.  Results equal N separate :func:`rt_lib.train.train` runs up to float rounding (tested).

Gradient clipping is per seed (each seed's global norm, as ``clip_grad_norm_`` would compute it).
Limits, checked: no gradient hook, checkpoints, early stop, bf16 or dropout; one shared training batch per step when the task is finite and full batch, otherwise each
seed draws its own batches as in a separate run.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import replace

import pandas as pd
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from rt_lib.seeding import derive, set_threads
from rt_lib.tasks.base import Task
from rt_lib.train import TrainConfig, TrainResult, evaluate, log_spaced_steps, lr_lambda


def _check(models: Sequence[nn.Module], cfgs: Sequence[TrainConfig]) -> None:
    if not models or len(models) != len(cfgs):
        raise ValueError("give one TrainConfig per model (and at least one model)")
    first = cfgs[0]
    for cfg in cfgs:
        if replace(cfg, seed=first.seed) != first:
            raise ValueError("batched runs may differ in their seed only")
    if first.checkpoint_path or first.stop_metric or first.bf16:
        raise ValueError("batched training supports no checkpoints, early stop or bf16")
    if any(getattr(m, "cfg", None) != getattr(models[0], "cfg", None) for m in models):
        raise ValueError("batched runs need one model configuration")
    if getattr(models[0].cfg, "dropout", 0.0):
        raise ValueError("batched training does not support dropout")


def train_batched(models: Sequence[nn.Module], task: Task,
                  cfgs: Sequence[TrainConfig]) -> list[TrainResult]:
    """Train ``models[i]`` with ``cfgs[i]`` (identical but for the seed), all at once."""
    _check(models, cfgs)
    cfg = cfgs[0]
    set_threads(cfg.threads)
    n = len(models)
    params, buffers = stack_module_state(list(models))  # {name: [n, ...]}
    trainable = {k for k, p in models[0].named_parameters() if p.requires_grad}
    for name, value in params.items():
        value.requires_grad_(name in trainable)
    base = copy.deepcopy(models[0]).to("meta")
    shared = cfg.batch_size is None  # finite full-batch: every seed sees the same batch
    if not shared and hasattr(base, "share_prefixes"):
        base.share_prefixes = False  # finding distinct prefixes has a data-dependent shape: no vmap

    def forward(p: dict, b: dict, x: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, b), (x,), {"last_only": task.last_only})

    batched = vmap(forward, in_dims=(0, 0, None if shared else 0))
    decay = [v for k, v in params.items() if k in trainable and v.ndim >= 3]
    no_decay = [v for k, v in params.items() if k in trainable and v.ndim < 3]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    data_seeds = [derive(c.seed, "batches") for c in cfgs]
    eval_at = (set(log_spaced_steps(cfg.steps, cfg.eval_log_points))
               if cfg.eval_log_points is not None else None)
    rows: list[list[dict]] = [[] for _ in range(n)]
    views = [copy.deepcopy(m) for m in models]  # per-seed modules for evaluation
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        if shared:
            x, y = task.get_batch(step, None, data_seeds[0])
            logits = batched(params, buffers, x)
            losses = torch.stack([task.loss(logits[i].float(), y) for i in range(n)])
        else:
            pairs = [task.get_batch(step, cfg.batch_size, s) for s in data_seeds]
            x = torch.stack([p[0] for p in pairs])
            logits = batched(params, buffers, x)
            losses = torch.stack([task.loss(logits[i].float(), pairs[i][1]) for i in range(n)])
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        if cfg.grad_clip is not None:
            grads = [v.grad for v in params.values() if v.grad is not None]
            norms = torch.stack([g.flatten(1).pow(2).sum(1) for g in grads]).sum(0).sqrt()  # [n]
            coef = (cfg.grad_clip / (norms + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.view(-1, *[1] * (g.ndim - 1)))
        lr_now = optimizer.param_groups[0]["lr"]
        optimizer.step()
        scheduler.step()
        due = (step + 1 in eval_at) if eval_at is not None else (step + 1) % cfg.eval_every == 0
        if due or step == cfg.steps - 1:
            for i, view in enumerate(views):
                with torch.no_grad():
                    view.load_state_dict({k: v[i] for k, v in (params | buffers).items()})
                row = {"step": step + 1, "lr": lr_now, "train_loss": float(losses[i].detach())}
                row.update(evaluate(view, task, cfg.eval_batch_size))
                row["time_s"] = time.perf_counter() - t0
                rows[i].append(row)
    wall = time.perf_counter() - t0
    return [TrainResult(model=views[i], history=pd.DataFrame(rows[i]), wall_time_s=wall,
                        steps_done=cfg.steps, config=cfgs[i]) for i in range(n)]


__all__ = ["train_batched"]
