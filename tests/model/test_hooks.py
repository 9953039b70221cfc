"""Hook points (rt_lib.model.HookPoint, Hooked): each activation read where TransformerLens names
it, checked against the same quantity computed by hand from the weights; a hook that returns a
tensor replaces the activation; hooks never outlive their block."""

import pytest
import torch
import torch.nn.functional as F

from rt_lib.model import LSTMConfig, TransformerConfig, build_model, miiii_config


def _gpt2(**kw):
    cfg = dict(d_vocab=11, n_ctx=6, d_model=16, n_layers=2, n_heads=4)
    cfg.update(kw)
    return build_model(TransformerConfig(**cfg), 0).eval()


def _tokens(b=3, t=6, v=11):
    return torch.randint(0, v, (b, t), generator=torch.Generator().manual_seed(0))


def test_every_activation_has_its_transformerlens_name_and_shape():
    model, x = _gpt2(), _tokens()
    _, cache = model.run_with_cache(x)
    b, t, d, h, k, m = 3, 6, 16, 4, 4, 64
    want = {"hook_embed": (b, t, d), "hook_pos_embed": (t, d)}
    for i in range(2):
        want |= {f"blocks.{i}.hook_resid_pre": (b, t, d), f"blocks.{i}.hook_attn_out": (b, t, d),
                 f"blocks.{i}.hook_resid_mid": (b, t, d), f"blocks.{i}.hook_mlp_out": (b, t, d),
                 f"blocks.{i}.hook_resid_post": (b, t, d),
                 # TransformerLens: [batch, pos, head_index, d_head]; the pattern
                 # [batch, head_index, query_pos, key_pos]
                 f"blocks.{i}.attn.hook_q": (b, t, h, k), f"blocks.{i}.attn.hook_k": (b, t, h, k),
                 f"blocks.{i}.attn.hook_v": (b, t, h, k), f"blocks.{i}.attn.hook_z": (b, t, h, k),
                 f"blocks.{i}.attn.hook_pattern": (b, h, t, t),
                 f"blocks.{i}.mlp.hook_pre": (b, t, m), f"blocks.{i}.mlp.hook_post": (b, t, m)}
    assert {name: tuple(a.shape) for name, a in cache.items()} == want


def test_the_cached_activations_are_what_the_weights_compute():
    model, x = _gpt2(), _tokens()
    logits, cache = model.run_with_cache(x)
    torch.testing.assert_close(cache["hook_embed"], model.W_E[x])
    torch.testing.assert_close(cache["blocks.0.hook_resid_pre"], model.W_E[x] + model.W_pos)
    blk = model.blocks[0]
    ln = F.layer_norm(cache["blocks.0.hook_resid_pre"], (16,), blk.ln1.w, blk.ln1.b, eps=1e-5)
    q = torch.einsum("btd,hdk->bhtk", ln, blk.attn.W_Q) + blk.attn.b_Q[:, None]
    key = torch.einsum("btd,hdk->bhtk", ln, blk.attn.W_K) + blk.attn.b_K[:, None]
    torch.testing.assert_close(cache["blocks.0.attn.hook_q"], q.transpose(1, 2), rtol=1e-5, atol=1e-6)
    scores = q @ key.transpose(-1, -2) / 2.0  # sqrt(d_head = 4)
    scores = scores.masked_fill(torch.ones(6, 6, dtype=torch.bool).triu(1), float("-inf"))
    torch.testing.assert_close(cache["blocks.0.attn.hook_pattern"], scores.softmax(-1),
                               rtol=1e-5, atol=1e-6)
    # the stream adds up: resid_mid = resid_pre + attn_out, resid_post = resid_mid + mlp_out
    torch.testing.assert_close(cache["blocks.1.hook_resid_mid"],
                               cache["blocks.1.hook_resid_pre"] + cache["blocks.1.hook_attn_out"])
    torch.testing.assert_close(cache["blocks.1.hook_resid_post"],
                               cache["blocks.1.hook_resid_mid"] + cache["blocks.1.hook_mlp_out"])
    torch.testing.assert_close(cache["blocks.0.mlp.hook_post"],
                               F.gelu(cache["blocks.0.mlp.hook_pre"], approximate="tanh"))
    final = F.layer_norm(cache["blocks.1.hook_resid_post"], (16,), model.ln_final.w,
                         model.ln_final.b, eps=1e-5)
    torch.testing.assert_close(logits, final @ model.W_U, rtol=1e-5, atol=1e-5)


def test_zeroing_a_heads_output_equals_removing_its_rows_of_W_O():
    model = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.0), 0).eval()
    x = torch.tensor([[3, 5, 13], [7, 1, 13]])

    def zero_head_2(z, hook):
        z = z.clone()  # [batch, pos, head_index, d_head]
        z[:, :, 2] = 0.0
        return z

    ablated = model.run_with_hooks(x, [("blocks.0.attn.hook_z", zero_head_2)], last_only=True)
    by_weights = build_model(model.cfg, 0).eval()
    with torch.no_grad():
        by_weights.blocks[0].attn.W_O[2] = 0.0
    expected = by_weights(x, last_only=True)
    finite = torch.isfinite(expected)
    torch.testing.assert_close(ablated[finite], expected[finite], rtol=1e-5, atol=1e-5)
    assert not torch.allclose(ablated[finite], model(x, last_only=True)[finite])  # it acted


def test_hooks_leave_with_their_block_even_on_error_and_a_wrong_name_says_which_exist():
    model, x = _gpt2(), _tokens()
    before = model(x)
    with pytest.raises(RuntimeError, match="inside"):
        with model.hooks([("blocks.0.hook_resid_post", lambda a, hook: a * 0)]):
            assert not torch.allclose(model(x), before)
            raise RuntimeError("inside")
    assert not any(point.active() for point in model.hook_points().values())
    torch.testing.assert_close(model(x), before)
    with pytest.raises(KeyError, match="blocks.0.hook_resid_post"):
        model.run_with_hooks(x, [("blocks.0.resid_post", lambda a, hook: None)])


def test_a_hook_is_called_with_its_points_name_and_the_lstm_has_one_too():
    model, x = _gpt2(), _tokens()
    seen = []
    model.run_with_hooks(x, [("blocks.1.mlp.hook_post", lambda a, hook: seen.append(hook.name))])
    assert seen == ["blocks.1.mlp.hook_post"]
    lstm = build_model(LSTMConfig(d_vocab=11, d_model=8), 0)
    logits, cache = lstm.run_with_cache(x, last_only=True)
    torch.testing.assert_close(logits, cache["hook_lstm_out"][:, -1] @ lstm.W_U + lstm.b_U)


def test_mean_ablating_a_head_equals_its_weights_replaced_by_its_mean_write():
    from rt_lib.analysis.activations import mean_ablate_heads

    # one block, last position alone: the head's mean z there is one vector, so its mean write
    # is a constant, which the bias b_O can carry in place of the head
    model = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.0, bias=True), 0).eval()
    with torch.no_grad():
        for param in model.parameters():  # biases start at 0: give them values to get wrong
            param.add_(0.1 * torch.randn_like(param))
    x = torch.cartesian_prod(torch.arange(13), torch.arange(13))
    x = torch.cat([x, torch.full((len(x), 1), 13)], 1)
    ablated = mean_ablate_heads(model, x, [(0, 1)], last_only=True)
    _, cache = model.run_with_cache(x, ["blocks.0.attn.hook_z"], last_only=True)
    mean_write = cache["blocks.0.attn.hook_z"][:, -1, 1].mean(0) @ model.blocks[0].attn.W_O[1]
    by_weights = build_model(model.cfg, 0).eval()
    by_weights.load_state_dict(model.state_dict())
    with torch.no_grad():
        by_weights.blocks[0].attn.b_O += mean_write
        by_weights.blocks[0].attn.W_O[1] = 0.0
    expected = by_weights(x, last_only=True)
    finite = torch.isfinite(expected)
    torch.testing.assert_close(ablated[finite], expected[finite], rtol=1e-4, atol=1e-5)
    assert not torch.allclose(ablated[finite], model(x, last_only=True)[finite], atol=1e-3)
    # a few rows at a time: the same mean over all of them, the same logits
    in_parts = mean_ablate_heads(model, x, [(0, 1)], last_only=True, batch_size=50)
    torch.testing.assert_close(in_parts, ablated, rtol=1e-5, atol=1e-6)


def _fired(model, run):
    """The names of the hook points that fire while ``run()`` runs."""
    fired = []
    hooks = [(name, lambda a, hook: fired.append(hook.name)) for name in model.hook_points()]
    with model.hooks(hooks):
        run()
    return set(fired)


# Which hook points the fast paths pass through (rt_lib/model/fast_paths.py's docstring says the
# same): the embedding's, each block's writes and its MLP's, never the attention's nor resid_pre.
BLOCK_WRITES = ("hook_attn_out", "hook_resid_mid", "hook_mlp_out", "hook_resid_post",
                "mlp.hook_pre", "mlp.hook_post")


def test_the_fast_paths_fire_the_embedding_write_and_mlp_hooks_and_no_attention_hook():
    from rt_lib.model import fast_paths

    model, x = _gpt2(), _tokens()
    plain = _fired(model, lambda: model(x))
    assert plain == set(model.hook_points())  # the plain forward fires all 26
    fast = _fired(model, lambda: fast_paths.logits(model, x))
    assert fast == {"hook_embed", "hook_pos_embed"} | {f"blocks.{i}.{n}" for i in range(2)
                                                        for n in BLOCK_WRITES}
    # a one-block model's (position, token) tables skip the embedding's hooks too
    miiii = build_model(miiii_config(13, d_model=32, n_heads=4, dropout=0.0), 0).eval()
    pairs = torch.cartesian_prod(torch.arange(13), torch.arange(13))
    rows = torch.cat([pairs, torch.full((len(pairs), 1), 13)], 1)
    assert fast_paths.token_tables_apply(miiii, rows)
    tables = _fired(miiii, lambda: fast_paths.last_logits(miiii, rows))
    assert tables == {f"blocks.0.{n}" for n in BLOCK_WRITES}
