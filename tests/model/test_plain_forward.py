"""The model's structure: ``Transformer.forward`` is the plain forward; the attention kernels, the
multi-task unembedding and the last-position shortcuts live in rt_lib/model/fast_paths.py, called
by name by the code that trains (``fast_paths.logits``, ``fast_paths.last_logits``)."""

import ast
import inspect

import pytest
import torch

import rt_lib.model
from rt_lib.model import (
    LSTMConfig,
    Transformer,
    TransformerConfig,
    attend,
    attention_pattern,
    build_model,
    fast_paths,
    miiii_config,
)
from rt_lib.model.fast_paths import SHORT_SEQ, attend_fused, attend_short, attention_kernel
from rt_lib.tasks.modular import modular_addition
from rt_lib.training.train import TrainConfig, make_optimizer, train_step


def _imported_modules(module) -> set[str]:
    tree = ast.parse(inspect.getsource(module))
    names = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    names |= {f"{node.module}.{alias.name}" for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) for alias in node.names}
    names |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
              for alias in node.names}
    return {name for name in names if name}


def test_model_module_does_not_import_the_shortcuts():
    transformer = rt_lib.model.transformer
    assert not any("fast_paths" in name for name in _imported_modules(transformer))
    assert "rt_lib.model" in _imported_modules(fast_paths)  # the other way round
    # the plain forward names no kernel and no shortcut: one pattern, softmax(q k^T / sqrt(k)),
    # for every length, and a masked einsum for a multi-task readout
    T, B, A = Transformer, transformer.Block, transformer.Attention
    code = "".join(inspect.getsource(f) for f in (T.forward, T.embed, T.unembed, B.forward, B.write,
                                                   A.forward, A.mix, A.out))
    for name in ("fast_paths", "scaled_dot_product_attention", "SHORT_SEQ", "attend_short",
                 "index_copy"):
        assert name not in code, name


def _blocked(*args, **kwargs):
    raise AssertionError("Transformer.forward called a shortcut of rt_lib.model.fast_paths")


def test_forward_runs_no_shortcut_whatever_last_position_says(monkeypatch):
    for name in fast_paths.__all__:
        if callable(getattr(fast_paths, name)):
            monkeypatch.setattr(fast_paths, name, _blocked)
    cfg = TransformerConfig(d_vocab=5, n_ctx=2, d_model=16, n_layers=2, n_heads=2)
    x = torch.cartesian_prod(torch.arange(5), torch.arange(5))  # 5 prefixes, 25 rows
    outs = [build_model(cfg, 0, last_position=mode)(x, last_only=True)
            for mode in ("shared", "vocab", "full")]
    assert all(torch.equal(out, outs[0]) for out in outs)
    torch.testing.assert_close(outs[0], build_model(cfg, 0)(x)[:, -1], rtol=1e-5, atol=1e-6)


def _model_and_batch(n_layers: int) -> tuple[Transformer, torch.Tensor]:
    if n_layers == 1:  # miiii-like: one block, non-causal, (position, token) tables
        model = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.0), 0)
        a, b = torch.cartesian_prod(torch.arange(13), torch.arange(13)).T
        return model, torch.stack([a, b, torch.full_like(a, 13)], 1)
    cfg = TransformerConfig(d_vocab=7, n_ctx=12, d_model=16, n_layers=n_layers, n_heads=2)
    gen = torch.Generator().manual_seed(0)
    prefixes = torch.randint(0, 7, (4, 10), generator=gen)  # 11 > SHORT_SEQ positions
    x = torch.cat([prefixes.repeat(10, 1), torch.randint(0, 7, (40, 1), generator=gen)], 1)
    return build_model(cfg, 0), x


@pytest.mark.parametrize("n_layers", [1, 2])
def test_last_logits_takes_a_shortcut_equal_to_the_plain_forward(n_layers):
    model, x = _model_and_batch(n_layers)
    assert fast_paths.last_position_logits(model, x) is not None  # a shortcut applies
    fast, plain = fast_paths.last_logits(model, x), model(x, last_only=True)
    assert fast.shape == plain.shape
    finite = torch.isfinite(plain)  # miiii: classes beyond q are -inf in both
    assert torch.equal(finite, torch.isfinite(fast))
    torch.testing.assert_close(fast[finite], plain[finite], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(plain, model(x)[:, -1], rtol=1e-5, atol=1e-6)
    # no shortcut allowed, or none for this model: the training forward at the last position
    full = build_model(model.cfg, 0, last_position="full")
    assert torch.equal(fast_paths.last_logits(full, x), fast_paths.logits(full, x, last_only=True))
    lstm = build_model(LSTMConfig(d_vocab=14, d_model=8), 0)
    assert torch.equal(fast_paths.last_logits(lstm, x), lstm(x, last_only=True))


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("kind", ["gpt2 short", "gpt2 long", "miiii", "bias, no layernorm"])
def test_the_training_forward_equals_the_plain_forward(kind, fused):
    """fast_paths.logits (kernels by length, the unembedding over existing classes) against
    Transformer.forward, at every position and at the last alone, in eval and in train mode
    without dropout; and its gradients."""
    gen = torch.Generator().manual_seed(3)
    if kind == "miiii":
        cfg, t, v = miiii_config(13, d_model=32, n_heads=4, dropout=0.0), 3, 14
    else:
        t = 12 if kind == "gpt2 long" else 5  # beyond SHORT_SEQ keys: SDPA when fused
        cfg = TransformerConfig(d_vocab=9, n_ctx=t, d_model=16, n_layers=2, n_heads=2,
                                dropout=0.0, bias=kind.startswith("bias"),
                                layernorm=not kind.startswith("bias"))
        v = 9
    model = build_model(cfg, 0, fused_attention=fused)
    x = torch.randint(0, v, (6, t), generator=gen)
    for last_only in (False, True):
        plain, fast = model(x, last_only=last_only), fast_paths.logits(model, x, last_only)
        assert fast.shape == plain.shape
        finite = torch.isfinite(plain)  # miiii: classes beyond q are -inf in both
        assert torch.equal(finite, torch.isfinite(fast))
        torch.testing.assert_close(fast[finite], plain[finite], rtol=1e-5, atol=1e-5)
    grads = [torch.autograd.grad(out[torch.isfinite(out)].square().sum(), model.W_E)[0]
             for out in (model(x), fast_paths.logits(model, x))]
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-5)


def test_attention_kernel_is_chosen_by_length_and_equals_the_plain_attention():
    # the choice the recorded results were computed with: broadcast up to SHORT_SEQ keys, SDPA
    # beyond (plain matmuls without fusion, for vmap)
    assert attention_kernel(SHORT_SEQ, True) is attend_short
    assert attention_kernel(SHORT_SEQ, False) is attend_short
    assert attention_kernel(SHORT_SEQ + 1, True) is attend_fused
    assert attention_kernel(SHORT_SEQ + 1, False) is attend
    gen = torch.Generator().manual_seed(1)
    for t in (3, 12):
        q, key, value = (torch.randn(2, 3, t, 4, generator=gen) for _ in range(3))
        for causal in (True, False):
            plain = attend(q, key, value, causal, 0.0, False)
            pattern = attention_pattern(q, key, causal)
            assert pattern.shape == (2, 3, t, t)
            torch.testing.assert_close(plain, pattern @ value)
            for kernel in (attend_short, attend_fused):
                torch.testing.assert_close(kernel(q, key, value, causal, 0.0, False), plain,
                                           rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_layers", [1, 2])
def test_train_step_calls_the_shortcut_by_name(monkeypatch, n_layers):
    task = modular_addition(7, train_fraction=0.6)
    model = build_model(TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_layers=n_layers,
                                          n_heads=2), 0)
    calls = []
    original = fast_paths.last_logits

    def counted(model, tokens, *rest):
        calls.append(len(tokens))
        return original(model, tokens, *rest)

    monkeypatch.setattr(fast_paths, "last_logits", counted)
    x, y = task.get_batch(0, None, 0)
    cfg = TrainConfig(steps=1, batch_size=None, lr=1e-3, weight_decay=1e-3, warmup_steps=0,
                      progress=False)
    loss = train_step(model, task, make_optimizer(model, cfg), x, y, cfg)
    assert calls == [len(x)] and torch.isfinite(loss)
