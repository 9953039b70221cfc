"""Seed-to-seed noise of notebook 08 (TinyStories) in its CPU profile.

Notebook 08 records one seed per model and width (``restarts = 1``), and its three claims rest on
small differences of validation cross-entropy (nats per token, 200 held-out windows of 64 tokens):

* rt-fig4-wider-better: the random transformer's cross-entropy falls by at least
  0.02 from each width to the next (32, 64, 128, 256);
* rt-fig4-trained-beats-random: trained minus random < 0 at widths 32, 64, 128;
* rt-fig4-16x-width: the narrowest random width whose cross-entropy is at or below the
  trained width-32 model's (the paper: 512, i.e. 16x).

This script runs the notebook's CPU profile with ``restarts = 3`` through the project's own runner
(``./run_all.sh --only 08 --set restarts=3``, an exploration run into
``<results>/08_tinystories+restarts=3/``, the profile's results untouched), reads the final
validation cross-entropy of every run from that folder's ``metrics.csv`` (one row per model,
width and restart; column ``valid_loss``) and prints, per model and width, each seed's value, the
mean, median, min, max, spread (max - min) and sample standard deviation; then the differences
the claims use, paired by restart (restart r has the same seed at every model and width):

* ``random_next_width``: random CE at the next width minus random CE at this one;
* ``trained_minus_random``: trained minus random CE at each width both kinds trained;
* ``random_minus_trained32``: random CE at each width minus the trained width-32 CE,

each with the same statistics and the number of seeds in which the claim's own test holds.
The table is also written as CSV (``--csv``).  Restart 0's seed is the one the committed notebook
used, so its column reproduces the committed figure-4 table (with RT_THREADS=1).

    RT_THREADS=1 nice .venv/bin/python benchmarks/tinystories_seeds.py \\
        --results /tmp/ts_seeds --csv benchmarks/results/tinystories_seeds.csv > ts_seeds.log 2>&1

Time: the committed notebook (one restart) took 11 minutes on the project's 2-core machines,
nearly all of it training; three restarts took 41 minutes (2,463 s of training, one thread, the
other core busy with another benchmark; benchmarks/results/tinystories_seeds.md).  ``--reuse``
skips the run and only re-reads an existing results folder.  A notebook cell that fails after
the training cell (samples, claims) still leaves a complete metrics.csv, which is then read.

Also printed: ``ranges_apart`` (the claim's comparison by rt_lib.claims.verdicts.larger: every seed of
one side beyond every seed of the other) and ``pooled_seed_std`` per model kind (the root mean
of the per-width variances; ``max``: the largest width's std), the seed noise of a single run.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "08_tinystories"
RANDOM, TRAINED = "random transformer", "trained transformer"
STEP_THRESHOLD = -0.02  # notebook 08: each width step must lower the random CE by >= 0.02


def run_notebook(results: Path, restarts: int, log_output: bool) -> float:
    """``./run_all.sh --only 08 --set restarts=N`` with RT_RESULTS=results; wall seconds."""
    cmd = ["./run_all.sh", "--only", "08", "--set", f"restarts={restarts}"]
    if log_output:
        cmd.append("--log-output")
    env = os.environ | {"RT_RESULTS": str(results)}
    env.setdefault("RT_THREADS", "1")
    print(f"$ RT_RESULTS={results} RT_THREADS={env['RT_THREADS']} {' '.join(cmd)}", flush=True)
    start = time.perf_counter()
    rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    wall = time.perf_counter() - start
    if rc != 0:
        # metrics.csv is written by the training cell; a later cell that fails (the samples,
        # the claims) leaves it complete, and run_folder/seed_table check what is there.
        print(f"warning: run_all.sh exited {rc} after {wall:.0f} s; reading whatever metrics.csv "
              "the training cell wrote", flush=True)
    return wall


def run_folder(results: Path, restarts: int) -> Path:
    """The exploration folder the runner wrote (``08_tinystories+restarts=N``)."""
    expected = results / f"{NOTEBOOK}+restarts={restarts}"
    if (expected / "metrics.csv").exists():
        return expected
    found = sorted(p.parent for p in results.glob(f"{NOTEBOOK}+*/metrics.csv")
                   if f"restarts={restarts}" in p.parent.name)
    if len(found) != 1:
        raise SystemExit(f"no single {NOTEBOOK}+...restarts={restarts}/metrics.csv under {results}"
                         f" (found {[str(p) for p in found]})")
    return found[0]


def stats(values: pd.Series) -> dict:
    v = values.astype(float)
    return {"mean": v.mean(), "median": v.median(), "min": v.min(), "max": v.max(),
            "spread": v.max() - v.min(), "std": v.std(ddof=1) if len(v) > 1 else math.nan}


def seed_table(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per quantity: per-seed values (columns seed_<restart>) and their statistics."""
    ce = metrics.pivot_table(index=["model", "width"], columns="restart", values="valid_loss")
    restarts = list(ce.columns)
    seeds = metrics.groupby("restart")["seed"].first()
    rows = []

    def add(quantity: str, model: str, width: int | str, ref: int | str, values: pd.Series,
            holds: pd.Series | None = None, lower: pd.Series | None = None,
            upper: pd.Series | None = None) -> None:
        """``lower``/``upper``: the two sets of seeds the claim compares (the claim: every
        ``lower`` below every ``upper``); ``ranges_apart`` is rt_lib.claims.verdicts.larger's test."""
        row = {"quantity": quantity, "model": model, "width": width, "ref_width": ref}
        row |= {f"seed_{r}": float(values[r]) for r in restarts}
        row |= stats(values)
        row["holds_in"] = f"{int(holds.sum())}/{len(holds)}" if holds is not None else ""
        row["ranges_apart"] = ("" if lower is None else "yes" if lower.max() < upper.min()
                               else "wrong way" if lower.min() > upper.max() else "overlap")
        rows.append(row)

    for (model, width), values in ce.iterrows():
        add("valid_ce", model, width, "", values)
    if RANDOM in ce.index.get_level_values(0):
        rand = ce.loc[RANDOM]
        widths = list(rand.index)
        for w, nxt in zip(widths, widths[1:]):
            d = rand.loc[nxt] - rand.loc[w]
            add("random_next_width", RANDOM, nxt, w, d, d <= STEP_THRESHOLD,
                rand.loc[nxt], rand.loc[w])
        if TRAINED in ce.index.get_level_values(0):
            full = ce.loc[TRAINED]
            for w in full.index.intersection(rand.index):
                d = full.loc[w] - rand.loc[w]
                add("trained_minus_random", "trained - random", w, w, d, d < 0,
                    full.loc[w], rand.loc[w])
            ref = min(full.index)
            for w in widths:
                d = rand.loc[w] - full.loc[ref]
                add("random_minus_trained32", f"random - trained@{ref}", w, ref, d, d <= 0,
                    rand.loc[w], full.loc[ref])
    # One run's seed noise per model kind, pooled over its widths (root mean variance): what
    # rt_lib.experiments.tinystories.SEED_NOISE holds (a comparison of single runs' margin).
    for model in ce.index.get_level_values(0).unique():
        var = ce.loc[model].var(axis=1, ddof=1)
        rows.append({"quantity": "pooled_seed_std", "model": model, "width": "all",
                     "ref_width": "", "std": float(var.mean() ** 0.5),
                     "max": float(var.max() ** 0.5), "holds_in": "", "ranges_apart": ""})
    table = pd.DataFrame(rows)
    table.attrs["seeds"] = {int(r): int(s) for r, s in seeds.items()}
    return table


def matching_widths(metrics: pd.DataFrame) -> dict[int, int | None]:
    """Per restart: the narrowest random width at or below the trained narrowest width's CE."""
    out = {}
    for r, m in metrics.groupby("restart"):
        rand = m[m.model == RANDOM].set_index("width")["valid_loss"]
        full = m[m.model == TRAINED].set_index("width")["valid_loss"]
        if rand.empty or full.empty:
            continue
        hit = rand.index[rand <= full.loc[min(full.index)]]
        out[int(r)] = int(hit.min()) if len(hit) else None
    return out


def markdown(table: pd.DataFrame) -> str:
    cols = [c for c in table.columns if c != "ref_width"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in table.iterrows():
        cells = []
        for c in cols:
            v = row[c]
            if isinstance(v, float):
                cells.append("" if math.isnan(v) else f"{v:.4f}" if row["quantity"] ==
                             "pooled_seed_std" else f"{v:+.4f}" if row["quantity"] != "valid_ce"
                             and c not in ("spread", "std") else f"{v:.4f}")
            elif c == "width" and row["ref_width"] != "" and row["quantity"] == "random_next_width":
                cells.append(f"{row['ref_width']}->{v}")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", type=Path, default=None,
                    help="RT_RESULTS for the run (default: a new temporary folder)")
    ap.add_argument("--csv", type=Path, default=None, help="write the table here as CSV")
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--reuse", action="store_true",
                    help="do not run: read an existing run under --results")
    ap.add_argument("--log-output", action="store_true",
                    help="pass --log-output to the runner (stream the notebook's cell output)")
    args = ap.parse_args(argv)

    results = (args.results or Path(tempfile.mkdtemp(prefix="tinystories_seeds_"))).resolve()
    results.mkdir(parents=True, exist_ok=True)
    wall = None
    if not args.reuse:
        wall = run_notebook(results, args.restarts, args.log_output)
        print(f"run_all.sh wall time: {wall:.0f} s ({wall / 60:.1f} min)", flush=True)
    folder = run_folder(results, args.restarts)
    metrics = pd.read_csv(folder / "metrics.csv")
    runs = metrics.groupby(["model", "width"])["restart"].nunique()
    if (runs != args.restarts).any():
        raise SystemExit(f"{folder / 'metrics.csv'}: not {args.restarts} restarts per model and "
                         f"width:\n{runs.to_string()}")
    print(f"\nper-run metrics: {folder / 'metrics.csv'} ({len(metrics)} runs)")
    cols = ["model", "width", "restart", "seed", "valid_loss", "steps", "wall_time_s"]
    print(metrics[[c for c in cols if c in metrics]].to_string(index=False))
    timings = folder / "metrics.timings.csv"  # rt_lib.runtime.io.save_csv keeps wall times apart
    if "wall_time_s" not in metrics and timings.exists():
        wall_s = pd.read_csv(timings).groupby(["model", "width"])["wall_time_s"].sum()
        print("training seconds per model and width (all restarts):\n" + wall_s.round(0).to_string())
        print(f"training time in the notebook (sum of runs): {wall_s.sum():.0f} s")

    table = seed_table(metrics)
    print(f"\nseeds by restart: {table.attrs['seeds']}")
    print("\nvalidation cross-entropy (nats/token) per seed, and the claims' paired differences")
    print("(random_next_width: CE(width) - CE(previous width), the claim needs <= "
          f"{STEP_THRESHOLD}; trained_minus_random: the claim needs < 0; random_minus_trained32: "
          "<= 0 means the random model reached the trained narrowest one):\n")
    print(markdown(table))
    print(f"\nnarrowest random width reaching the trained width-{min(metrics.width)} CE, per "
          f"restart: {matching_widths(metrics)}")
    if args.csv:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        table.to_csv(args.csv, index=False, float_format="%.5f")
        print(f"\nCSV: {args.csv}")
    if wall is not None:
        print(f"wall time: {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
