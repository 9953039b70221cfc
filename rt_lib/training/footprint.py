"""What one training step at a profile's own batch size costs: peak memory, FLOPs, seconds.

The smoke test of a profile (``./run_all.sh --profile paper --smoke``) runs every notebook at the
profile's shapes with a few small steps.  What a GPU user also needs before the real run is
whether one step at the profile's own batch fits their device, and how long the run will take.
Each experiment names the steps its notebook takes (``Experiment.step_shapes``: model, task,
batch size, the widest of each kind) and :func:`measure` takes one such step in a fresh process
on this CPU:

- **peak memory**: the process's peak resident memory over building the model and two steps
  (weights, gradients, AdamW's moments, activations, the batch), less what it held before
  (Python and torch).  Where one step at the profile's batch would take too long here, it is
  taken at two smaller batches and the peak extrapolated, or, for the largest models, the step
  runs on the meta device (shapes without arithmetic) at the profile's batch, a lower bound
  (:func:`measure` says which).  On a GPU add the CUDA context (about 0.5 GiB) and allocator
  slack.
- **FLOPs**: counted by torch's ``FlopCounterMode`` (matrix products and attention, forward
  and backward) at the profile's batch on the meta device, or at the batches taken here
  extrapolated linearly; where nothing is counted, 6 x parameters x tokens, marked ``approx``.
- **seconds** of the second step at the batch taken here (one thread), and the FLOP/s achieved.
"""

from __future__ import annotations

import multiprocessing
import resource
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd
import psutil
import torch
from torch.utils.flop_counter import FlopCounterMode

from rt_lib.model import LSTMConfig, ModelConfig, TransformerConfig, build_model, fast_paths
from rt_lib.runtime.seeding import set_threads
from rt_lib.tasks.base import Task
from rt_lib.training.train import TrainConfig, make_optimizer, train_step

GIB = 2**30


@dataclass(frozen=True)
class StepShape:
    """One kind of training step a notebook takes (its widest model of one kind)."""

    label: str  # e.g. "trained transformer d=1024"
    model: ModelConfig
    task: Task
    batch_size: int | None  # rows per step in the profile; None = the full training set
    train: TrainConfig  # optimiser settings (which matrices decay), clipping
    steps: int = 1  # optimiser steps of one such run in the profile
    # runs of this kind in the profile, narrower widths counted by (width / widest)^2 (their
    # share of the matrix products): what the planning table multiplies
    runs: float = 1.0

    def rows(self) -> int:
        if self.batch_size is not None:
            return self.batch_size
        return int(self.task.get_batch(0, None, 0)[0].shape[0])  # full batch (finite tasks)


@dataclass(frozen=True)
class Footprint:
    label: str
    rows: int  # the profile's batch
    measured_rows: tuple[int, ...]  # the batches actually run here
    params: int  # all parameters (trained or frozen)
    peak_bytes: float  # at the profile's batch
    flops: float  # per step at the profile's batch
    seconds: float  # per step at the largest batch measured, one CPU thread
    peak_kind: str  # "measured", "estimated" or "lower bound" (measure's docstring)
    flops_approx: bool  # 6 x params x tokens, where torch counted nothing

    @property
    def achieved_flops(self) -> float:
        """FLOP/s of the timed step: the CPU's achieved rate on this model."""
        if not self.measured_rows or not self.seconds > 0:
            return float("nan")
        return self.flops * self.measured_rows[-1] / self.rows / self.seconds

    def row(self) -> dict:
        return {"step": self.label, "batch": self.rows,
                "measured_at": ",".join(map(str, self.measured_rows)),
                "params_M": self.params / 1e6, "peak_GiB": self.peak_bytes / GIB,
                "peak": self.peak_kind,
                "GFLOP_per_step": self.flops / 1e9,
                "flops": "approx" if self.flops_approx else "counted",
                "cpu_s_per_step": self.seconds, "cpu_GFLOP_per_s": self.achieved_flops / 1e9}


def resident_bytes() -> int:
    """This process's resident memory now (psutil: the operating system's own count)."""
    return psutil.Process().memory_info().rss


def peak_resident_bytes() -> int:
    """This process's peak resident memory over its life (``ru_maxrss``: KiB on Linux).  The
    step runs in a fresh process, so the peak is the step's unless unpickling its task or the
    imports before it went higher: then the report is that, never less than the step."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


#: Model options of the step run on the meta device: no last-position shortcut.  The transformer's
#: last-position shortcut ("shared": each distinct prefix once) depends on the data, which the
#: meta device does not have; without it the step does at least the work of the real one, so its
#: FLOPs and memory are upper bounds of a step that takes the shortcut.
PLAIN: dict[type, dict[str, Any]] = {TransformerConfig: {"last_position": "full"}}


MIN_ROWS = 4  # the larger of the two batches an estimate extrapolates from has at least this many


def _step(shape: StepShape, rows: int, plain: bool, out: multiprocessing.Queue) -> None:
    """In a fresh process: build, two steps (the first counted, the second timed), report.
    ``plain``: without the last-position shortcut (:data:`PLAIN`), as on the meta device."""
    set_threads(1)
    base = resident_bytes()
    model = build_model(shape.model, 0, **(PLAIN.get(type(shape.model), {}) if plain else {}))
    x, y = shape.task.get_batch(0, rows, 0)
    optimizer = make_optimizer(model, shape.train)
    with FlopCounterMode(display=False) as counter:
        train_step(model, shape.task, optimizer, x, y, shape.train)
    start = time.perf_counter()
    train_step(model, shape.task, optimizer, x, y, shape.train)
    seconds = time.perf_counter() - start
    peak = peak_resident_bytes()
    n_params = sum(p.numel() for p in model.parameters())
    out.put((peak - base, float(counter.get_total_flops()), seconds, n_params))


def _run(shape: StepShape, rows: int, plain: bool = False) -> tuple[float, float, float, int]:
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_step, args=(shape, rows, plain, queue))
    proc.start()
    proc.join()
    if proc.exitcode != 0:
        raise RuntimeError(f"{shape.label}: one step at batch {rows} failed here "
                           f"(exit code {proc.exitcode}; out of memory?)")
    return queue.get()


def n_params(shape: StepShape) -> int:
    """Parameters of the shape's model, counted on the meta device (nothing allocated) where its
    constructor runs there, else built on the CPU."""
    try:
        with torch.device("meta"):
            model = build_model(shape.model, 0)
    except (NotImplementedError, RuntimeError):  # e.g. nonzero() over a mask, data-dependent
        model = build_model(shape.model, 0)
    return sum(p.numel() for p in model.parameters())


def rough_flops(shape: StepShape, rows: int) -> float:
    """6 x parameters x tokens: the usual estimate of a training step's FLOPs."""
    return 6.0 * n_params(shape) * shape.task.n_ctx * rows


def on_meta(shape: StepShape, rows: int) -> tuple[float, float, int] | None:
    """(estimated peak bytes, FLOPs, parameters) of one step at ``rows`` rows, from the step
    run on the meta device (shapes only: no memory, no arithmetic, any size) with the training
    forward without its last-position shortcuts (:data:`PLAIN`); None where the model cannot run
    there.  The estimate is the
    weights, gradients and AdamW's two moments of the trained ones, plus every activation
    autograd keeps for the backward pass (summed by a saved-tensor hook, each storage once); the
    backward's transients come on top."""
    try:
        with torch.device("meta"):
            model = build_model(shape.model, 0, **PLAIN.get(type(shape.model), {}))
        x, y = (t.to("meta") for t in shape.task.get_batch(0, rows, 0))
        weights = {p.untyped_storage()._cdata for p in model.parameters()}
        saved: dict[int, int] = {}

        def keep(t: torch.Tensor) -> torch.Tensor:
            storage = t.untyped_storage()
            if storage._cdata not in weights:
                saved[storage._cdata] = storage.nbytes()
            return t

        with FlopCounterMode(display=False) as counter:
            with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
                logits = fast_paths.logits(model, x, last_only=shape.task.last_only)
                loss = shape.task.loss(logits.float(), y)
            loss.backward()
    except (NotImplementedError, RuntimeError):
        return None
    params = list(model.parameters())
    trained = sum(p.numel() * p.element_size() for p in params if p.requires_grad)
    total = sum(p.numel() * p.element_size() for p in params)
    return total + 3 * trained + sum(saved.values()), float(counter.get_total_flops()), \
        sum(p.numel() for p in params)


def measure(shape: StepShape, max_flops: float = 2e11) -> Footprint:
    """One step of ``shape`` at its profile's batch (see the module's docstring):

    - taken here where it costs at most ``max_flops`` (seconds on one core): measured;
    - where fewer than :data:`MIN_ROWS` rows fit in ``max_flops``: the step run on the meta
      device at the profile's batch (:func:`on_meta`), its estimate a lower bound; timed at one
      row here where that row costs at most 20 x ``max_flops``;
    - else taken here at two batches within ``max_flops`` (the larger and a quarter of it) with
      no last-position shortcut (:data:`PLAIN`: the same work whatever the data), the peak extrapolated
      linearly in the batch (a step's memory is affine in it); FLOPs counted on the meta device
      at the profile's batch, or extrapolated alike where the model cannot run there:
      estimated."""
    rows = shape.rows()
    per_row = rough_flops(shape, 1)
    lstm = isinstance(shape.model, LSTMConfig)  # torch counts none of its fused CPU kernels
    meta = None
    if per_row * rows <= max_flops:
        peak, flops, seconds, count = _run(shape, rows)
        measured, kind = (rows,), "measured"
        if lstm and (meta := on_meta(shape, rows)) is not None:
            flops = meta[1]  # on the meta device the LSTM decomposes into counted products
    elif per_row * MIN_ROWS > max_flops and (meta := on_meta(shape, rows)) is not None:
        peak, flops, count = meta
        seconds, measured, kind = float("nan"), (), "lower bound"
        if per_row <= 20 * max_flops:  # one row is affordable: it times the step (FLOP/s)
            one = _run(shape, 1, plain=True)
            seconds, measured = one[2], (1,)
    else:
        meta = on_meta(shape, rows)
        small = max(2, min(rows, int(max_flops // per_row)))
        low = max(1, small // 4)
        p_low, p_high = _run(shape, low, plain=True), _run(shape, small, plain=True)

        def at_rows(i: int) -> float:  # item i of the runs, extrapolated to the profile's batch
            return p_high[i] + max(p_high[i] - p_low[i], 0.0) / (small - low) * (rows - small)

        peak = at_rows(0)
        flops = meta[1] if meta is not None else at_rows(1)
        seconds, count, measured, kind = p_high[2], p_high[3], (low, small), "estimated"
    approx = flops == 0
    if approx:
        flops = rough_flops(shape, rows)
    return Footprint(shape.label, rows, measured, count, max(peak, 0.0), flops, seconds,
                     kind, flops_approx=approx)


def matmul_rate(n: int = 2048, repeats: int = 5) -> float:
    """FLOP/s of one thread on an n x n float32 matrix product: this CPU's practical peak, the
    yardstick of the achieved fraction (:attr:`Footprint.achieved_flops` over it)."""
    set_threads(1)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


#: Published dense float32 peaks (TFLOP/s, NVIDIA data sheets: A100 SXM 19.5, H100 SXM 67).
#: The runs train in float32 and PyTorch leaves TF32 matrix products off by default.
GPU_FP32_TFLOPS = {"A100": 19.5, "H100": 67.0}




def profile_footprints(shapes: list[tuple[str, StepShape]], max_flops: float = 2e11,
                       jobs: int = 1) -> pd.DataFrame:
    """One row per ``(notebook, StepShape)`` of ``shapes`` (the steps a profile takes, e.g.
    :func:`rt_lib.pipeline.registry.profile_step_shapes`): its shape, steps and runs, and what
    one step at that batch costs (:func:`measure`, ``jobs`` at a time, each step taken in a
    process of its own).  Identical steps (notebook 06 repeats 01-04's) are measured once."""
    from concurrent.futures import ThreadPoolExecutor

    todo, unique = [], {}
    for name, shape in shapes:
        key = (repr(shape.model), shape.task.name, shape.task.n_ctx, shape.rows())
        unique.setdefault(key, shape)
        todo.append((name, shape, key))
    with ThreadPoolExecutor(max(jobs, 1)) as pool:  # the steps run in child processes
        found = dict(zip(unique, pool.map(lambda s: measure(s, max_flops), unique.values())))
    return pd.DataFrame([{"notebook": name, **found[key].row(), "step": shape.label,
                          "steps": shape.steps, "runs": shape.runs} for name, shape, key in todo])


def planning_table(footprints: pd.DataFrame, cpu_rate: float) -> pd.DataFrame:
    """GPU-hours per step kind on an A100 and an H100 (float32 peaks, :data:`GPU_FP32_TFLOPS`),
    at the fraction of peak this CPU achieved on the same step (its FLOP/s over
    :func:`matmul_rate`): estimates."""
    out = footprints.copy()
    out["cpu_fraction"] = (out["cpu_GFLOP_per_s"] * 1e9 / cpu_rate).clip(upper=1.0)
    total = out["GFLOP_per_step"] * 1e9 * out["steps"] * out["runs"]
    out["PFLOP_total"] = total / 1e15
    for gpu, peak in GPU_FP32_TFLOPS.items():
        out[f"{gpu}_hours"] = total / (peak * 1e12 * out["cpu_fraction"]) / 3600
    return out


def measured_hours(table: pd.DataFrame, measurements: list[dict]) -> pd.DataFrame:
    """``table`` (:func:`planning_table`) with ``<gpu>_hours_measured`` per measured GPU: a step
    measured there (``measurements``: ``[{gpu, ms_per_step: {notebook: {step: ms}}}]``, as in
    benchmarks/gpu_step_times.yaml) times the row's steps and runs; NaN where that step was not
    measured, so the row stays an estimate."""
    out = table.copy()
    for entry in measurements:
        ms = entry["ms_per_step"]
        per_step = [ms.get(nb, {}).get(step) for nb, step in zip(out["notebook"], out["step"])]
        seconds = pd.Series(per_step, index=out.index, dtype=float) / 1e3
        out[f"{entry['gpu']}_hours_measured"] = seconds * out["steps"] * out["runs"] / 3600
    return out
