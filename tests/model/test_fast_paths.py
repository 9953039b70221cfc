"""The performance shortcuts against the plain computations they replace."""

import pytest
import torch
import torch.nn.functional as F

from rt_lib.model import build_model, miiii_config
from rt_lib.model.fast_paths import distinct_rows, last_logits, token_tables_apply, unembed
from rt_lib.tasks.miiii import miiii_task


@pytest.mark.parametrize("b, t, v", [(500, 1, 7), (300, 2, 13), (200, 3, 50), (50, 12, 200)])
def test_distinct_rows_equals_unique_dim0(b, t, v):
    # (50, 12, 200): 12 * log2(200) > 62 bits, the fallback to unique(dim=0) itself
    x = torch.randint(0, v, (b, t), generator=torch.Generator().manual_seed(b))
    rows, inverse = distinct_rows(x, v)
    ref_rows, ref_inverse = x.unique(dim=0, return_inverse=True)
    assert torch.equal(rows, ref_rows) and torch.equal(inverse, ref_inverse)
    assert torch.equal(rows[inverse], x)


def _einsum_unembed(model, x):
    """The per-head readout written plainly: every head over all q_max classes, then masked."""
    logits = torch.einsum("bd,ndq->bnq", x, model.W_U)
    q_max = model.W_U.shape[-1]
    valid = torch.arange(q_max)[None] < torch.tensor(model.cfg.out_sizes)[:, None]
    return logits.masked_fill(~valid, float("-inf"))


def test_miiii_unembed_computes_only_existing_classes_and_equals_einsum():
    model = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.0), 0)
    x = torch.randn(40, 32, generator=torch.Generator().manual_seed(1), requires_grad=True)
    fast, plain = unembed(model, x), _einsum_unembed(model, x)
    torch.testing.assert_close(model.unembed(x), plain)  # the model's own is the plain one
    assert torch.equal(torch.isinf(fast), torch.isinf(plain))  # classes >= q masked in both
    finite = torch.isfinite(plain)
    torch.testing.assert_close(fast[finite], plain[finite], rtol=1e-5, atol=1e-6)
    assert model.out_columns.numel() == sum(model.cfg.out_sizes)  # 2+3+5+7+11 of 5 * 11
    # gradients: W_U's columns beyond q get none, the others the einsum's
    g_fast = torch.autograd.grad(fast[finite].square().sum(), [x, model.W_U])
    g_plain = torch.autograd.grad(plain[finite].square().sum(), [x, model.W_U])
    for a, b in zip(g_fast, g_plain):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_miiii_loss_equals_per_head_cross_entropy_over_valid_classes():
    task = miiii_task(11, "miiii", split="code", train_fraction=0.5)
    x, y = task.get_batch(0, None, 0)
    model = build_model(miiii_config(11, d_model=16, n_heads=2, dropout=0.0), 0)
    logits = last_logits(model, x)
    expected = torch.stack([
        F.cross_entropy(logits[:, i, :q], y[:, i], reduction="none") / torch.log(torch.tensor(q))
        for i, q in enumerate(task.qs)], 1)
    torch.testing.assert_close(task.per_head_loss(logits, y), expected, rtol=1e-5, atol=1e-6)


def test_one_block_token_tables_equal_the_full_forward():
    task = miiii_task(13, "miiii", split="code", train_fraction=0.8)
    x, _ = task.get_batch(0, None, 0)
    cfg = miiii_config(13, d_model=32, n_heads=4, dropout=0.0)
    model = build_model(cfg, 0)
    assert token_tables_apply(model, x)  # 2 x 14 (position, token) pairs for 135 rows
    fast = last_logits(model, x)
    plain = build_model(cfg, 0, last_position="full")  # every row in full
    assert not token_tables_apply(plain, x)
    full = model(x)[:, -1]
    # "full" is the plain forward: bit for bit the path a hook on the pattern forces
    assert torch.equal(plain(x, last_only=True), model.run_with_cache(x, last_only=True)[0])
    finite = torch.isfinite(full)
    torch.testing.assert_close(fast[finite], full[finite], rtol=1e-5, atol=1e-5)


def test_residual_dropout_leaves_embeddings_and_attention_alone():
    # the miiii code drops the residual stream after each add, never the embeddings
    model = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.5), 0).train()
    x = torch.randint(0, 14, (64, 3), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(model.embed(x), model.W_E[x] + model.W_pos)
    assert token_tables_apply(model, torch.randint(0, 14, (200, 3)))  # valid while training
    a, b = last_logits(model, x), last_logits(model, x)
    assert not torch.equal(a, b)  # dropout still acts (on the residual stream)
    _, cache = model.eval().run_with_cache(x)
    assert torch.allclose(cache["blocks.0.attn.hook_pattern"].sum(-1), torch.ones(1))
    gpt2 = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.5, dropout_at="gpt2",
                                      dropout_mask="sample"), 0)
    assert not torch.equal(gpt2.train().embed(x), gpt2.W_E[x] + gpt2.W_pos)
