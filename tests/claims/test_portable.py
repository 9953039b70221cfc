"""rt_lib.claims.portable: outputs compared across numeric platforms, and nbval run both ways."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rt_lib.claims.portable import (
    DEFAULT_TOLERANCE,
    PORTABLE_SANITIZE,
    STRICT_SANITIZE,
    Tolerance,
    claim_problems,
    masked,
    numbers,
    sanitize_rules,
    tolerance_of,
)

LINE = ("[HOLDS] mi-neurons-periodic: median share: trained 0.61, 0.58, 0.63 (seeds 0, 1, 2); "
        "untrained 0.36, 0.40, 0.38 (ranges [0.580, 0.630] and [0.360, 0.400] apart) "
        "(paper: qualitative)\n")


def test_numbers_reads_them_as_printed():
    assert numbers("epoch 3,020 at 1e-3, rt-t1-needle p=37 -0.5 and 1_000") == [
        3020.0, 1e-3, 37.0, -0.5, 1000.0]


def test_the_portable_rules_mask_numbers_and_keep_words():
    rules = sanitize_rules([STRICT_SANITIZE, PORTABLE_SANITIZE])
    a = masked("T_miiii   4000 epochs  valid acc 0.398\norder: 2 → 3", rules)
    b = masked("T_miiii   4000 epochs  valid acc 0.4015\norder: 2 → 3 → 5", rules)
    assert a == b
    assert masked("valid acc 0.398", rules) != masked("train acc 0.398", rules)


@pytest.mark.parametrize("recorded, here", [
    ("<td>converged</td>", "<td>still improving</td>"),  # a run outcome
    ("<td>NaN</td>", "<td>3020.0</td>"),  # a head not generalised here, generalised there
    ("  0.991 [0.98, 1.0]\n  0.5 [0.4] †", "  0.991 [0.98, 1.0] †\n  0.5 [0.4]"),  # daggers
    ("below: {5: 0.934, 7: 0.496}", "below: {5: 0.9, 7: 0.4, 11: 0.1}"),  # a dict of heads
    ("[NOT SHOWN] mi-every-head-groks: 2 of 11 heads (x)\n", "[NOT SHOWN] mi-every-head-groks: 3 of 11, more\n"),
    # a widget's text form cut at a fixed length: a neuron of two digits moves the cut
    ("VBox(children=(IntSlider(value=12, max=127), Se…", "VBox(children=(IntSlider(value=7, max=127), Sel…"),
])
def test_what_moves_with_the_rounding_is_masked(recorded, here):
    rules = sanitize_rules([STRICT_SANITIZE, PORTABLE_SANITIZE])
    assert masked(recorded, rules) == masked(here, rules)


@pytest.mark.parametrize("recorded, here", [
    ("[HOLDS] a-b: 1\n", "[FAILS] a-b: 1\n"),  # a status
    ("[HOLDS] a-b: 1\n", "[HOLDS] a-c: 1\n"),  # a claim
    ("[NOT SHOWN: noise] a-b: 1\n", "[NOT SHOWN: contrary] a-b: 1\n"),  # why not shown
    ("train acc 0.9", "valid acc 0.9"),  # a word
    ("<Figure size 1210x418 with 2 Axes>", "<Figure size 1210x400 with 2 Axes>"),  # a figure's size
    ("VBox(children=(IntSlider(value=7), Se…", "HBox(children=(IntSlider(value=7), Se…"),  # a widget
])
def test_what_must_hold_on_any_platform_is_not_masked(recorded, here):
    rules = sanitize_rules([STRICT_SANITIZE, PORTABLE_SANITIZE])
    assert masked(recorded, rules) != masked(here, rules)


REDUCED = ("[NOT SHOWN: runs] mi-masked-not-delayed (reduced task: p = 37 of 113): T_miiii ['not'], "
           "T_masked ['not'] (1 and 1 runs: fewer than 3 a side) (paper: qualitative)\n")


def test_a_claim_line_with_its_task_is_read_and_compared_as_a_claim():
    # what a reduced task's line prints (Claim.__str__): the task sits between id and colon
    moved = REDUCED.replace("T_masked ['not']", "T_masked 1,340")  # a word here, a number there
    rules = sanitize_rules([STRICT_SANITIZE, PORTABLE_SANITIZE])
    assert masked(REDUCED, rules) == masked(moved, rules)  # the body is the claims' to compare
    assert claim_problems(REDUCED, moved) == []  # a status-only claim: its status agrees
    assert claim_problems(REDUCED, moved.replace("[NOT SHOWN: runs]", "[HOLDS]")) == [
        "mi-masked-not-delayed: status HOLDS here, NOT SHOWN: runs recorded"]
    assert masked(REDUCED, rules) != masked(REDUCED.replace("reduced task: p", "reduced task: q"), rules)
    unsaid = "[HOLDS] a-b (task size not said): 1 of 2\n"
    assert claim_problems(unsaid, unsaid.replace("[HOLDS]", "[FAILS]")) == [
        "a-b: status FAILS here, HOLDS recorded"]


def test_claims_a_last_digit_apart_agree():
    assert claim_problems(LINE, LINE.replace("0.61", "0.62").replace("0.36,", "0.37,")) == []


def test_a_flipped_status_is_named():
    flipped = LINE.replace("[HOLDS]", "[NOT SHOWN]")
    assert claim_problems(LINE, flipped) == [
        "mi-neurons-periodic: status NOT SHOWN here, HOLDS recorded"]


def test_a_reason_that_changes_is_named_as_a_status():
    noise = LINE.replace("[HOLDS]", "[NOT SHOWN: noise]")
    assert claim_problems(noise, LINE.replace("[HOLDS]", "[NOT SHOWN: contrary]")) == [
        "mi-neurons-periodic: status NOT SHOWN: contrary here, NOT SHOWN: noise recorded"]
    assert claim_problems(noise, noise.replace("0.61", "0.62")) == []


def test_a_number_far_off_is_named_with_its_tolerance():
    far = LINE.replace("0.61", "0.95")
    (problem,) = claim_problems(LINE, far)
    assert "0.95 against 0.61" in problem and str(tolerance_of("mi-neurons-periodic")) in problem


def test_a_claim_lost_or_added_is_named():
    other = "[HOLDS] (ours) mlp-combines-the-digits: share 0.02 then 0.49\n"
    assert claim_problems(LINE + other, LINE) == ["mlp-combines-the-digits: recorded, not printed here"]
    assert claim_problems(LINE, LINE + other) == ["mlp-combines-the-digits: printed here, not recorded"]


def test_tolerances_agree_in_absolute_or_relative_terms():
    tol = Tolerance(abs=0.1, rel=0.3)
    assert tol.agree(0.2, 0.29) and not tol.agree(0.2, 0.35)
    assert tol.agree(2280, 3020) and not tol.agree(2280, 4000)
    assert tolerance_of("an-id-of-our-own") == DEFAULT_TOLERANCE


NOTEBOOK_CODE = "print({line!r}, end='')"


def _notebook(path, recorded: str, printed: str) -> None:
    """A one-cell notebook that prints ``printed``, its recorded output ``recorded``."""
    cell = {"cell_type": "code", "execution_count": 1, "id": "c1", "metadata": {},
            "source": NOTEBOOK_CODE.format(line=printed),
            "outputs": [{"name": "stdout", "output_type": "stream", "text": recorded}]}
    path.write_text(json.dumps({"cells": [cell], "metadata": {"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}))


def _nbval(tmp_path, mode: str, recorded: str, printed: str) -> subprocess.CompletedProcess:
    book = tmp_path / f"{mode}.ipynb"
    _notebook(book, recorded, printed)
    (tmp_path / "conftest.py").write_text(textwrap.dedent("""
        from rt_lib.claims.portable import install
        def pytest_configure(config):
            install(config)
    """))
    env = {**os.environ, "RT_PLATFORM": mode}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--nbval", "--nbval-current-env", "--nbval-sanitize-with",
                           str(STRICT_SANITIZE), "-p", "no:xdist", str(book)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("mode, passes", [("strict", False), ("portable", True)])
def test_nbval_on_numbers_a_last_digit_apart(tmp_path, mode, passes):
    result = _nbval(tmp_path, mode, LINE, LINE.replace("0.61", "0.62"))
    assert (result.returncode == 0) is passes, result.stdout[-3000:]


@pytest.mark.parametrize("mode", ["strict", "portable"])
def test_nbval_on_a_flipped_claim_fails_both_ways(tmp_path, mode):
    result = _nbval(tmp_path, mode, LINE, LINE.replace("[HOLDS]", "[NOT SHOWN]"))
    assert result.returncode == 1, result.stdout[-3000:]
    assert "1 failed" in result.stdout


def test_a_status_only_claim_compares_its_status_and_not_its_numbers():
    """The ledger states status_only where a claim's numbers are identities (which heads)."""
    assert not tolerance_of("mi-small-primes-first").numbers
    line = "[HOLDS] mi-small-primes-first: first two heads to generalise: [2, 3]\n"
    assert claim_problems(line, line.replace("[2, 3]", "[2, 5, 7]")) == []
    assert claim_problems(line, line.replace("[HOLDS]", "[FAILS]")) == [
        "mi-small-primes-first: status FAILS here, HOLDS recorded"]


def test_a_ledger_tolerance_replaces_the_default():
    tol = tolerance_of("mi-grokfast-needed")
    assert tol != DEFAULT_TOLERANCE and tol.numbers and "miiii_budgets" in tol.why


def test_a_tables_plain_text_twin_is_left_to_its_html():
    """pandas wraps a table's plain text by its widest cell; the portable comparison compares the
    HTML (masked) and leaves the plain text out, the strict one compares both."""
    from rt_lib.claims.portable import notebook_differences

    def book(plain: str, html: str) -> dict:
        out = {"output_type": "display_data", "metadata": {},
               "data": {"text/plain": plain, "text/html": html}}
        return {"cells": [{"cell_type": "code", "source": "", "outputs": [out]}]}

    a = book("   run  budget\n0  a   converged", "<td>converged</td><td>0.5</td>")
    b = book("   run \\\n0  a   \n\n   budget\n0  still improving", "<td>still improving</td><td>0.6</td>")
    assert notebook_differences(a, b, portable=True) == []
    assert len(notebook_differences(a, b, portable=False)) == 2
    c = book("x", "<td>converged</td><td>0.5</td><td>extra</td>")
    assert notebook_differences(a, c, portable=True)  # a column more still shows


def test_a_stream_split_into_pieces_compares_as_one_as_nbval_does():
    """Where a cell's stdout splits into several outputs is the kernel's timing (a pause between
    prints); both comparisons join a stream's pieces, as nbval does, and still see its text."""
    from rt_lib.claims.portable import notebook_differences

    def book(*pieces: str) -> dict:
        outs = [{"output_type": "stream", "name": "stdout", "text": p} for p in pieces]
        outs.insert(1, {"output_type": "stream", "name": "stderr", "text": "warning\n"})
        return {"cells": [{"cell_type": "code", "source": "", "outputs": outs}]}

    whole = book(LINE + "\n1 holds of 1 claims\n")
    split = book(LINE + "\n", "1 holds of 1 claims\n")
    other_count = book(LINE + "\n", "2 holds of 2 claims\n")
    for portable in (True, False):
        assert notebook_differences(whole, split, portable=portable) == []
    # still compared as text: strictly a count differs; portably numbers are masked, but a
    # claim line that went missing is not
    assert notebook_differences(whole, other_count, portable=False) != []
    assert notebook_differences(whole, other_count, portable=True) == []
    assert notebook_differences(whole, book("\n", "1 holds of 1 claims\n"), portable=True)
