"""The CPU recipes of notebooks 01, 02 and 04 re-chosen on a validation split (issue: "recipes
justified on the reported split").

The notebooks' introductions justify the random transformer's lr, width (01, 04) and task size
(02) by test accuracy on the very test split their claims report.  This script compares the
candidate settings those introductions discuss and chooses among them on a VALIDATION split that
is disjoint from the test split; test accuracy is printed only as a report, never used.

    RT_THREADS=1 nice .venv/bin/python benchmarks/recipe_validation.py

Every run is the random transformer (the model the claims are about), trained through the
notebook's own code (its Params, ``train_grid``: the same optimiser, schedule, batches and
restart seeds as the notebook, derived from ``seed``) for the notebook's own steps:

- **01** (modular addition): a fixed 10 % of the training pairs (``--val-fraction``, shuffled
  with ``--val-seed``) is held out as validation; the model trains on the other 90 %.  The test
  pairs are the notebook's, untouched.
- **02, 04** (streams): the validation set is ``n_val`` sequences drawn from the task's
  distribution with a generator seeded by ``--val-seed`` (the test set is drawn with
  ``test_seed`` = 0, each training batch with a seed derived from the run's seed and step), rows
  equal to a test sequence redrawn (as the training stream does), and the training stream then
  excludes the validation sequences as well as the test ones: validation sequences are unseen,
  exactly as test sequences are.  (Choosing by final training loss, as benchmarks/
  table1_recipe.py does, would not do for 02: its stream repeats each of its ~930 sequences
  about 70 times, so the training loss measures recall of seen sequences.)

Rules, fixed before any run (``choose``):

- **lr**: the highest median validation accuracy over seeds; candidates within 0.005 of it tie,
  and a tie goes to the higher minimum over seeds (within 0.005), then the lower median
  validation loss.
- **width**: the smallest width whose median validation accuracy reaches 0.99 (the claims'
  "solves" threshold, ``check_solves``); if none does, the highest median.
- **task size** (02): every other candidate is larger than the profile's task in keys, markers or
  values; the profile's choice (the largest task the CPU width solves) stands if the profile's
  task reaches 0.99 median validation accuracy and no larger one does.

Prints one line per run and a table per candidate (validation accuracy median [min, max], final
training loss, test accuracy as a report), then each question's choice; writes one CSV row per
run (``--csv``) with every setting that rebuilds it.  ``--only 01`` runs one notebook's
candidates, ``--candidate NAME`` one candidate; ``--candidates all`` adds settings the
notebooks do not discuss (lr 1e-3 and 3e-2, width 512), which do not fit the ~25 CPU minutes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from rt_lib.experiments.common import GridParams, train_grid
from rt_lib.experiments.modular_addition import ModularAdditionParams
from rt_lib.experiments.needle_in_a_haystack import NeedleParams
from rt_lib.experiments.parentheses import ParenthesesParams
from rt_lib.tasks.base import Batch, FiniteTask, StreamTask

KIND = "random transformer"
PARAMS = {"01": ModularAdditionParams, "02": NeedleParams, "04": ParenthesesParams}
PROFILE_WIDTH = 256  # the CPU profiles' random-transformer width (16 is Table 1's failing width)
SOLVES = 0.99  # check_solves' threshold
TIE = 0.005


# --------------------------------------------------------------------------- validation splits

@dataclass
class ValidatedFinite(FiniteTask):
    """A finite task whose training pairs lost a validation split: eval sets train, val, test."""

    val: Batch | None = field(default=None, repr=False)

    def eval_sets(self) -> dict[str, Batch]:
        return {"train": self.train, "val": self.val, "test": self.test}


def finite_with_validation(task: FiniteTask, fraction: float, val_seed: int) -> ValidatedFinite:
    """``task`` with ``fraction`` of its training pairs (a fixed shuffle by ``val_seed``) moved to
    a validation split; the test split is the task's own."""
    x, y = task.train
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(val_seed))
    n_val = round(fraction * len(x))
    val_idx, train_idx = order[:n_val].sort().values, order[n_val:].sort().values
    out = ValidatedFinite(name=task.name, d_vocab=task.d_vocab, d_vocab_out=task.d_vocab_out,
                          n_ctx=task.n_ctx, train=(x[train_idx], y[train_idx]), test=task.test,
                          last_only=task.last_only, val=(x[val_idx], y[val_idx]))
    keys = {r.numpy().tobytes() for r in out.val[0]}
    assert not keys & {r.numpy().tobytes() for r in task.test[0]}, "validation meets test"
    assert not keys & {r.numpy().tobytes() for r in out.train[0]}, "validation meets train"
    return out


class ValidatedStream(StreamTask):
    """``inner``'s test set and distribution, plus a validation set of ``n_val`` draws seeded by
    ``val_seed`` (test sequences redrawn); the training stream (StreamTask.get_batch, the same
    draws as ``inner``'s but for rows that hit a validation sequence) excludes both sets."""

    def __init__(self, inner: StreamTask, n_val: int, val_seed: int) -> None:
        # StreamTask.__init__ is not called: it would draw a test set; the inner task's is kept.
        self.inner = inner
        self.name, self.d_vocab, self.d_vocab_out = inner.name, inner.d_vocab, inner.d_vocab_out
        self.n_ctx, self.last_only = inner.n_ctx, inner.last_only
        self.test = inner.test
        gen = torch.Generator().manual_seed(val_seed)
        xs, ys, have = [], [], 0
        for _ in range(self.max_draws):
            x, y = inner.sample(n_val - have, gen)
            keep = ~inner.is_test_sequence(x)
            xs.append(x[keep])
            ys.append(y[keep])
            have += int(keep.sum())
            if have == n_val:
                break
        else:
            raise ValueError(f"{inner.name}: could not draw {n_val} validation sequences")
        self.val = (torch.cat(xs), torch.cat(ys))
        self._val_rows = {r.numpy().tobytes() for r in self.val[0]}

    def sample(self, n: int, gen: torch.Generator) -> Batch:
        return self.inner.sample(n, gen)

    def is_test_sequence(self, tokens: torch.Tensor) -> torch.Tensor:
        """Rows the training stream must not show: test or validation sequences."""
        val = torch.tensor([r.numpy().tobytes() in self._val_rows for r in tokens],
                           dtype=torch.bool)
        return self.inner.is_test_sequence(tokens) | val

    def eval_sets(self) -> dict[str, Batch]:
        return {"val": self.val, "test": self.test}

    def loss(self, logits, targets):
        return self.inner.loss(logits, targets)

    def scores(self, logits, targets):
        return self.inner.scores(logits, targets)


# --------------------------------------------------------------------------- candidates

@dataclass(frozen=True)
class Candidate:
    notebook: str
    name: str
    settings: tuple[tuple[str, object], ...]  # Params fields besides the notebook's defaults
    questions: tuple[str, ...]  # which choices it takes part in: "lr", "width", "task size"
    discussed: bool = True  # named in the notebook's introduction (else only --candidates all)

    def value(self, key: str, defaults: GridParams):
        return dict(self.settings).get(key, getattr(defaults, key))


def candidates() -> list[Candidate]:
    """The settings each notebook's introduction discusses (``discussed``), and a few more."""
    c = []
    # 01: width 256 lr 1e-2 (profile); lr 3e-3 at 256; width 128 ("1 of 3 seeds generalised")
    c += [Candidate("01", "w256 lr1e-2", (), ("lr", "width")),
          Candidate("01", "w256 lr3e-3", (("lr", 3e-3),), ("lr",)),
          Candidate("01", "w128 lr1e-2", (("widths", (128,)),), ("width",)),
          Candidate("01", "w256 lr1e-3", (("lr", 1e-3),), ("lr",), False),
          Candidate("01", "w256 lr3e-2", (("lr", 3e-2),), ("lr",), False),
          Candidate("01", "w512 lr1e-2", (("widths", (512,)),), ("width",), False)]
    # 02: the profile's 2 keys / 2 markers / 16 values against the larger tasks of its table
    # (at the profile's width, batch, lr and steps); lr 3e-3 (the table's other lr)
    c += [Candidate("02", "k2 m2 v16 lr1e-2", (), ("task size", "lr")),
          Candidate("02", "k4 m4 v16 lr1e-2", (("max_keys", 4), ("n_markers", 4)), ("task size",)),
          Candidate("02", "k2 m2 v64 lr1e-2", (("n_values", 64),), ("task size",)),
          Candidate("02", "k2 m2 v127 lr1e-2", (("n_values", 127),), ("task size",)),
          Candidate("02", "k2 m2 v16 lr3e-3", (("lr", 3e-3),), ("lr",)),
          Candidate("02", "k2 m2 v16 lr1e-3", (("lr", 1e-3),), ("lr",), False),
          Candidate("02", "k2 m2 v16 lr3e-2", (("lr", 3e-2),), ("lr",), False)]
    # 04: width 256 (profile) against 128 at the profile's 650 steps
    c += [Candidate("04", "w256 lr1e-2", (), ("width", "lr")),
          Candidate("04", "w128 lr1e-2", (("widths", (128,)),), ("width",)),
          Candidate("04", "w256 lr3e-3", (("lr", 3e-3),), ("lr",), False),
          Candidate("04", "w256 lr3e-2", (("lr", 3e-2),), ("lr",), False),
          Candidate("04", "w512 lr1e-2", (("widths", (512,)),), ("width",), False)]
    return c


def params_of(cand: Candidate, seeds: int, seed: int, steps: int | None = None) -> GridParams:
    settings = {"widths": (PROFILE_WIDTH,), **dict(cand.settings)}
    if steps is not None:  # smoke tests only: the notebooks' own steps otherwise
        settings |= {"steps": steps, "warmup_steps": min(10, steps), "eval_every": max(steps // 4, 1)}
    return PARAMS[cand.notebook](models=(KIND,), restarts=seeds, seed=seed, threads=1, **settings)


def validated_task(params: GridParams, args) -> FiniteTask | StreamTask:
    task = params.task()
    if isinstance(task, FiniteTask):
        return finite_with_validation(task, args.val_fraction, args.val_seed)
    assert args.val_seed != params.test_seed, "the validation seed must differ from test_seed"
    return ValidatedStream(task, args.n_val or len(task.test[0]), args.val_seed)


# --------------------------------------------------------------------------- choosing

def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (nb, name), g in runs.groupby(["notebook", "candidate"], sort=False):
        row = {"notebook": nb, "candidate": name, "profile": bool(g["profile"].iloc[0]),
               "width": int(g["width"].iloc[0]), "lr": float(g["lr"].iloc[0]), "seeds": len(g)}
        for col in ("val_acc", "test_acc"):
            row[f"{col}_median"] = statistics.median(g[col])
            row[f"{col}_min"], row[f"{col}_max"] = g[col].min(), g[col].max()
        row["val_loss_median"] = statistics.median(g["val_loss"])
        row["train_loss_median"] = statistics.median(g["train_loss"])
        row["converged"] = int((g["budget"] == "converged").sum())
        rows.append(row)
    return pd.DataFrame(rows)


def choose(summary: pd.DataFrame, members: list[str], question: str) -> tuple[str, str]:
    """(chosen candidate, why) among ``members`` of one notebook's ``question``."""
    s = summary.set_index("candidate").loc[members]
    if question == "width":
        solved = s[s.val_acc_median >= SOLVES].sort_values("width")
        if len(solved):
            return solved.index[0], (f"smallest width with median val_acc >= {SOLVES}; "
                                     f"reaching it: {', '.join(solved.index)}")
        best = s.val_acc_median.idxmax()
        return best, f"no width reaches {SOLVES}; highest median val_acc"
    if question == "task size":
        solved = s[s.val_acc_median >= SOLVES]
        profile = s.index[s.profile][0]
        larger = [c for c in solved.index if c != profile]
        if larger:
            return larger[0], f"larger task(s) reaching {SOLVES}: {', '.join(larger)}"
        if profile in solved.index:
            return profile, f"only the profile's task reaches median val_acc {SOLVES}"
        return s.val_acc_median.idxmax(), f"no task reaches {SOLVES}; highest median val_acc"
    tied = s[s.val_acc_median >= s.val_acc_median.max() - TIE]
    tied = tied[tied.val_acc_min >= tied.val_acc_min.max() - TIE]
    best = tied.val_loss_median.idxmin()
    why = "highest median val_acc, then min over seeds"
    if len(tied) > 1:
        why += f"; tied on both with {', '.join(c for c in tied.index if c != best)}: lowest val_loss"
    return best, why


# --------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="01,02,04", help="notebooks, comma-separated")
    ap.add_argument("--candidates", choices=("discussed", "all"), default="discussed")
    ap.add_argument("--candidate", action="append", default=None,
                    help="run only this candidate (repeatable), e.g. 'w256 lr3e-3'")
    ap.add_argument("--seeds", type=int, default=3, help="restarts per candidate")
    ap.add_argument("--seed", type=int, default=0, help="the notebooks' seed (restart seeds derive from it)")
    ap.add_argument("--val-seed", type=int, default=1, help="validation split / draw seed")
    ap.add_argument("--val-fraction", type=float, default=0.1, help="01: share of training pairs held out")
    ap.add_argument("--n-val", type=int, default=None,
                    help="02/04: validation sequences (default: as many as the test set's)")
    ap.add_argument("--steps", type=int, default=None,
                    help="smoke test only: steps per run (default: the notebook's own)")
    ap.add_argument("--csv", default="results/recipe_validation.csv",
                    help="per-run rows (results/ is not tracked; the committed copy lives in "
                         "benchmarks/results/)")
    args = ap.parse_args()

    only = args.only.split(",")
    chosen = [c for c in candidates() if c.notebook in only
              and (c.discussed or args.candidates == "all")
              and (args.candidate is None or c.name in args.candidate)]
    if not chosen:
        raise SystemExit("no candidate selected")
    print(f"command options: {vars(args)}", flush=True)
    runs, t_all, cpu_all = [], time.perf_counter(), time.process_time()
    for cand in chosen:
        params = params_of(cand, args.seeds, args.seed, args.steps)
        task = validated_task(params, args)
        t0, c0 = time.perf_counter(), time.process_time()
        m = train_grid(task, params).metrics
        cpu = time.process_time() - c0
        n_val = len(task.val[0])
        for _, row in m.iterrows():
            runs.append({
                "notebook": cand.notebook, "candidate": cand.name, "profile": not cand.settings,
                "questions": "+".join(cand.questions),
                "settings": " ".join(f"{k}={v}" for k, v in cand.settings) or "(profile)",
                "width": int(row["width"]), "lr": params.lr, "steps": int(row["steps"]),
                "batch_size": params.batch_size, "restart": int(row["restart"]),
                "seed": args.seed, "run_seed": int(row["seed"]), "val_seed": args.val_seed,
                "n_val": n_val, "n_train": len(task.train[0]) if hasattr(task, "train") else None,
                "val_acc": row["val_acc"], "val_loss": row["val_loss"],
                "train_loss": row["train_loss"], "budget": row["budget"],
                "train_acc": row.get("train_acc"), "test_acc": row["test_acc"],
                "cpu_s": round(cpu / len(m), 1), "wall_s": round(row["wall_time_s"], 1)})
            r = runs[-1]
            print(f"{cand.notebook} {cand.name:18s} restart {r['restart']}: val_acc "
                  f"{r['val_acc']:.3f} train_loss {r['train_loss']:.4f} ({r['budget']}) "
                  f"test_acc {r['test_acc']:.3f} [report only]", flush=True)
        print(f"   {cand.notebook} {cand.name}: {time.perf_counter() - t0:.0f} s wall, "
              f"{cpu:.0f} s CPU, n_val {n_val}", flush=True)
    runs = pd.DataFrame(runs)
    Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.csv, index=False)

    summary = summarise(runs)
    show = summary.copy()
    for col in ("val_acc", "test_acc"):
        show[col] = [f"{a:.3f} [{b:.3f}, {c:.3f}]" for a, b, c in
                     zip(show[f"{col}_median"], show[f"{col}_min"], show[f"{col}_max"])]
    show["train_loss"] = show["train_loss_median"].map(lambda v: f"{v:.4f}")
    show["val_loss"] = show["val_loss_median"].map(lambda v: f"{v:.4f}")
    show["converged"] = [f"{a}/{b}" for a, b in zip(show["converged"], show["seeds"])]
    show = show[["notebook", "candidate", "profile", "val_acc", "val_loss", "train_loss",
                 "converged", "test_acc"]].rename(columns={
                     "val_acc": "val_acc median [min, max]", "val_loss": "val_loss median",
                     "train_loss": "train_loss median", "test_acc": "test_acc (report only)"})
    print("\n" + show.to_string(index=False))
    print()
    for nb, g in runs.groupby("notebook", sort=False):
        questions = sorted({q for qs in g["questions"] for q in qs.split("+")})
        for q in questions:
            members = list(dict.fromkeys(c for c, qs in zip(g["candidate"], g["questions"])
                                         if q in qs.split("+")))
            if len(members) < 2:
                continue
            best, why = choose(summary[summary.notebook == nb], members, q)
            profile = bool(summary[(summary.notebook == nb) & (summary.candidate == best)]
                           ["profile"].iloc[0])
            print(f"{nb} {q}: validation chooses '{best}' "
                  f"({'the CPU profile' if profile else 'NOT the CPU profile'}) - {why}; "
                  f"among {', '.join(members)}")
    print(f"\ntotal: {time.perf_counter() - t_all:.0f} s wall, "
          f"{time.process_time() - cpu_all:.0f} s CPU; runs written to {args.csv}")


if __name__ == "__main__":
    main()
