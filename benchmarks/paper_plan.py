"""The GPU planning table of the paper profile (docs/profiles.md, the planning table).

    source scripts/kernel_env.sh; source scripts/data_env.sh
    .venv/bin/python benchmarks/paper_plan.py [--profile paper] [--jobs 2] [NN ...]

For every training step of each paper-profile notebook (``Experiment.step_shapes``: the widest
model of each kind) it prints the step's FLOPs, steps, runs, peak memory at the profile's batch
(rt_lib.training.footprint: measured where one step is cheap here, else estimated on the meta device,
as marked), and GPU-hours on an A100 and an H100: the run's FLOPs over the GPU's float32 peak
times the fraction of this CPU's practical peak (a one-thread 2048 x 2048 product) that the
same step achieved here.  Every hour figure is an estimate; it assumes a GPU reaches the same
fraction of its peak as one CPU thread does on the same shapes.  Notebook 08's steps are counted
over the local TinyStories text (the profile's 5 epochs over the stories found).  Nothing is
written; run it alone on the machine (timings feed the fractions).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import yaml

from rt_lib.pipeline.registry import profile_step_shapes
from rt_lib.training.footprint import GPU_FP32_TFLOPS, matmul_rate, measured_hours, planning_table, profile_footprints

#: GPU step times measured so far: rows with one get measured GPU-hours beside the estimates
MEASURED = Path(__file__).with_name("gpu_step_times.yaml")


def markdown(frame: pd.DataFrame) -> str:
    """A Markdown table; numbers with three significant digits and thousands separators."""
    def cell(v: object) -> str:
        if isinstance(v, float):
            return "-" if v != v else f"{v:,.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebook names (default: all)")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--jobs", type=int, default=1, help="steps measured at once")
    args = parser.parse_args()
    start = time.perf_counter()
    rate = matmul_rate()
    measurements = yaml.safe_load(MEASURED.read_text()) or []
    shapes = profile_step_shapes(args.profile, args.notebooks or None)
    table = measured_hours(planning_table(profile_footprints(shapes, jobs=args.jobs), rate),
                           measurements)
    print(f"this CPU, one thread: {rate / 1e9:.0f} GFLOP/s on a 2048 x 2048 float32 product; "
          f"GPU float32 peaks (TFLOP/s): {GPU_FP32_TFLOPS}")
    cols = {"notebook": "notebook", "step": "step", "batch": "batch", "params_M": "params (M)",
            "GFLOP_per_step": "GFLOP / step", "steps": "steps", "runs": "runs",
            "peak_GiB": "peak GiB", "peak": "peak is", "cpu_fraction": "CPU fraction",
            "A100_hours": "A100 h (est.)", "H100_hours": "H100 h (est.)"}
    for entry in measurements:  # measured on that GPU; blank where the step was not
        cols[f"{entry['gpu']}_hours_measured"] = f"{entry['gpu']} h (measured step)"
    print(markdown(table[list(cols)].rename(columns=cols)))
    for entry in measurements:
        print(f"{entry['gpu']}: {entry['source']} ({MEASURED.name})")
    per_notebook = table.groupby("notebook", as_index=False)[["A100_hours", "H100_hours"]].sum()
    print("\nper notebook (GPU-hours, estimated):")
    print(markdown(per_notebook))
    print(f"\ntotal: A100 {per_notebook.A100_hours.sum():,.0f} h, "
          f"H100 {per_notebook.H100_hours.sum():,.0f} h ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
