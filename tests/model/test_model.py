import ast
import inspect
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import rt_lib.model
from rt_lib.model import (
    LSTM,
    TRAINABLE_PARAMS,
    LSTMConfig,
    Transformer,
    TransformerConfig,
    build_model,
    count_params,
    eval_mode,
    fast_paths,
    miiii_config,
    sinusoidal_positions,
)
from rt_lib.model.fast_paths import last_logits, shared_prefixes


def tiny(**kw):
    base = dict(d_vocab=11, n_ctx=5, d_model=16, n_layers=2, n_heads=4)
    base.update(kw)
    return TransformerConfig(**base)


def tokens(b=3, t=5, v=11, seed=0):
    return torch.randint(0, v, (b, t), generator=torch.Generator().manual_seed(seed))


def test_output_shapes():
    model = build_model(tiny(d_vocab_out=7), 0)
    x = tokens()
    assert model(x).shape == (3, 5, 7)
    assert model(x, last_only=True).shape == (3, 7)


def test_last_only_equals_last_position_of_full_forward():
    model = build_model(tiny(), 0)
    x = tokens()
    torch.testing.assert_close(model(x, last_only=True), model(x)[:, -1], rtol=1e-5, atol=1e-6)


def test_causal_mask_hides_the_future():
    model = build_model(tiny(), 0)
    x = tokens()
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % 11
    torch.testing.assert_close(model(x)[:, :-1], model(y)[:, :-1])
    assert not torch.allclose(model(x)[:, -1], model(y)[:, -1])


def test_non_causal_attention_sees_the_future():
    model = build_model(tiny(causal=False), 0)
    x = tokens()
    y = x.clone()
    y[:, -1] = (y[:, -1] + 1) % 11
    assert not torch.allclose(model(x)[:, 0], model(y)[:, 0])


def test_a_hooked_forward_equals_the_plain_one_and_its_pattern_is_a_causal_distribution():
    model = build_model(tiny(), 0)
    x = tokens()
    logits, cache = model.run_with_cache(x)
    assert torch.equal(logits, model(x))  # reading changes nothing: one path, hooked or not
    pattern = cache["blocks.0.attn.hook_pattern"]  # [b, h, t, t]
    assert pattern.shape == (3, 4, 5, 5)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(3, 4, 5))
    assert (pattern.triu(1) == 0).all()


def test_attention_matches_a_hand_written_reference():
    """One block, no LN: out = x + sum_h softmax(QK^T/sqrt(dk) + mask) V W_O[h] + MLP(...)."""
    cfg = tiny(n_layers=1, layernorm=False, bias=False)
    model = build_model(cfg, 1)
    x = tokens(b=2)
    resid = model.W_E[x] + model.W_pos[:5]
    att = model.blocks[0].attn
    heads = []
    for h in range(4):
        q, k, v = resid @ att.W_Q[h], resid @ att.W_K[h], resid @ att.W_V[h]
        s = q @ k.transpose(-1, -2) / math.sqrt(4)
        s = s.masked_fill(torch.ones(5, 5).triu(1).bool(), float("-inf"))
        heads.append(s.softmax(-1) @ v @ att.W_O[h])
    resid = resid + sum(heads)
    mlp = model.blocks[0].mlp
    resid = resid + F.gelu(resid @ mlp.W_in, approximate="tanh") @ mlp.W_out
    torch.testing.assert_close(model(x), resid @ model.W_U, rtol=1e-4, atol=1e-5)


def test_gpt2_init_statistics():
    cfg = tiny(d_model=256, n_layers=4, d_vocab=300)
    model = build_model(cfg, 0)
    assert model.W_E.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.blocks[0].attn.W_Q.std().item() == pytest.approx(0.02, rel=0.05)
    assert model.blocks[0].mlp.W_out.std().item() == pytest.approx(0.02 / math.sqrt(8), rel=0.05)
    assert model.blocks[0].attn.b_Q.abs().max().item() == 0
    assert (model.blocks[0].ln1.w == 1).all()


def test_he_init_uses_fan_in():
    cfg = miiii_config(p=113, d_model=256)
    model = build_model(cfg, 0)
    assert model.blocks[0].mlp.W_in.std().item() == pytest.approx(math.sqrt(2 / 256), rel=0.05)
    assert model.blocks[0].mlp.W_out.std().item() == pytest.approx(math.sqrt(2 / 1024), rel=0.05)


def test_miiii_configuration_shapes_and_masking():
    cfg = miiii_config(p=13, d_model=32, n_heads=4)
    assert cfg.out_sizes == (2, 3, 5, 7, 11)
    model = build_model(cfg, 0)
    names = {n for n, _ in model.named_parameters()}
    assert not any(n.rsplit(".", 1)[-1].startswith("b") for n in names)  # no biases, no LN
    x = torch.tensor([[3, 4, 13], [0, 12, 13]])
    logits = model(x, last_only=True)
    assert logits.shape == (2, 5, 11)
    for i, q in enumerate(cfg.out_sizes):
        assert torch.isinf(logits[:, i, q:]).all() and torch.isfinite(logits[:, i, :q]).all()


def test_same_seed_same_weights_and_global_rng_untouched():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = build_model(tiny(), 7)
    after = torch.rand(1)
    b = build_model(tiny(), 7)
    assert torch.equal(before, after)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


@pytest.mark.parametrize("trainable", list(TRAINABLE_PARAMS))
def test_trainable_setting_names_the_trainable_parameters(trainable):
    model = build_model(tiny(trainable=trainable), 0)
    got = {n for n, p in model.named_parameters() if p.requires_grad}
    expected = TRAINABLE_PARAMS[trainable]
    assert got == (expected if expected is not None else {n for n, _ in model.named_parameters()})


def test_parameter_counts_match_the_authors_gpt2():
    # Memorisation at width 128 (docs/papers.md, random transformers: tasks): 659,584 trainable
    # parameters fully trained and 262,784 random; their difference is the frozen core (2 blocks
    # + final LayerNorm) = 396,800.
    cfg = tiny(d_vocab=1025, n_ctx=3, d_model=128, trainable="embeddings")
    random_model = build_model(cfg, 0)
    assert count_params(random_model) == 262_784  # (1025 + 3 + 1025) * 128
    assert count_params(random_model, trainable_only=False) == 659_584


def test_sinusoidal_positions_are_a_frozen_buffer():
    model = build_model(tiny(pos_embed="sinusoidal", trainable="token_unembed"), 0)
    assert "W_pos" not in dict(model.named_parameters())
    torch.testing.assert_close(model.W_pos, sinusoidal_positions(5, 16))
    assert sinusoidal_positions(3, 4)[1, 0] == pytest.approx(math.sin(1.0))
    assert sinusoidal_positions(3, 4)[1, 1] == pytest.approx(math.cos(1.0))


def test_sinusoids_at_the_token_embeddings_scale_have_their_rms():
    """Amplitude 1 is the authors' (their weight_frozen == 101); pos_scale=None scales the table
    to the token embeddings' RMS, init_std, and pos_scale=c multiplies it by c."""
    table = sinusoidal_positions(64, 256)
    scaled = build_model(tiny(n_ctx=64, d_model=256, pos_embed="sinusoidal", pos_scale=None,
                              trainable="token_unembed"), 0)
    assert scaled.W_pos.pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=0.02)
    assert scaled.W_E.pow(2).mean().sqrt().item() == pytest.approx(0.02, rel=0.05)
    torch.testing.assert_close(scaled.W_pos, table * 0.02 * math.sqrt(2))
    half = build_model(tiny(pos_embed="sinusoidal", pos_scale=0.5), 0)
    torch.testing.assert_close(half.W_pos, sinusoidal_positions(5, 16) * 0.5)
    with pytest.raises(ValueError, match="pos_scale"):
        tiny(pos_scale=0.0)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(d_model=30, n_heads=4), "d_model=30 is not divisible by n_heads=4"),
        (dict(trainable="everything"), "trainable='everything' is not one of"),
        (dict(act="swish"), "act='swish'"),
        (dict(d_model=0), "d_model must be a positive integer"),
        (dict(dropout=1.0), "dropout"),
        (dict(pos_embed="rotary"), "pos_embed='rotary'"),
    ],
)
def test_bad_model_parameters_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tiny(**kwargs)


def test_sequence_longer_than_context_is_rejected():
    model = build_model(tiny(n_ctx=3), 0)
    with pytest.raises(ValueError, match="exceeds n_ctx=3"):
        model(tokens(t=4))


def test_lstm_shapes_and_frozen_core():
    model = build_model(LSTMConfig(d_vocab=11, d_model=16, d_vocab_out=5, trainable="embeddings"), 0)
    assert isinstance(model, LSTM)
    assert model(tokens()).shape == (3, 5, 5)
    assert model(tokens(), last_only=True).shape == (3, 5)
    assert {n for n, p in model.named_parameters() if p.requires_grad} == {"W_E", "W_U", "b_U"}
    with pytest.raises(ValueError, match="trainable='unembed'"):
        LSTMConfig(d_vocab=3, trainable="unembed")


def test_transformer_is_a_single_class_for_both_papers():
    assert type(build_model(miiii_config(p=7, d_model=8, n_heads=2), 0)) is Transformer


@pytest.mark.parametrize("t", [2, 4])
def test_shared_prefix_path_matches_full_forward_and_gradients(t):
    """Rows that repeat a prefix take the KV-cache path; values and grads must not change."""
    cfg = tiny(d_vocab=5, n_ctx=t)
    model = build_model(cfg, 2)
    prefixes = torch.randint(0, 5, (3, t - 1), generator=torch.Generator().manual_seed(0))
    x = torch.cat([prefixes.repeat(8, 1), torch.randint(0, 5, (24, 1))], 1)  # 3 prefixes, 24 rows
    assert shared_prefixes(model, x) is not None
    fast = last_logits(model, x)
    model.zero_grad()
    fast.square().sum().backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    slow = model(x)[:, -1]
    slow.square().sum().backward()
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-6)
    for n, p in model.named_parameters():
        torch.testing.assert_close(grads[n], p.grad, rtol=1e-4, atol=1e-6, msg=n)


def test_options_are_constructor_arguments_and_change_how_not_what():
    cfg = tiny(d_vocab=5, n_ctx=2)
    x = torch.cartesian_prod(torch.arange(5), torch.arange(5))  # 5 prefixes, 25 rows
    models = {mode: build_model(cfg, 1, last_position=mode) for mode in ("shared", "vocab", "full")}
    assert shared_prefixes(models["shared"], x) is not None
    assert shared_prefixes(models["vocab"], x) is not None
    assert shared_prefixes(models["full"], x) is None
    # forward never reads the options: the plain forward, bit for bit, whatever they say
    plain = models["full"](x, last_only=True)
    assert torch.equal(plain, models["shared"].run_with_cache(x, last_only=True)[0])
    torch.testing.assert_close(last_logits(models["full"], x), plain, rtol=1e-5, atol=1e-6)
    for mode in ("shared", "vocab"):
        assert torch.equal(models[mode](x, last_only=True), plain)
        torch.testing.assert_close(last_logits(models[mode], x), plain, rtol=1e-5, atol=1e-6)
    # the same weights whatever the options (they are not part of the initialisation)
    for name, p in models["shared"].state_dict().items():
        assert torch.equal(p, models["full"].state_dict()[name])
    unfused = build_model(cfg, 1, fused_attention=False)
    assert models["full"].fused_attention and not unfused.fused_attention
    assert torch.equal(unfused(x), models["full"](x))  # the plain forward does not read it either
    assert not hasattr(Transformer, "share_prefixes") and not hasattr(Transformer, "fused")
    with pytest.raises(ValueError, match="last_position='distinct' is not one of"):
        build_model(cfg, 1, last_position="distinct")


def test_unfused_attention_equals_the_fused_kernel_on_long_sequences():
    cfg = tiny(d_vocab=11, n_ctx=12)  # 12 > SHORT_SEQ positions: SDPA when fused
    x = tokens(b=4, t=12)
    fused, unfused = build_model(cfg, 0), build_model(cfg, 0, fused_attention=False)
    torch.testing.assert_close(fast_paths.logits(fused, x), fast_paths.logits(unfused, x),
                               rtol=1e-5, atol=1e-6)


def test_eval_mode_restores_the_training_flag():
    model = build_model(tiny(), 0)
    for before in (True, False):
        model.train(before)
        with eval_mode(model) as m:
            assert m is model and not model.training
        assert model.training is before
    model.train()
    with pytest.raises(RuntimeError), eval_mode(model):
        raise RuntimeError("restored on error too")
    assert model.training


def test_model_module_stands_alone_and_its_transformer_stays_short():
    # rt_lib/model/transformer.py imports no task; the Transformer class reads like nanoGPT's: its
    # kernels and last-position shortcuts live in rt_lib/model/fast_paths.py
    tree = ast.parse(inspect.getsource(rt_lib.model.transformer))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names}
    assert not any(name and name.startswith("rt_lib.tasks") for name in imported)
    lines, _ = inspect.getsourcelines(Transformer)
    assert len(lines) <= 110


# --- the miiii code's initialisation and dropout draw -------------------------------------------
# (docs/papers.md, miiii: the authors' code beyond the text)

def test_he_jax_init_matches_jax_he_normal_formula():
    """jax's he_normal: fan-in = product of all axes but the last, a normal truncated at 2 std
    and rescaled so that its std is sqrt(2 / fan-in) (W_Q at h = 4, d = 128: 0.0625)."""
    from rt_lib.model import TRUNCATED_STD, miiii_config

    cfg = miiii_config(37, d_model=128, n_heads=4, init="he_jax")
    model = build_model(cfg, 0)
    n_tasks = len(cfg.out_sizes)
    expected = {"W_E": 38, "W_pos": 3, "blocks.0.attn.W_Q": 4 * 128, "blocks.0.attn.W_V": 4 * 128,
                "blocks.0.attn.W_O": 4 * 32, "blocks.0.mlp.W_in": 128, "blocks.0.mlp.W_out": 512,
                "W_U": n_tasks * 128}
    params = dict(model.named_parameters())
    for name, fan_in in expected.items():
        w = params[name].detach()
        std = math.sqrt(2.0 / fan_in)
        bound = 2 * std / TRUNCATED_STD
        assert w.abs().max() <= bound + 1e-6, name  # truncated at two (pre-rescale) std
        if w.numel() >= 1000:  # sample std within 5 % of the formula
            assert abs(w.std().item() / std - 1) < 0.05, (name, w.std().item(), std)
    # the He init of this project's CPU recipe: fan-in = axis -2, so W_Q starts 2x larger
    he = dict(build_model(miiii_config(37, d_model=128, n_heads=4, init="he"), 0).named_parameters())
    ratio = he["blocks.0.attn.W_Q"].std() / params["blocks.0.attn.W_Q"].std()
    assert 1.9 < ratio.item() < 2.1


def test_miiii_config_is_the_authors_model_by_default():
    # miiii/model.py at ab76fe1: he_normal everywhere, dropout on the residual stream with the
    # key shared by the vmapped batch; notebook 11's CPU recipe is an explicit override
    from rt_lib.experiments.miiii_common import MiiiiParams
    from rt_lib.model import miiii_config

    cfg = miiii_config(37)
    assert (cfg.init, cfg.dropout_at, cfg.dropout_mask) == ("he_jax", "residual", "batch")
    assert (cfg.d_model, cfg.n_layers, cfg.dropout) == (256, 1, 0.1)
    params = MiiiiParams()
    cpu = params.model_config(params.task("miiii"))
    assert (cpu.init, cpu.dropout_at, cpu.dropout_mask) == ("he", "gpt2", "sample")


def test_batch_dropout_shares_one_mask_over_the_batch():
    from rt_lib.model import BatchDropout, miiii_config

    drop = BatchDropout(0.5).train()
    torch.manual_seed(0)
    out = drop(torch.ones(64, 3, 32))
    assert torch.equal(out, out[:1].expand_as(out))  # every example: the same mask
    assert 0.3 < (out[0] == 0).float().mean().item() < 0.7
    assert set(out.unique().tolist()) <= {0.0, 2.0}
    assert torch.equal(drop.eval()(torch.ones(2, 3)), torch.ones(2, 3))
    # in the model: identical rows stay identical in training with the shared mask only.  Equal
    # within float tolerance, not bit for bit: a BLAS (MKL on Intel) may round rows at different
    # positions of a batch differently; a mask per example moves logits by far more than that.
    rows = torch.tensor([[1, 2, 37]] * 8)
    for mask, same in (("batch", True), ("sample", False)):
        cfg = miiii_config(37, d_model=64, n_heads=4, dropout=0.5, dropout_mask=mask)
        model = build_model(cfg, 0).train()
        logits = model(rows, last_only=True)
        close = torch.allclose(logits, logits[:1].expand_as(logits), rtol=1e-5, atol=1e-6)
        assert close is same, mask
    with pytest.raises(ValueError, match="dropout_at='residual'"):
        miiii_config(37, dropout_mask="batch", dropout_at="gpt2")


def test_lstm_init_is_pytorchs_default_as_in_the_authors_code():
    """experiment_stream.py builds nn.Embedding (N(0, 1)) and nn.Linear(d, v) (U(+-1/sqrt(d)) for
    weight and bias); compared with those modules drawn here."""
    cfg = LSTMConfig(d_vocab=500, d_model=64, d_vocab_out=300)
    model = build_model(cfg, 0)
    assert model.W_E.std().item() == pytest.approx(nn.Embedding(500, 64).weight.std().item(), rel=0.05)
    bound = 1 / 64**0.5
    for p in (model.W_U, model.b_U):
        assert p.abs().max() <= bound and p.abs().max() > 0.95 * bound
    linear = nn.Linear(64, 300)
    assert model.W_U.std().item() == pytest.approx(linear.weight.std().item(), rel=0.05)
    small = build_model(LSTMConfig(d_vocab=500, d_model=64, init="small"), 0)
    assert small.W_E.std().item() == pytest.approx(0.02, rel=0.05) and (small.b_U == 0).all()
    with pytest.raises(ValueError, match="init"):
        LSTMConfig(d_vocab=5, init="xavier")
