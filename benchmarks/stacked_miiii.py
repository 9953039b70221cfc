"""Would notebook 11's runs train faster on a CPU as one stacked model?

    .venv/bin/python benchmarks/stacked_miiii.py runs=5 repeats=20

Times one forward and backward pass of T_miiii with the CPU profile's settings (dropout on, full
batch) on one torch thread: the plain model alone, and ``runs`` models of the same shape stacked
along a leading axis (``torch.func.stack_module_state``) and ``vmap``-ed, each member with its own
dropout mask (``randomness="different"``), as rt_lib/batched.py stacks restarts.  Prints the
milliseconds per run of each: stacking pays only if the stacked pass costs less per run.  Then the
same for the step's largest matrix product alone (the keys, queries and values of every position,
[rows x 3, d] @ [d, 3d]), as one ``mm`` and as ``runs`` of them in one ``bmm``: the bound for any
stacked model written by hand instead of ``vmap``.  The
optimiser step and grokfast are elementwise and cost the same either way, so they are left out.
Run it alone on the machine: a timing beside other work is not a timing.
"""

from __future__ import annotations

import sys
import time

import torch
from torch.func import functional_call, stack_module_state, vmap

from rt_lib import fast_paths
from rt_lib.experiments.miiii_training import MiiiiParams
from rt_lib.model import build_model


def main(argv: list[str]) -> None:
    opts = {"runs": 5, "repeats": 20}
    for kv in argv:
        key, _, raw = kv.partition("=")
        if key not in opts:
            raise SystemExit(f"unknown setting {key!r}; settings: {sorted(opts)}")
        opts[key] = int(raw)
    torch.set_num_threads(1)
    params = MiiiiParams()
    task = params.task("miiii")
    x, y = task.get_batch(0, None, 0)
    models = [params.model(task).train() for _ in range(opts["runs"])]
    stacked, buffers = stack_module_state(models)
    for value in stacked.values():
        value.requires_grad_(True)
    # the stacked weights stand in for this module's own, which stay on "meta"; vmap needs the
    # plain forward (no data-dependent shortcut) and plain attention matmuls
    base = build_model(models[0].cfg, 0, fused_attention=False, last_position="full").to("meta")

    def one(p: dict, b: dict, tokens: torch.Tensor) -> torch.Tensor:
        return functional_call(base, (p, b), (tokens,), {"last_only": task.last_only})

    forward = vmap(one, in_dims=(0, 0, None), randomness="different")

    def plain() -> None:
        logits = fast_paths.last_logits(models[0], x) if task.last_only else models[0](x)
        task.loss(logits, y).backward()

    def together() -> None:
        logits = forward(stacked, buffers, x)
        torch.stack([task.loss(lg, y) for lg in logits.unbind(0)]).sum().backward()

    for name, fn, per in (("plain, one run", plain, 1), (f"stacked, {opts['runs']} runs", together,
                                                          opts["runs"])):
        for _ in range(3):  # warm-up
            fn()
        start = time.perf_counter()
        for _ in range(opts["repeats"]):
            fn()
        ms = (time.perf_counter() - start) / opts["repeats"] / per * 1000
        print(f"{name:<18} {ms:7.1f} ms per run (forward and backward, one thread)", flush=True)
    d = params.d_model
    a, w = torch.randn(x.numel(), d), torch.randn(d, 3 * d)
    a_n, w_n = a.expand(opts["runs"], -1, -1).contiguous(), w.expand(opts["runs"], -1, -1).contiguous()
    for name, fn, per in (("mm, one run", lambda: a @ w, 1),
                          (f"bmm, {opts['runs']} runs", lambda: a_n @ w_n, opts["runs"])):
        fn()
        start = time.perf_counter()
        for _ in range(10 * opts["repeats"]):
            fn()
        ms = (time.perf_counter() - start) / (10 * opts["repeats"]) / per * 1000
        print(f"{name:<18} {ms:7.2f} ms per run ([{x.numel()}, {d}] @ [{d}, {3 * d}])", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
