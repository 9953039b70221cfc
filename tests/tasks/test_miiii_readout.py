"""miiii's two readouts of one loss (rt_lib/tasks/miiii.py, issue 59): the compact readout's
per-head cross-entropy over [b, sum q] against each head's own F.cross_entropy on its classes."""

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from rt_lib.model import build_model, fast_paths, miiii_config
from rt_lib.tasks.miiii import miiii_task
from rt_lib.training.train import TrainConfig, train


def _model(task, seed=0):
    cfg = miiii_config(task.d_vocab - 1, d_model=32, n_heads=4, out_sizes=task.qs,
                       d_vocab=task.d_vocab)
    return build_model(cfg, seed).eval()  # eval: no dropout, one forward equals another


def _by_head(logits, targets, qs):
    """[b, n] cross-entropy, head by head over its own q classes: the independent computation."""
    out, start = [], 0
    for i, q in enumerate(qs):
        out.append(F.cross_entropy(logits[:, start : start + q], targets[:, i], reduction="none"))
        start += q
    return torch.stack(out, 1)


@pytest.mark.parametrize("variant", ["miiii", "masked", "nanda"])
def test_compact_logits_are_the_padded_ones_in_place(variant):
    task = miiii_task(13, variant)
    model = _model(task)
    x, _ = task.train
    padded = fast_paths.last_logits(model, x)  # [b, n, q_max]
    compact = fast_paths.last_logits(model, x, compact=True)  # [b, sum q]
    assert compact.shape == (len(x), sum(task.qs))
    assert torch.equal(task.padded(compact), padded)  # the same values, bit for bit
    assert torch.equal(compact, torch.cat([padded[:, i, :q] for i, q in enumerate(task.qs)], 1))
    # the full forward's last position (no shortcut) gives the same compact logits too
    full = fast_paths.logits(model, x, last_only=True, compact=True)
    assert torch.allclose(full, compact, atol=1e-5)


def test_compact_cross_entropy_is_each_heads_own():
    task = miiii_task(11, readout="compact")
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(40, sum(task.qs), generator=g) * 3
    targets = torch.stack([torch.randint(q, (40,), generator=g) for q in task.qs], 1)
    expected = _by_head(logits, targets, task.qs)
    assert torch.allclose(task.compact_cross_entropy(logits, targets), expected, atol=1e-5)


def test_compact_cross_entropy_shifts_each_head_by_its_own_maximum():
    # one head's logits 400 below another's: a shift by the row's maximum would underflow its
    # exp to 0 and give an infinite loss; each head shifted by its own stays exact
    task = miiii_task(7, readout="compact")  # heads q = 2, 3, 5
    logits = torch.tensor([[300.0, 301.0, -100.0, -99.0, -98.0, 0.0, 1.0, 2.0, 3.0, 4.0]])
    targets = torch.tensor([[1, 0, 4]])
    got = task.compact_cross_entropy(logits, targets)
    assert torch.isfinite(got).all()
    assert torch.allclose(got, _by_head(logits, targets, task.qs), atol=1e-5)


@pytest.mark.parametrize("variant, combine", [("miiii", "sum"), ("masked", "mean"),
                                              ("nanda", "sum")])
def test_the_two_readouts_give_one_loss_and_one_gradient(variant, combine):
    padded_task = miiii_task(13, variant, combine=combine)
    compact_task = replace(padded_task, readout="compact")
    model = _model(padded_task, seed=1)
    x, y = padded_task.train
    losses, grads = [], []
    for task in (padded_task, compact_task):
        loss = task.loss(fast_paths.last_logits(model, x, task.compact_logits), y)
        losses.append(loss)
        grads.append(torch.autograd.grad(loss, list(model.parameters())))
    assert torch.allclose(losses[0], losses[1], rtol=1e-6)
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-5)


def test_compact_logits_score_as_the_padded_ones():
    task = miiii_task(13, readout="compact")
    model = _model(task)
    x, y = task.train
    padded = task.scores(fast_paths.last_logits(model, x), y)
    compact = task.scores(fast_paths.last_logits(model, x, compact=True), y)
    assert padded.keys() == compact.keys()
    assert all(torch.equal(padded[k], compact[k]) for k in padded)


def test_training_with_the_compact_readout_follows_the_padded_run():
    cfg = TrainConfig(steps=20, batch_size=None, lr=3e-3, weight_decay=1.0, warmup_steps=0,
                      schedule="constant", grad_clip=None, eval_every=10, progress=False)
    runs = {}
    for readout in ("padded", "compact"):
        task = miiii_task(11, readout=readout)
        model = _model(task, seed=2).train()
        runs[readout] = (train(model, task, cfg), model)
    (ra, ma), (rb, mb) = runs["padded"], runs["compact"]
    for a, b in zip(ma.parameters(), mb.parameters()):
        assert torch.allclose(a, b, atol=1e-4)
    assert ra.history["train_loss"].to_numpy() == pytest.approx(
        rb.history["train_loss"].to_numpy(), rel=1e-4)


def test_an_unknown_readout_is_named():
    with pytest.raises(ValueError, match="readout"):
        miiii_task(11, readout="sparse")
