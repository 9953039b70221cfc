"""Would notebook 11's runs train faster as one stacked model, on a CPU or a GPU?

    .venv/bin/python benchmarks/stacked_miiii.py runs=5 repeats=20
    PYTHONPATH=. python3 benchmarks/stacked_miiii.py profile=gpu device=cuda runs=3 repeats=100

``profile``: whose settings of notebook 11 (cpu: p = 37; gpu: p = 113, configs/gpu/); ``device``:
cpu or cuda (timed with the device synchronised).

Times one forward and backward pass of T_miiii with the CPU profile's settings (dropout on, full
batch) on one torch thread: the plain model alone, and ``runs`` models of the same shape stacked
along a leading axis (``torch.func.stack_module_state``) and ``vmap``-ed, each member with its own
dropout mask (``randomness="different"``), as rt_lib/training/batched.py stacks restarts.  Prints the
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

from rt_lib.experiments.miiii_training import EXPERIMENT
from rt_lib.model import build_model, fast_paths


def main(argv: list[str]) -> None:
    opts: dict[str, int | str] = {"runs": 5, "repeats": 20, "profile": "cpu", "device": "cpu"}
    for kv in argv:
        key, _, raw = kv.partition("=")
        if key not in opts:
            raise SystemExit(f"unknown setting {key!r}; settings: {sorted(opts)}")
        opts[key] = raw if isinstance(opts[key], str) else int(raw)
    if opts["device"] not in ("cpu", "cuda"):
        raise SystemExit(f"device must be cpu or cuda, got {opts['device']!r}")
    if opts["device"] == "cuda" and not torch.cuda.is_available():
        raise SystemExit("device=cuda: torch sees no GPU here")
    device = torch.device(str(opts["device"]))
    torch.set_num_threads(1)
    params = EXPERIMENT.profile_params(str(opts["profile"]))
    task = params.task("miiii")
    x, y = (t.to(device) for t in task.get_batch(0, None, 0))
    models = [params.model(task).train().to(device) for _ in range(int(opts["runs"]))]
    print(f"notebook 11's {opts['profile']} profile: p = {params.p}, d_model = {params.d_model}, "
          f"a batch of {x.shape[0]}, on {device}", flush=True)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()
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
        sync()
        start = time.perf_counter()
        for _ in range(int(opts["repeats"])):
            fn()
        sync()
        ms = (time.perf_counter() - start) / int(opts["repeats"]) / per * 1000
        print(f"{name:<18} {ms:7.2f} ms per run (forward and backward, {device})", flush=True)
    d = params.d_model
    a, w = torch.randn(x.numel(), d, device=device), torch.randn(d, 3 * d, device=device)
    a_n, w_n = a.expand(opts["runs"], -1, -1).contiguous(), w.expand(opts["runs"], -1, -1).contiguous()
    for name, fn, per in (("mm, one run", lambda: a @ w, 1),
                          (f"bmm, {opts['runs']} runs", lambda: a_n @ w_n, opts["runs"])):
        fn()
        sync()
        start = time.perf_counter()
        for _ in range(10 * int(opts["repeats"])):
            fn()
        sync()
        ms = (time.perf_counter() - start) / (10 * int(opts["repeats"])) / per * 1000
        print(f"{name:<18} {ms:7.2f} ms per run ([{x.numel()}, {d}] @ [{d}, {3 * d}])", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
