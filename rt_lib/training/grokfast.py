"""Grokfast's EMA gradient filter (Lee et al. 2024), as miiii trains with it
(docs/papers.md, miiii: training).

Before each optimiser step every gradient g is amplified along its slow component:
e <- alpha * e + (1 - alpha) * g;  g <- g + lamb * e.
Lee et al.'s reference starts e at the first gradient; the miiii code starts it at zero (a
parameter: ``init``).  ``lamb = 0`` leaves gradients untouched.  Used as the training loop's
``grad_hook``; its state is saved in checkpoints so a resumed run filters identically.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn


class Grokfast:
    def __init__(self, alpha: float = 0.98, lamb: float = 2.0,
                 init: Literal["grad", "zero"] = "grad") -> None:
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        if lamb < 0:
            raise ValueError(f"lamb must be >= 0, got {lamb}")
        if init not in ("grad", "zero"):
            raise ValueError(f"init must be 'grad' or 'zero', got {init!r}")
        self.alpha, self.lamb, self.init = alpha, lamb, init
        self.ema: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def __call__(self, model: nn.Module, step: int) -> None:
        grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
        started = {name for name in grads if name not in self.ema}
        for name in started:
            g = grads[name]
            self.ema[name] = g.detach().clone() if self.init == "grad" else torch.zeros_like(g)
        # One foreach call per operation for every parameter, rather than three calls each: a
        # GPU launches one kernel per call (issue 59).  On the CPU a foreach call loops over
        # the same per-tensor kernels, so every number is as the per-parameter loop gave it.
        moving = [n for n in grads if not (n in started and self.init == "grad")]
        if moving:
            emas = [self.ema[n] for n in moving]
            torch._foreach_mul_(emas, self.alpha)
            torch._foreach_add_(emas, [grads[n] for n in moving], alpha=1 - self.alpha)
        if grads:
            torch._foreach_add_(list(grads.values()), [self.ema[n] for n in grads],
                                alpha=self.lamb)

    def state_dict(self) -> dict:
        return {"ema": {k: v.clone() for k, v in self.ema.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.ema = {k: v.clone() for k, v in state.get("ema", {}).items()}
