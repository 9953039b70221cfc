"""rt_lib.analysis.gradients and digit_attention_shares against independent computations."""

from __future__ import annotations

import math

import pytest
import torch

from rt_lib.analysis import activations
from rt_lib.analysis.activations import digit_attention_shares
from rt_lib.analysis.gradients import PARTS, gradient_norms, settled_at
from rt_lib.model import build_model, miiii_config
from rt_lib.tasks.miiii import miiii_inputs, miiii_task


def _miiii_model(p=7, seed=0):
    task = miiii_task(p)
    cfg = miiii_config(p, d_model=16, n_heads=2, dropout=0.1, out_sizes=task.qs, d_vocab=task.d_vocab,
                       n_ctx=task.n_ctx)
    return task, build_model(cfg, seed)


def test_gradient_norms_equal_backward_on_the_full_training_set_and_write_no_grad():
    task, model = _miiii_model()
    got = gradient_norms(model, task)
    assert all(p.grad is None for p in model.parameters())
    model.eval()
    x, y = task.train
    task.loss(model(x, last_only=True).float(), y).backward()
    grads = {name.rsplit(".", 1)[-1]: p.grad for name, p in model.named_parameters()}
    for part, names in PARTS.items():
        want = math.sqrt(sum(float(grads[n].double().pow(2).sum()) for n in names if n in grads))
        assert got[part] == pytest.approx(want, rel=1e-6), part
    assert set(got) == set(PARTS)


def test_settled_at_is_the_first_epoch_of_the_last_run_below_the_fraction():
    epochs = [1, 10, 100, 1000]
    assert settled_at(epochs, [1.0, 0.05, 0.04, 0.01], 0.1) == 10
    assert settled_at(epochs, [1.0, 0.05, 0.5, 0.01], 0.1) == 1000  # rose again at 100
    assert settled_at(epochs, [0.01, 0.05, 0.5, 1.0], 0.1) is None  # its peak is the last
    with pytest.raises(ValueError):
        settled_at(epochs, [1.0], 0.1)


def test_uniform_attention_splits_the_digits_evenly():
    _, model = _miiii_model()
    with torch.no_grad():
        model.blocks[0].attn.W_Q.zero_()  # every score 0: attention uniform over the keys
    tokens, _ = miiii_inputs(7)
    assert torch.allclose(digit_attention_shares(model, tokens), torch.full((2,), 0.5))


def test_digit_shares_average_each_heads_split_over_inputs(monkeypatch):
    # two inputs, two heads; from the last query: head 0 puts 0.6/0.2 then 0.3/0.1 on the digits
    # (3/4 on digit 0 both times), head 1 0.1/0.1 then 0.0/0.5 (1/2 then all on digit 1)
    pattern = torch.zeros(1, 2, 2, 3, 3)
    pattern[0, 0, 0, 2] = torch.tensor([0.6, 0.2, 0.2])
    pattern[0, 1, 0, 2] = torch.tensor([0.3, 0.1, 0.6])
    pattern[0, 0, 1, 2] = torch.tensor([0.1, 0.1, 0.8])
    pattern[0, 1, 1, 2] = torch.tensor([0.0, 0.5, 0.5])
    monkeypatch.setattr(activations, "attention_patterns", lambda model, tokens: pattern)
    got = digit_attention_shares(None, torch.zeros(2, 3, dtype=torch.long))
    assert got.tolist() == pytest.approx([0.75, 0.75])  # head 1: mean of (0.5, 1.0) on digit 1
