"""The algorithmic-suite tasks: labels against independent computations, mixes, splits, errors."""

import math
from collections import Counter

import pytest
import torch

from rt_lib.experiments.common import model_config
from rt_lib.model import build_model, count_params
from rt_lib.tasks import IGNORE, DecimalAddition, NeedleInAHaystack, Parentheses, dyck, memorisation
from rt_lib.tasks.decimal import EQUALS, OUT_OFFSET, PAD, PLUS, STOP
from rt_lib.tasks.dyck import random_dyck_steps
from rt_lib.tasks.needle import MARKER_OFFSET, MAX_KEYS, QUERY_OFFSET


def answers(targets):
    """The one scored target of each row."""
    assert ((targets != IGNORE).sum(-1) == 1).all()
    return targets[targets != IGNORE].tolist()


# --- independent references: plain Python over each row ---------------------------------------

def needle_answers(tokens) -> list[int]:
    """Reference answers computed by reading each sequence left to right."""
    answers = []
    for row in tokens.tolist():
        table, answer = {}, None
        for i, tok in enumerate(row):
            if MARKER_OFFSET <= tok < QUERY_OFFSET:
                table[tok] = row[i + 1]
            elif QUERY_OFFSET <= tok < QUERY_OFFSET + MAX_KEYS:
                answer = table[tok - QUERY_OFFSET + MARKER_OFFSET]
                break
        answers.append(answer)
    return answers


def decimal_reference(tokens, targets) -> list[tuple[int, int, int]]:
    """(a, b, sum) per row read back from tokens and targets with Python integers."""
    rows = []
    for tok, tgt in zip(tokens.tolist(), targets.tolist()):
        plus = tok.index(PLUS)
        equals = tok.index(EQUALS)
        a = int("".join(map(str, reversed(tok[:plus]))))
        b = int("".join(map(str, reversed(tok[plus + 1 : equals]))))
        out = [t for t in tgt if t != IGNORE]
        digits = [t - OUT_OFFSET for t in out if OUT_OFFSET <= t < OUT_OFFSET + 10]
        rows.append((a, b, int("".join(map(str, reversed(digits)))) if digits else None))
    return rows


def balanced_reference(tokens) -> list[bool]:
    """Is each row's string (between the padding and '?') balanced?  A plain depth counter."""
    out = []
    for row in tokens.tolist():
        depth, ok = 0, True
        for tok in row[: row.index(dyck.ASK)]:
            if tok == dyck.PAD:
                continue
            depth += 1 if tok == dyck.OPEN else -1
            ok &= depth >= 0
        out.append(ok and depth == 0)
    return out


# --- needle-in-a-haystack ---------------------------------------------------------------------

def test_needle_answer_is_the_value_after_the_queried_marker():
    task = NeedleInAHaystack(max_keys=6, n_values=20, n_test=50)
    x, y = task.get_batch(0, 500, seed=1)
    assert answers(y) == needle_answers(x)
    # the answer is predicted at the query's own position
    q_pos = ((x >= QUERY_OFFSET) & (x < QUERY_OFFSET + 30)).float().argmax(-1)
    assert torch.equal(q_pos, (y != IGNORE).float().argmax(-1))


def test_needle_keys_are_distinct_and_in_range():
    task = NeedleInAHaystack(max_keys=5, min_keys=2, n_values=9, n_markers=7, n_test=10)
    x, _ = task.get_batch(3, 400, seed=0)
    counts = []
    for row in x.tolist():
        markers = [t for t in row if MARKER_OFFSET <= t < QUERY_OFFSET]
        assert len(set(markers)) == len(markers)
        assert all(t < MARKER_OFFSET + 7 for t in markers)
        values = row[1 : 2 * len(markers) : 2]
        assert all(1 <= v <= 9 for v in values)
        counts.append(len(markers))
    assert set(counts) == {2, 3, 4, 5}
    assert x.shape[1] == task.n_ctx == 11


def test_stream_never_yields_a_test_sequence():
    # 1..2 keys over 3 markers and 3 values: 3*3 + 6*9*2 = 117 sequences (k, markers, values,
    # which key is asked); a test set of 40 draws holds some of them.
    task = NeedleInAHaystack(max_keys=2, n_values=3, n_markers=3, n_test=40)
    test_rows = {tuple(r) for r in task.test[0].tolist()}
    space_x, _ = task.sample(20_000, torch.Generator().manual_seed(1))
    space = {tuple(r) for r in space_x.tolist()}
    assert len(space) == 117 and test_rows < space
    seen = set()
    for step in range(100):
        x, _ = task.get_batch(step, 64, seed=0)
        assert not task.is_test_sequence(x).any()
        seen |= {tuple(r) for r in x.tolist()}
    assert seen == space - test_rows  # every other sequence still comes


def test_the_test_set_follows_the_task_distribution():
    # About 52 % of parenthesis strings are balanced
    # (docs/papers.md, random transformers: tasks); the test set is a plain draw.
    task = Parentheses(max_pairs=8, n_test=4000)
    frac = sum(balanced_reference(task.test[0])) / 4000
    assert 0.47 < frac < 0.57


def test_stream_batches_are_a_pure_function_of_seed_and_step():
    task = NeedleInAHaystack(max_keys=3, n_values=10, n_test=5)
    assert torch.equal(task.get_batch(7, 32, 1)[0], task.get_batch(7, 32, 1)[0])
    assert not torch.equal(task.get_batch(7, 32, 1)[0], task.get_batch(8, 32, 1)[0])
    assert not torch.equal(task.get_batch(7, 32, 1)[0], task.get_batch(7, 32, 2)[0])


def test_a_space_smaller_than_the_test_set_is_reported():
    task = NeedleInAHaystack(max_keys=1, n_values=2, n_markers=1, n_test=50)  # 2 sequences
    with pytest.raises(ValueError, match="too small"):
        task.get_batch(0, 4, seed=0)


def test_full_batch_is_refused_for_streams():
    with pytest.raises(ValueError, match="endless stream"):
        NeedleInAHaystack(max_keys=2, n_test=5).get_batch(0, None, seed=0)


@pytest.mark.parametrize("kwargs, match", [
    ({"max_keys": 0}, "max_keys"), ({"max_keys": 31}, "max_keys"),
    ({"max_keys": 4, "min_keys": 5}, "min_keys"), ({"n_values": 1}, "n_values"),
    ({"n_values": 128}, "n_values"), ({"max_keys": 5, "n_markers": 4}, "n_markers"),
    ({"max_keys": 4, "n_ctx": 8}, "n_ctx"), ({"n_test": 0}, "n_test"),
])
def test_needle_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        NeedleInAHaystack(**kwargs)


# --- decimal addition -------------------------------------------------------------------------

@pytest.mark.parametrize("n_digits", [1, 3, 10])
def test_decimal_sums_match_python_integers(n_digits):
    task = DecimalAddition(n_digits=n_digits, n_test=20)
    x, y = task.get_batch(0, 300, seed=0)
    for a, b, s in decimal_reference(x, y):
        assert s == a + b
        if n_digits > 1:  # exactly n digits
            assert 10 ** (n_digits - 1) <= a < 10**n_digits
            assert 10 ** (n_digits - 1) <= b < 10**n_digits


def test_decimal_scores_every_sum_digit_and_the_stop_token():
    task = DecimalAddition(n_digits=4, n_test=20)
    x, y = task.get_batch(0, 200, seed=0)
    for (_a, _b, s), tgt in zip(decimal_reference(x, y), y.tolist()):
        out = [t for t in tgt if t != IGNORE]
        assert out[-1] == STOP
        assert len(out) == len(str(s)) + 1  # digits of the sum, no leading zero, then stop
        assert out[0] == OUT_OFFSET + s % 10  # the first scored token is the units digit


def test_decimal_metrics_with_and_without_the_first_digit():
    task = DecimalAddition(n_digits=3, n_test=20)
    x, y = task.get_batch(0, 64, seed=0)
    # right everywhere, the padding included (the authors' mask scores a pad after the stop)
    logits = torch.nn.functional.one_hot(y.masked_fill(y == IGNORE, PAD), task.d_vocab_out).float() * 10
    logits[:, task.first_out] = 0.0
    logits[:, task.first_out, 0] = 10.0  # every first sum digit wrong, the rest right
    s = task.scores(logits, y)
    n_out = (y != IGNORE).sum(-1).float()
    torch.testing.assert_close(s["acc"], 1 - 1 / n_out)
    assert (s["acc_authors"] == 1).all()
    assert (s["exact"] == 0).all()


def test_decimal_authors_mask_drops_the_first_digit_from_the_loss():
    authors = DecimalAddition(n_digits=3, n_test=20, score_first_digit=False)
    full = DecimalAddition(n_digits=3, n_test=20)
    x, y = full.get_batch(0, 32, seed=0)
    logits = torch.randn(*y.shape, full.d_vocab_out)
    masked = y.clone()
    masked[:, full.first_out] = IGNORE
    after_stop = torch.zeros_like(y, dtype=torch.bool)
    after_stop[:, 1:] = y[:, :-1] == STOP
    masked[after_stop] = PAD  # and the pad after a stop token that is not the last input
    torch.testing.assert_close(authors.loss(logits, y), full.loss(logits, masked))
    assert not torch.allclose(full.loss(logits, y), full.loss(logits, masked))


@pytest.mark.parametrize("n_digits", [0, 19, 2.5])
def test_decimal_bad_parameters(n_digits):
    with pytest.raises(ValueError, match="n_digits"):
        DecimalAddition(n_digits=n_digits)


# --- parentheses ------------------------------------------------------------------------------

def test_parentheses_labels_match_a_depth_counter():
    task = Parentheses(max_pairs=12, n_test=20)
    x, y = task.get_batch(0, 2000, seed=0)
    expected = [2 if b else 1 for b in balanced_reference(x)]  # ')' if balanced else '('
    assert y.tolist() == expected
    assert (x[:, -1] == 3).all()  # left-padded: '?' is always the last token
    lengths = (x != 0).sum(-1) - 1
    assert lengths.min() >= 1 and lengths.max() <= 24


def test_parentheses_mix_is_about_52_percent_balanced():
    task = Parentheses(max_pairs=30, n_test=10)
    x, _ = task.sample(20_000, torch.Generator().manual_seed(0))
    frac = sum(balanced_reference(x)) / len(x)
    assert 0.48 < frac < 0.56  # ~52 %, the majority baseline (docs/papers.md, random transformers: tasks)


def test_random_dyck_words_are_balanced_and_uniform():
    pairs = torch.full((10_000,), 3)
    steps = random_dyck_steps(pairs, 6, torch.Generator().manual_seed(0))
    words = Counter("".join("(" if s == 1 else ")" for s in row) for row in steps.tolist())
    assert len(words) == 5  # Catalan(3)
    assert all(balanced_reference(torch.tensor([[1 if c == "(" else 2 for c in w] + [3]]))[0]
               for w in words)
    assert all(abs(c / 10_000 - 0.2) < 0.02 for c in words.values())


def test_parentheses_stream_excludes_the_test_set():
    task = Parentheses(max_pairs=3, n_test=200)
    test_rows = {tuple(r) for r in task.test[0].tolist()}
    x, _ = task.get_batch(0, 500, seed=0)
    assert not {tuple(r) for r in x.tolist()} & test_rows


@pytest.mark.parametrize("max_pairs", [0, -1, 1.5])
def test_parentheses_bad_parameters(max_pairs):
    with pytest.raises(ValueError, match="max_pairs"):
        Parentheses(max_pairs=max_pairs)


# --- memorisation -----------------------------------------------------------------------------

def test_memorisation_covers_every_pair_once_with_uniform_labels():
    n = 16
    task = memorisation(n, label_seed=0, layout="equals")
    x, z = task.train
    assert {(a, b - n) for a, b, _ in x.tolist()} == {(a, b) for a in range(n) for b in range(n)}
    assert (x[:, 2] == 2 * n).all() and len(x) == n * n
    assert z.min() >= 0 and z.max() < n
    assert list(task.eval_sets()) == ["train"]
    assert task.bits == n * n * math.log2(n)
    counts = torch.bincount(memorisation(64, 1).train[1], minlength=64).float()
    # independent uniform labels: counts ~ Binomial(4096, 1/64), std ~ sqrt(64) = 8
    assert 0.7 < counts.std() / 8 < 1.3


def test_memorisation_labels_depend_on_label_seed_only():
    assert torch.equal(memorisation(8, 3).train[1], memorisation(8, 3).train[1])
    assert not torch.equal(memorisation(8, 3).train[1], memorisation(8, 4).train[1])


@pytest.mark.parametrize("layout", ["authors", "equals"])
def test_memorisation_model_has_the_authors_parameter_counts(layout):
    task = memorisation(512, layout=layout)
    random_model = build_model(model_config("random transformer", task, 128, 2, 4), 0)
    trained = build_model(model_config("trained transformer", task, 128, 2, 4), 0)
    assert count_params(random_model) == 262_784  # Table 3 (docs/papers.md, random transformers: tasks)
    assert count_params(trained) == 659_584
    assert task.bits == 2_359_296


def test_memorisation_bad_n():
    with pytest.raises(ValueError, match="n must be"):
        memorisation(1)


def test_parentheses_min_pairs_bounds_every_string():
    task = Parentheses(max_pairs=8, min_pairs=5, n_test=10)
    x, y = task.get_batch(0, 3000, seed=0)
    lengths = (x != 0).sum(-1) - 1
    assert lengths.min() >= 9 and lengths.max() <= 16
    balanced = torch.tensor(balanced_reference(x))
    assert (lengths[balanced] >= 10).all()  # a balanced string has at least min_pairs pairs
    with pytest.raises(ValueError, match="min_pairs"):
        Parentheses(max_pairs=4, min_pairs=5)


# --- the authors' variants ------------------------------------------------------------------

def test_decimal_authors_mask_is_the_inputs_that_are_sum_digits_or_stop():
    """task_additionstream.py scores position i when input token i is a sum digit or the stop
    token; rebuilt here from the tokens and targets as one full sequence, row by row."""
    task = DecimalAddition(n_digits=3, n_test=20)
    x, y = task.get_batch(0, 300, seed=0)
    mask = task.authors_mask(y)
    for tok, tgt, m in zip(x.tolist(), y.tolist(), mask.tolist()):
        seq = tok + [tgt[-1] if tgt[-1] != IGNORE else PAD]  # the full sequence
        expected = [i for i in range(len(tok)) if seq[i] >= OUT_OFFSET]
        assert [i for i, on in enumerate(m) if on] == expected
        carry = len([t for t in tgt if t != IGNORE]) == 5  # 4 sum digits and stop
        assert sum(m) == 4  # n + 1 scored tokens whether or not the sum has a final carry
        assert (seq[expected[-1]] == STOP) != carry  # no carry: the pad after stop is scored


def test_decimal_authors_accuracy_and_loss_score_the_pad_after_stop():
    task = DecimalAddition(n_digits=3, n_test=20, score_first_digit=False)
    x, y = task.get_batch(0, 64, seed=0)
    no_carry = (y == STOP).any(-1) & ((y == STOP).long().argmax(-1) < task.n_ctx - 1)
    logits = torch.nn.functional.one_hot(y.clamp(min=0), task.d_vocab_out).float() * 10
    s = task.scores(logits, y)  # every scored token right, the pad after stop predicted as 0
    assert torch.equal(s["acc_authors"] < 1, no_carry) and (s["exact"] == 1).all()
    assert no_carry.any() and (~no_carry).any()
    logits[..., PAD] = torch.where(y == IGNORE, 20.0, 0.0)  # now the pad after stop is right too
    assert (task.scores(logits, y)["acc_authors"] == 1).all()
    assert task.loss(logits, y) < 1e-3


def test_decimal_chance_floor_counts_guessed_digits_and_free_tokens():
    task = DecimalAddition(n_digits=3, n_test=2000)
    _, y = task.test
    n = (y != IGNORE).sum(-1).float()  # 4 without a final carry, 5 with one
    expected = ((3 * 0.1 + (n - 3)) / n).mean().item()
    floor = task.chance_floor()
    assert floor["acc"] == pytest.approx(expected) and 0.35 < floor["acc"] < 0.45
    assert floor["exact"] == pytest.approx(1e-3)


def test_authors_dyck_generator_right_pads_and_labels_by_a_depth_counter():
    task = Parentheses(max_pairs=8, n_test=20, generator="authors")
    assert not task.last_only
    x, y = task.get_batch(0, 2000, seed=0)
    answer, where = task.answers(x, y)
    assert (x[torch.arange(len(x)), where] == dyck.ASK).all()
    assert ((y != IGNORE).sum(-1) == 1).all() and (y[torch.arange(len(y)), where] == answer).all()
    assert answer.tolist() == [2 if b else 1 for b in balanced_reference(x)]
    assert (x[:, 0] != dyck.PAD).all()  # right padding: every string starts at position 0
    frac = sum(balanced_reference(x)) / len(x)
    assert 0.40 < frac < 0.60


def test_authors_dyck_batch_holds_the_strings_drawn_one_by_one_in_order():
    import random
    task = Parentheses(max_pairs=30, n_test=20, generator="authors")
    # the batch's Python rng is seeded by one draw from the batch's generator
    rng = random.Random(int(torch.randint(0, 2**62, (1,), generator=torch.Generator().manual_seed(7))))
    drawn = [dyck.authors_string(rng, 1, 30) for _ in range(500)]
    x, y = task.sample(500, torch.Generator().manual_seed(7))
    chars = {dyck.OPEN: "(", dyck.CLOSE: ")"}
    read = ["".join(chars[t] for t in row.tolist() if t in chars) for row in x]
    assert read == drawn and any(len(s) == 60 for s in drawn)
    assert (x[torch.arange(500), torch.tensor([len(s) for s in drawn])] == dyck.ASK).all()
    assert x.dtype == y.dtype == torch.long and x.shape == (500, task.n_ctx)


def test_authors_dyck_generator_favours_nesting():
    import random
    rng = random.Random(0)
    strings = [dyck.authors_string(rng, 2, 10) for _ in range(20_000)]
    assert all(set(s) <= {"(", ")"} and 3 <= len(s) <= 20 for s in strings)
    rng = random.Random(1)
    nested = Counter(dyck._nested(rng, 3) for _ in range(5000))
    # wrap with prob 1/2, else split 1+2 or 2+1: probabilities worked by hand (uniform: 1/5 each)
    expected = {"((()))": 1 / 4, "(()())": 1 / 4, "()()()": 1 / 4, "()(())": 1 / 8, "(())()": 1 / 8}
    assert set(nested) == set(expected)
    assert all(abs(nested[w] / 5000 - p) < 0.02 for w, p in expected.items())


def test_memorisation_authors_layout_reads_the_label_at_y():
    task = memorisation(16, label_seed=0, layout="authors")
    x, z = task.train
    assert x.shape == (256, 2) and task.d_vocab == task.d_vocab_out == 32 and task.last_only
    assert {(a, b - 16) for a, b in x.tolist()} == {(a, b) for a in range(16) for b in range(16)}
    other = memorisation(16, label_seed=0, layout="equals")
    assert torch.equal(other.train[1], z) and other.d_vocab == 33 and (other.train[0][:, 2] == 32).all()


def test_bits_net_of_chance():
    from rt_lib.tasks import bits_memorised, bits_net_of_chance
    task = memorisation(16)
    assert bits_net_of_chance(1 / 16, task) == 0 and bits_net_of_chance(0.01, task) == 0
    assert bits_net_of_chance(1.0, task) == pytest.approx(task.bits) == bits_memorised(1.0, task)
    assert bits_net_of_chance(0.5, task) == pytest.approx((0.5 - 1 / 16) / (15 / 16) * 256 * 4)
