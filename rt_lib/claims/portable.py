"""Comparing a notebook's outputs with the committed ones on another numeric platform.

Where this machine's fingerprint matches the recording's (:mod:`rt_lib.runtime.fingerprint`), nbval
compares every output bit for bit after ``tests/nbval_sanitize.cfg``.  Elsewhere last-bit rounding,
grown by training, acts like another seed, and the *portable* comparison asks what must hold on
any platform instead:

1. **the text with numbers masked** (``tests/nbval_sanitize_portable.cfg`` after the strict file:
   every number is ``N``, runs of spaces one space, embedded images and explorer ids one token):
   the same cells print the same things in the same order;
2. **every claim's status exactly**: each line ``[STATUS] id: ...`` a notebook prints
   (:class:`rt_lib.claims.ledger.Claim`) has the recording's status;
3. **every claim's numbers within its tolerance** (:func:`tolerance_of`): a bound stated in the
   ledger beside the claim, else :data:`DEFAULT_TOLERANCE`; a claim whose numbers are identities
   (which heads, which epoch) states ``status_only`` with why, and only its status is compared.

:func:`install` hooks this into nbval (the root ``conftest.py`` calls it); ``scripts/
compare_outputs.py --portable`` applies the same comparison to notebooks already run (e.g. a
``./run_all.sh`` under another kernel path).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from rt_lib.claims.ledger import LEDGER
from rt_lib.runtime.io import PROJECT_ROOT

STRICT_SANITIZE = PROJECT_ROOT / "tests" / "nbval_sanitize.cfg"
PORTABLE_SANITIZE = PROJECT_ROOT / "tests" / "nbval_sanitize_portable.cfg"

#: A claim line as :class:`rt_lib.claims.ledger.Claim` prints it.
#: The task it ran on, where reduced (or not said), is part of the line's head (Claim.__str__).
CLAIM_LINE = re.compile(r"^\[(HOLDS|FAILS|NOT SHOWN(?:: \w+)?|NOT CHECKED)\]( \(ours\))? ([\w.-]+)"
                        r"( \((?:reduced task: .*?|task size not said)\))?: (.*)$", re.MULTILINE)
#: A number as the notebooks print them: sign, thousands separators, decimals, exponent.
NUMBER = re.compile(r"(?<![\w.])[-+]?\d(?:\d|_\d|,\d{3}(?!\d))*(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Tolerance:
    """Two numbers agree when they differ by at most ``abs`` or by at most ``rel`` of the larger
    magnitude (accuracies and shares move in absolute terms, epochs and counts in relative)."""

    abs: float
    rel: float
    why: str = ""
    numbers: bool = True  # False: the status alone is compared (see STATUS_ONLY)

    def agree(self, a: float, b: float) -> bool:
        return abs(a - b) <= max(self.abs, self.rel * max(abs(a), abs(b)))

    def __str__(self) -> str:
        return f"abs {self.abs:g} or rel {self.rel:g}" if self.numbers else "status only"


def status_only(why: str) -> Tolerance:
    """A claim whose numbers are not measurements that move a little but identities that move
    with the rounding as with the seed (which heads generalised, in which order, by which epoch):
    its status is compared, its numbers not."""
    return Tolerance(abs=0.0, rel=0.0, why=why, numbers=False)


#: For claims whose ledger entry states none, and for claims of our own.  The seed-to-seed
#: spread of the CPU profile's small models: accuracies of the width-16 transformers of notebook
#: 01 move by up to 0.05 between platforms (issue report: 0.201 against 0.247), an epoch at which
#: a run reaches a threshold by up to a third (notebook 11: 3,020 against 2,280).
DEFAULT_TOLERANCE = Tolerance(abs=0.1, rel=0.35, why="the CPU profile's seed-to-seed spread")


#: Claims of our own (not in the ledger) whose numbers move further than the default, measured
#: under another kernel path (benchmarks/platform_claims.py; benchmarks/results/platform_claims.md).
OURS: dict[str, Tolerance] = {
    "circle-among-top-pcs": status_only(
        "its text names each restart's most circular pair of principal components, and which pair "
        "moves with the rounding as with the seed (PCs 5/6 recorded, 2/4 on one restart under "
        "MKL's COMPATIBLE code path, its circularity 0.96 either way)"),
    "nanda-positions-more-alike-all-dims": status_only(
        "one run a side: a run's r over all dims moves over most of its range with the rounding "
        "as with the seed (T_nanda's 0.59 recorded, 0.28 under ATen's AVX-512 kernels, -0.07 on "
        "an Intel Xeon)"),
    "random-solves-fewer-heads-d128": status_only(
        "its numbers are the heads each model solves, which move with the rounding as with the "
        "seed"),
}


@cache
def ledger_tolerance(claim_id: str):
    """The tolerance the ledger states beside a claim (``tolerance: {abs, rel, why}``, or
    ``tolerance: {status_only: why}``): how far its numbers may move on another numeric platform
    (:mod:`rt_lib.claims.portable`); None if none."""
    entry = next((e for e in yaml.safe_load(LEDGER.read_text()) if e.get("id") == claim_id), None)
    raw = (entry or {}).get("tolerance")
    if raw is None:
        return None
    try:
        if "status_only" in raw:
            return status_only(str(raw["status_only"]))
        return Tolerance(abs=float(raw["abs"]), rel=float(raw["rel"]), why=str(raw["why"]))
    except (TypeError, KeyError, ValueError) as err:
        raise ValueError(f"{LEDGER}: {claim_id}: tolerance must be {{abs, rel, why}} or "
                         f"{{status_only: why}}, got "
                         f"{raw!r} ({err})") from None



def tolerance_of(claim_id: str) -> Tolerance:
    """The tolerance the ledger states beside ``claim_id`` (``tolerance: {abs, rel, why}`` or
    ``{status_only: why}``), or :data:`OURS` for a claim of our own, else
    :data:`DEFAULT_TOLERANCE`."""
    return ledger_tolerance(claim_id) or OURS.get(claim_id) or DEFAULT_TOLERANCE


def numbers(text: str) -> list[float]:
    """Every number in ``text``, in order (``3,020`` is 3020)."""
    return [float(m.group().replace(",", "").replace("_", "")) for m in NUMBER.finditer(text)]


def claim_lines(text: str) -> dict[str, tuple[str, str]]:
    """{claim id: (status, the rest of its line)} of every claim line in ``text``."""
    return {m.group(3): (m.group(1), m.group(5)) for m in CLAIM_LINE.finditer(text)}


def claim_problems(reference: str, test: str) -> list[str]:
    """What keeps ``test``'s claim lines from agreeing with ``reference``'s: a claim missing or
    added, a status that differs, a count of numbers that differs, or a number outside the claim's
    tolerance.  Empty when they agree."""
    ref, new = claim_lines(reference), claim_lines(test)
    problems = [f"{cid}: recorded, not printed here" for cid in ref if cid not in new]
    problems += [f"{cid}: printed here, not recorded" for cid in new if cid not in ref]
    for cid in (c for c in ref if c in new):
        (status_a, rest_a), (status_b, rest_b) = ref[cid], new[cid]
        if status_a != status_b:
            problems.append(f"{cid}: status {status_b} here, {status_a} recorded")
            continue
        tol = tolerance_of(cid)
        if not tol.numbers:
            continue
        a, b = numbers(rest_a), numbers(rest_b)
        if len(a) != len(b):
            problems.append(f"{cid}: {len(b)} numbers here, {len(a)} recorded")
            continue
        far = [(x, y) for x, y in zip(a, b) if not tol.agree(x, y)]
        if far:
            pairs = ", ".join(f"{y:g} against {x:g}" for x, y in far[:4])
            problems.append(f"{cid}: {pairs} recorded, beyond its tolerance ({tol})")
    return problems


#: How nbval reads a sanitize file (``nbval.plugin.get_sanitize_patterns``): a ``regex:`` line
#: directly followed by a ``replace:`` line; everything else is a comment.
RULE = re.compile(r"^regex: (.*)$\n^replace: (.*)$", re.MULTILINE)


def sanitize_rules(paths: Iterable[Path]) -> list[tuple[re.Pattern, str]]:
    """The (regex, replacement) rules of nbval sanitize files, in order, read as nbval reads them."""
    return [(re.compile(regex), replace) for path in paths
            for regex, replace in RULE.findall(Path(path).read_text())]


def masked(text: str, rules: list[tuple[re.Pattern, str]]) -> str:
    for pattern, replace in rules:
        text = pattern.sub(replace, text)
    return text


def tables_once(outputs: Iterable[Any]) -> list[Any]:
    """Outputs with a table's plain-text twin left out where its HTML is there: pandas wraps the
    plain text by the width of its widest cell, which moves with the numbers; the HTML holds the
    same table, and is compared (masked) instead."""
    out = []
    for o in outputs:
        data = o.get("data") if hasattr(o, "get") else None
        if data and "text/html" in data and "text/plain" in data:
            from nbformat import from_dict  # nbval reads outputs as NotebookNodes

            o = from_dict({**o, "data": {k: v for k, v in data.items() if k != "text/plain"}})
        out.append(o)
    return out


def _texts(outputs: Iterable[Any]) -> str:
    """The stream text of a cell's outputs, joined (claim lines are printed to stdout)."""
    parts = []
    for out in outputs:
        text = out.get("text") if hasattr(out, "get") else None
        if text:
            parts.append("".join(text) if isinstance(text, list) else str(text))
    return "".join(parts)


def install(config: Any) -> str:
    """Choose the comparison for this test run (:func:`rt_lib.runtime.fingerprint.choose_mode`) and, when
    portable, hook it into nbval: both sanitize files, then the claims.  Returns the status line
    (the test run prints it in its header)."""
    from rt_lib.runtime.fingerprint import MODE_ENV, choose_mode, describe, recorded, this_platform

    if not getattr(config.option, "nbval", False):
        return ""
    mode, why = choose_mode(this_platform(), recorded(), os.environ.get(MODE_ENV))
    config.rt_comparison = mode
    line = f"notebooks compared {mode}: {why}; platform {describe(this_platform())}"
    if mode != "portable":
        return line
    from nbval import plugin

    if getattr(plugin.IPyNbCell, "_rt_portable", False):
        return line
    files = plugin.IPyNbFile.get_sanitize_files

    def get_sanitize_files(self: Any) -> list[str]:
        return [*files(self), str(PORTABLE_SANITIZE)]

    compare = plugin.IPyNbCell.compare_outputs

    def compare_outputs(self: Any, test: Any, ref: Any, skip_compare: Any = None) -> bool:
        test, ref = tables_once(test), tables_once(ref)
        if not compare(self, test, ref, skip_compare):
            return False
        problems = claim_problems(_texts(ref), _texts(test))
        if problems:
            self.comparison_traceback = ["claims differ from the recording (portable "
                                         "comparison):", *problems]
            return False
        return True

    plugin.IPyNbFile.get_sanitize_files = get_sanitize_files
    plugin.IPyNbCell.compare_outputs = compare_outputs
    plugin.IPyNbCell._rt_portable = True
    return line


WIDGET = "application/vnd.jupyter.widget-view+json"  # widget model ids are new at every run


def coalesced(outputs: list[dict]) -> list[dict]:
    """A cell's outputs with every stream's pieces joined into its first (as nbval compares
    them): where a stream splits depends on the kernel's timing, not on what was printed."""
    out: list[dict] = []
    streams: dict[str, dict] = {}
    for o in outputs:
        if o.get("output_type") != "stream":
            out.append(o)
            continue
        text = "".join(o["text"]) if isinstance(o["text"], list) else o["text"]
        if o["name"] in streams:
            streams[o["name"]]["text"] += text
        else:
            streams[o["name"]] = {**o, "text": text}
            out.append(streams[o["name"]])
    return out


def output_items(notebook: dict, rules: list[tuple[re.Pattern, str]],
                 images: bool = True) -> list[tuple[int, str, str]]:
    """(cell index, kind, content) of every code cell's outputs, texts sanitized by ``rules``
    (images compared byte for byte, or left out unless ``images``)."""
    found = []
    for i, cell in enumerate(notebook["cells"]):
        outputs = coalesced(cell.get("outputs", []) if cell["cell_type"] == "code" else [])
        for out in outputs if images else tables_once(outputs):
            items = [("text", out["text"])] if "text" in out else []
            items += [(k, v) for k, v in out.get("data", {}).items() if k != WIDGET]
            if out.get("output_type") == "error":
                items.append(("error", out.get("ename", "")))
            for kind, value in items:
                if kind.startswith("image/") and not images:
                    continue
                text = "".join(value) if isinstance(value, list) else str(value)
                if not kind.startswith("image/"):
                    text = masked(text, rules)
                found.append((i, kind, text))
    return found


def stream_texts(notebook: dict) -> dict[int, str]:
    """{code cell index: the stream text it printed} (where claim lines are)."""
    out = {}
    for i, cell in enumerate(notebook["cells"]):
        text = _texts(cell.get("outputs", [])) if cell["cell_type"] == "code" else ""
        if text:
            out[i] = text
    return out


def notebook_differences(reference: dict, notebook: dict,
                         portable: bool) -> list[tuple[int | None, str, str, str]]:
    """(cell, kind, recorded, here) of every output of ``notebook`` that differs from
    ``reference``'s as the test command compares them: strict (nbval's sanitizing) or portable
    (numbers masked, images left out, claim lines by status and tolerance; kind ``claim``)."""
    rules = sanitize_rules([STRICT_SANITIZE, *([PORTABLE_SANITIZE] if portable else [])])
    a = output_items(reference, rules, images=not portable)
    b = output_items(notebook, rules, images=not portable)
    out: list[tuple[int | None, str, str, str]] = [
        (x[0], x[1], x[2], y[2]) for x, y in zip(a, b) if x != y]
    if len(a) != len(b):
        out.append((None, "outputs", f"{len(a)} outputs", f"{len(b)} outputs"))
    if portable:
        texts = stream_texts(notebook)
        for cell, text in stream_texts(reference).items():
            out += [(cell, "claim", problem, "") for problem in claim_problems(text, texts.get(cell, ""))]
    return out


def claim_statuses(notebook: dict) -> dict[str, str]:
    """{claim id: status} of every claim line a notebook printed."""
    return {cid: status for text in stream_texts(notebook).values()
            for cid, (status, _) in claim_lines(text).items()}
