"""Experiment 04: parenthesis balancing (Dyck-1) on a random transformer (Zhong & Andreas §4.4)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np
import pandas as pd
import torch
from torch import nn

from rt_lib.claims.ledger import Claims
from rt_lib.claims.verdicts import beyond_noise
from rt_lib.experiment import Experiment
from rt_lib.experiments.common import GridResult, StreamGridParams, grid_step_shapes, run_task_grid
from rt_lib.experiments.reporting import check_solves, per_restart
from rt_lib.model import fast_paths
from rt_lib.tasks import Parentheses
from rt_lib.tasks.dyck import CLOSE, OPEN, PAD

NAME = "04_parentheses"


@dataclass(frozen=True)
class ParenthesesParams(StreamGridParams):
    """Notebook 04's parameters; defaults = CPU profile (configs/paper/ has the paper's)."""

    # Left out of the notebook's parameters cell: the smoke test's cut of the evaluation sets,
    # set by configs only.
    CELL_OMITS: ClassVar[frozenset[str]] = frozenset({"eval_rows"})

    max_pairs: int = 12  # balanced strings have min_pairs..max_pairs pairs (paper: 1..30)
    min_pairs: int = 6  # random strings have 2 min_pairs - 1 .. 2 max_pairs characters (paper: 1..60)
    n_test: int = 1000  # fixed test set (paper: 4,000); the training stream never repeats it
    test_seed: int = 0  # the draw of the test set
    widths: tuple[int, ...] = (16, 256)
    steps: int = 650  # optimiser steps for every model (paper: 10,000)
    # "uniform": uniform Dyck words, left padding; "authors": their recursive generator (favours
    # nesting), right padding (rt_lib/tasks/dyck.py says what differs)
    generator: Literal["uniform", "authors"] = "uniform"  # "authors": their recursive generator, right padding

    def task(self) -> Parentheses:
        return Parentheses(max_pairs=self.max_pairs, min_pairs=self.min_pairs, n_test=self.n_test,
                           test_seed=self.test_seed, generator=self.generator)

    def smaller_than_paper(self) -> str | None:
        return how_smaller(self)


#: The paper's task (§4, Table 1; docs/papers.md, random transformers: tasks): balanced strings
#: of 1 to 30 pairs, random strings of 1 to 60 characters.
PAPER_TASK = {"min_pairs": 1, "max_pairs": 30}
SCALE = "width 1024, up to 30 pairs (the paper profile)"


def is_paper_task(task: Parentheses | ParenthesesParams) -> bool:
    """Whether ``task`` (or the parameters that build it) holds the paper's strings: every
    length from one pair to thirty, or a wider range."""
    return (task.min_pairs <= PAPER_TASK["min_pairs"]
            and task.max_pairs >= PAPER_TASK["max_pairs"])


def task_words(min_pairs: int, max_pairs: int) -> str:
    return f"{min_pairs}-{max_pairs} pairs"


def words_of(task: Parentheses | ParenthesesParams) -> str:
    return task_words(task.min_pairs, task.max_pairs)


def how_smaller(task: Parentheses | ParenthesesParams) -> str | None:
    """How ``task`` falls short of the paper's (None: it does not)."""
    if is_paper_task(task):
        return None
    return f"{words_of(task)} against the paper's {task_words(**PAPER_TASK)}"


def majority_baseline(task: Parentheses) -> float:
    """Accuracy of always answering the test set's more common label (~52 %,
    docs/papers.md, random transformers: tasks)."""
    y, _ = task.answers(*task.test)
    return (y == y.mode().values).float().mean().item()


@torch.no_grad()
def simple_rules(task: Parentheses) -> dict[str, float]:
    """Test accuracy of rules a model could learn instead of balancing, the best of them the
    chance line a claim is measured against (the majority class alone is ~52 %):

    - ``equal counts``: balanced iff the string has as many '(' as ')';
    - ``equal counts, ( first, ) last``: that, and it opens with '(' and closes with ')'.
    """
    x, _ = task.test
    y, _ = task.answers(*task.test)
    balanced = y == CLOSE
    paren = (x == OPEN) | (x == CLOSE)  # [n, L]: the string's characters, whatever the padding
    equal = (x == OPEN).sum(-1) == (x == CLOSE).sum(-1)
    at = torch.arange(x.shape[1]).expand_as(x)
    first = torch.where(paren, at, x.shape[1] - 1).min(-1).values
    last = torch.where(paren, at, 0).max(-1).values
    ends = (x.gather(1, first[:, None])[:, 0] == OPEN) & (x.gather(1, last[:, None])[:, 0] == CLOSE)
    return {"majority class": majority_baseline(task),
            "equal counts": (equal == balanced).float().mean().item(),
            "equal counts, ( first, ) last": ((equal & ends) == balanced).float().mean().item()}


def check_beats_rules(claims: Claims, metrics: pd.DataFrame, rules: dict[str, float],
                      n_test: int) -> None:
    """Ours: the random transformer's median test accuracy over restarts, at its widest width,
    above the best simple rule's by more than twice the binomial standard error of the
    difference of two accuracies on the same ``n_test`` strings (a rule has no restarts: the
    test set's draw is its noise)."""
    width = int(metrics.loc[metrics["model"] == "random transformer", "width"].max())
    values = per_restart(metrics, "random transformer", width, "test_acc")
    best_rule, best = max(rules.items(), key=lambda kv: kv[1])
    ours = float(np.median(values))
    noise = math.sqrt((ours * (1 - ours) + best * (1 - best)) / n_test)
    claims.ours("random-beats-simple-rules-parentheses", "the random transformer balances "
                "parentheses better than the best simple rule (counts, first and last character)",
                f"width {width}: median test accuracy {ours:.3f} over {len(values)} restarts; "
                f"best rule '{best_rule}' {best:.3f}",
                beyond_noise(ours - best, noise, f"binomial standard error over {n_test} test strings"))


def check_claims(result: GridResult, rules: dict[str, float], claims: Claims) -> None:
    """Record notebook 04's claims: Table 1's "solves" (the median over restarts at the widest
    width reaches 0.99) on the paper's strings, or, on a smaller task, as a claim of our own
    beside a paper claim not shown; and ours, above the best simple rule
    (:func:`check_beats_rules`)."""
    task = result.task
    smaller = how_smaller(task)
    check_solves(claims, "rt-t1-parentheses", result.metrics, "test_acc",
                 "parenthesis balancing" + (f", {words_of(task)}" if smaller else ""), scale=SCALE,
                 reduced=smaller)
    check_beats_rules(claims, result.metrics, rules, len(task.test[0]))
    claims.done()


EXPERIMENT = Experiment(
    NAME, ParenthesesParams, title="parenthesis balancing (Table 1)",
    step_shapes=grid_step_shapes,
    not_shown_on_cpu={})


def run(params: ParenthesesParams, save_models: bool = True) -> GridResult:
    return run_task_grid(NAME, params, save_models)


@torch.no_grad()
def accuracy_by_length(model: nn.Module, task: Parentheses, bins: int = 6) -> pd.DataFrame:
    """Test accuracy per string-length bin, split by the true answer (balanced or not)."""
    x, _ = task.test
    y, where = task.answers(*task.test)
    model.eval()
    logits = fast_paths.last_logits(model, x) if task.last_only else model(x)[torch.arange(len(x)), where]
    right = (logits.argmax(-1) == y).float()
    pos = (x != PAD).sum(-1) - 1  # string length: the tokens before '?'
    balanced = y == CLOSE
    edges = torch.linspace(0, task.max_len, bins + 1).round().long()
    out = []
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist()):
        in_bin = (pos > lo) & (pos <= hi)
        for label, mask in (("balanced", in_bin & balanced), ("unbalanced", in_bin & ~balanced)):
            if mask.any():
                out.append({"length": f"{lo + 1}-{hi}", "answer": label, "n": int(mask.sum()),
                            "accuracy": round(right[mask].mean().item(), 3)})
    return pd.DataFrame(out)
