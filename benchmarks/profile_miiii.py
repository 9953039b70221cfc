"""Where one miiii epoch's time goes: a torch.profiler table of T_miiii's training step.

    .venv/bin/python benchmarks/profile_miiii.py                     # the GPU profile's p = 113, here
    PYTHONPATH=. python3 benchmarks/profile_miiii.py device=cuda     # on a GPU (issue 59, item 5)
    .venv/bin/python benchmarks/profile_miiii.py profile=cpu epochs=50 rows=15
    .venv/bin/python benchmarks/profile_miiii.py p=11 epochs=50      # the GPU step at a tiny p

``profile``: whose settings of notebook 11 (gpu: p = 113 as configs/gpu/11_miiii_training.yaml,
the default; cpu: p = 37); ``p``: another p with the profile's other settings; ``device``: cpu
or cuda; ``readout``: the loss's readout (padded, compact or both, the default); ``epochs``:
profiled epochs per setting (after 3 untimed ones); ``rows``: lines of each table.  ``out=PATH``
also writes the tables there.

Each epoch is :func:`rt_lib.training.train.train_step` exactly as notebook 11 trains T_miiii:
the full training split as one batch, the fast paths' forward, the ln(q)-weighted loss, grokfast
on the gradients, AdamW.  It is profiled under each readout of the loss (``padded``, as every
profile trains; ``compact``, rt_lib/tasks/miiii.py) and each setting that can change its kernels:
deterministic algorithms on and off and, on a GPU, TF32 matmuls on and off, and once with
deterministic mode's NaN fill of every new tensor (which train.prepare turns off).  For each it prints
the milliseconds per epoch (the device synchronised), the share of the time in matrix products
(``mm``, ``bmm``, ``addmm``, ``matmul``, ``linear``, SDPA), the operators and GPU kernels an epoch
launches, and the operators that take the most self time: what is not a matrix product is what a
faster step would cut.  About a minute on a GPU; at p = 113 on one CPU thread, three minutes
(``epochs=5``: one).  Run it alone on the machine: a timing beside other work is not a timing.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from rt_lib.experiments.miiii_training import EXPERIMENT
from rt_lib.training.train import make_optimizer, prepare, train_step

MATMULS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::matmul", "aten::linear",
           "aten::_scaled_dot_product", "aten::baddbmm")


def parse(argv: list[str]) -> dict[str, int | str]:
    opts: dict[str, int | str] = {"profile": "gpu", "device": "cpu", "epochs": 20, "rows": 12,
                                  "out": "", "p": "", "readout": "both"}
    for kv in argv:
        key, _, raw = kv.partition("=")
        if key not in opts:
            raise SystemExit(f"unknown setting {key!r}; settings: {sorted(opts)}")
        if isinstance(opts[key], int):
            try:
                opts[key] = int(raw)
            except ValueError:
                raise SystemExit(f"{key} must be an integer, got {raw!r}") from None
            if opts[key] < 1:
                raise SystemExit(f"{key} must be at least 1, got {raw}")
        else:
            opts[key] = raw
    if opts["device"] not in ("cpu", "cuda"):
        raise SystemExit(f"device must be cpu or cuda, got {opts['device']!r}")
    if opts["readout"] not in ("padded", "compact", "both"):
        raise SystemExit(f"readout must be padded, compact or both, got {opts['readout']!r}")
    if opts["device"] == "cuda" and not torch.cuda.is_available():
        raise SystemExit("device=cuda: torch sees no GPU here")
    return opts


def settings(device: torch.device, readouts: tuple[str, ...]) -> list[dict]:
    """The settings profiled: each loss readout (tasks/miiii.py: padded, as every profile
    trains; compact, the same loss over the classes that exist) with deterministic on and off
    and, on a GPU, TF32 on and off; first the step as training runs it (train.prepare:
    deterministic, without its NaN fill of new tensors), and once with that fill, as the step
    ran before prepare turned it off."""
    tf32 = (False, True) if device.type == "cuda" else (False,)
    return ([{"readout": r, "deterministic": d, "tf32": t, "fill": False}
             for r in readouts for d in (True, False) for t in tf32]
            + [{"readout": readouts[0], "deterministic": True, "tf32": False, "fill": True}])


def profile_epochs(params, device: torch.device, epochs: int, setting: dict):
    """(ms per epoch, the profiler's averages) of ``epochs`` training steps of T_miiii."""
    lamb = params.grokfast_lambda
    task = replace(params.task("miiii"), readout=setting["readout"])
    cfg = replace(params.train_config(lamb, None), deterministic=setting["deterministic"])
    prepare(cfg, device)  # threads and kernels as training sets them
    torch.utils.deterministic.fill_uninitialized_memory = setting["fill"]
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = setting["tf32"]
        torch.backends.cudnn.allow_tf32 = setting["tf32"]
    model = params.model(task).to(device).train()
    x, y = (t.to(device) for t in task.get_batch(0, None, 0))
    optimizer = make_optimizer(model, cfg)
    hook = params.grokfast(lamb)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for step in range(3):  # warm-up: allocator, kernels chosen, grokfast's EMA allocated
        train_step(model, task, optimizer, x, y, cfg, hook, step)
    sync()
    start = time.perf_counter()
    for step in range(3, 3 + epochs):
        train_step(model, task, optimizer, x, y, cfg, hook, step)
    sync()
    ms = (time.perf_counter() - start) / epochs * 1e3
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for step in range(3 + epochs, 3 + 2 * epochs):
            train_step(model, task, optimizer, x, y, cfg, hook, step)
        sync()
    return ms, prof.key_averages()


def matmul_share(averages, device: torch.device) -> float:
    """The matrix products' share of the operators' summed self time on ``device``."""
    attr = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    times = {e.key: getattr(e, attr, 0.0) for e in averages}
    total = sum(times.values())
    mm = sum(t for k, t in times.items() if k.startswith(MATMULS))
    return mm / total if total else float("nan")


def calls_per_epoch(averages, device: torch.device, epochs: int) -> str:
    """How many operators (nested ones included) and, on a GPU, kernels one epoch launches: a
    step of many small launches is bound by their overhead, not by its arithmetic (where a
    CUDA graph of the step, not a cheaper operator, would cut it)."""
    ops = sum(e.count for e in averages if e.key.startswith("aten::")) / epochs
    text = f"{ops:.0f} aten operator calls per epoch (nested included)"
    if device.type == "cuda":
        from torch.autograd import DeviceType

        kernels = sum(e.count for e in averages if e.device_type == DeviceType.CUDA) / epochs
        text += f", {kernels:.0f} GPU kernels"
    return text


def main(argv: list[str]) -> int:
    opts = parse(argv)
    device = torch.device(str(opts["device"]))
    torch.set_num_threads(1)
    params = EXPERIMENT.profile_params(str(opts["profile"]))
    if opts["p"]:  # the profile's step at another p: how the step's cost grows with the task
        try:
            p = int(opts["p"])
        except ValueError:
            raise SystemExit(f"p must be an integer, got {opts['p']!r}") from None
        try:
            params = replace(params, p=p)
            params.check()
        except ValueError as err:
            raise SystemExit(f"p={p}: {err}") from None
    task = params.task("miiii")
    print(f"notebook 11's {opts['profile']} profile: T_miiii at p = {params.p}, d_model = "
          f"{params.d_model}, {len(task.qs)} heads, a batch of {len(task.train[0])} rows, on "
          f"{device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'one thread'}), "
          f"torch {torch.__version__}", flush=True)
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    lines = []
    readouts = ("padded", "compact") if opts["readout"] == "both" else (str(opts["readout"]),)
    for setting in settings(device, readouts):
        ms, averages = profile_epochs(params, device, int(opts["epochs"]), setting)
        head = (f"{setting['readout']} readout, deterministic "
                f"{'on' if setting['deterministic'] else 'off'}"
                + (f", TF32 {'on' if setting['tf32'] else 'off'}" if device.type == "cuda" else "")
                + (", with the NaN fill of new tensors (before train.prepare turned it off)"
                   if setting["fill"] else "")
                + f": {ms:.2f} ms per epoch, matrix products {matmul_share(averages, device):.0%} "
                  f"of the operators' self time; "
                  f"{calls_per_epoch(averages, device, int(opts['epochs']))}")
        table = averages.table(sort_by=sort, row_limit=int(opts["rows"]))
        print(head, table, sep="\n", flush=True)
        lines += [head, table]
    torch.use_deterministic_algorithms(False)
    torch.utils.deterministic.fill_uninitialized_memory = True
    if opts["out"]:
        Path(str(opts["out"])).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
