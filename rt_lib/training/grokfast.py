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
        for name, p in model.named_parameters():
            if p.grad is None:
                continue
            e = self.ema.get(name)
            if e is None:
                e = p.grad.detach().clone() if self.init == "grad" else torch.zeros_like(p.grad)
                if self.init == "zero":
                    e.mul_(self.alpha).add_(p.grad, alpha=1 - self.alpha)
                self.ema[name] = e
            else:
                e.mul_(self.alpha).add_(p.grad, alpha=1 - self.alpha)
            p.grad.add_(e, alpha=self.lamb)

    def state_dict(self) -> dict:
        return {"ema": {k: v.clone() for k, v in self.ema.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.ema = {k: v.clone() for k, v in state.get("ema", {}).items()}
