import numpy as np
import pytest
import torch

from rt_lib.analysis.activations import best_circle_pcs, circularity, explained_variance, hidden_states, pca
from rt_lib.model import TransformerConfig, build_model


def circle(p, k, radius=1.0, phase=0.3):
    a = np.arange(p)
    return radius * np.stack([np.cos(2 * np.pi * k * a / p + phase),
                              np.sin(2 * np.pi * k * a / p + phase)], 1)


def test_pca_recovers_known_axes_and_variances():
    rng = np.random.default_rng(0)
    z = rng.standard_normal((2000, 3)) * np.array([3.0, 2.0, 0.5])
    rot, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    res = pca(z @ rot.T + 5.0)
    var = np.array([9.0, 4.0, 0.25])
    np.testing.assert_allclose(res.explained_variance_ratio, var / var.sum(), atol=0.02)
    # Component i is +-rot[:, i]; signs are normalised, so compare absolute cosines.
    cos = np.abs(np.sum(res.components * rot.T, axis=1))
    np.testing.assert_allclose(cos, 1.0, atol=1e-2)
    np.testing.assert_allclose(res.projected.mean(0), 0.0, atol=1e-9)


def test_pca_is_sign_stable_under_row_order():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((50, 6))
    a, b = pca(x), pca(x[::-1])
    np.testing.assert_allclose(a.components, b.components, atol=1e-10)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_perfect_circle_scores_one_with_its_frequency(k):
    score, got_k = circularity(circle(17, k))
    assert score == pytest.approx(1.0)
    assert got_k == k


def test_noise_scores_low():
    rng = np.random.default_rng(0)
    score, _ = circularity(rng.standard_normal((199, 2)))
    assert score < 0.2


def test_best_pair_finds_the_circle_among_noise():
    rng = np.random.default_rng(2)
    p = 23
    data = np.concatenate([rng.standard_normal((p, 1)) * 0.3, circle(p, 5, radius=2.0)[:, :1],
                           rng.standard_normal((p, 1)) * 0.3, circle(p, 5, radius=2.0)[:, 1:]], 1)
    (i, j), score, k = best_circle_pcs(data, max_pc=4)
    assert (i, j) == (1, 3) and score == pytest.approx(1.0) and k == 5


def test_plot_embedding_circle_draws_the_projected_points():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rt_lib.plots.figures import plot_embedding_circle

    rng = np.random.default_rng(3)
    proj = pca(rng.standard_normal((13, 6)))
    fig, ax = plt.subplots()
    plot_embedding_circle(ax, proj, (1, 3), title="t")
    (points,) = ax.collections
    np.testing.assert_allclose(points.get_offsets(), proj.projected[:, [1, 3]])
    assert ax.get_xlabel().startswith("PC2") and ax.get_ylabel().startswith("PC4")
    plt.close(fig)


def test_max_attention_logit_bounds_and_is_reached():
    from rt_lib.analysis.activations import max_attention_logit
    from rt_lib.model import TransformerConfig, build_model

    cfg = TransformerConfig(d_vocab=10, n_ctx=4, d_model=32, n_layers=1, n_heads=2, d_vocab_out=10)
    model = build_model(cfg, 0)
    bound = max_attention_logit(model)
    attn = model.blocks[0].attn
    W_Q, W_K = attn.W_Q[1], attn.W_K[1]  # [d, d_head]
    x = torch.randn(2000, 32)
    x = x / x.norm(dim=-1, keepdim=True) * 32**0.5  # LayerNorm output norm
    logits = ((x @ W_Q) * (x.roll(1, 0) @ W_K)).sum(-1) / 16**0.5
    assert logits.abs().max() <= bound[0, 1] + 1e-4
    u, s, vh = torch.linalg.svd(W_Q @ W_K.T)
    best = (32**0.5 * u[:, 0]) @ W_Q @ W_K.T @ (32**0.5 * vh[0]) / 16**0.5
    torch.testing.assert_close(best, bound[0, 1], rtol=1e-4, atol=1e-4)


def test_head_score_heatmap_writes_every_score():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rt_lib.plots.figures import plot_head_scores

    fig, ax = plt.subplots()
    plot_head_scores(ax, np.array([[0.1, 0.75], [0.5, 0.0]]), title="t")
    assert sorted(t.get_text() for t in ax.texts) == ["0.00", "0.10", "0.50", "0.75"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["layer 1", "layer 2"]
    plt.close(fig)


def test_explained_variance_of_a_hand_built_matrix():
    # Columns are scaled, orthogonal, zero-mean +-1 patterns: coordinate variances exactly
    # proportional to 16, 9, 4 (total 29), and they are already the principal axes.
    signs = torch.tensor([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=torch.float64)
    x = signs * torch.tensor([4.0, 3.0, 2.0])
    ev = explained_variance(x, k=1)
    assert ev["pcs"] == pytest.approx(16 / 29) and ev["neurons"] == pytest.approx(16 / 29)
    assert explained_variance(x, k=2)["pcs"] == pytest.approx(25 / 29)
    # Rotating the first two axes by 45 degrees keeps the PCs but mixes the neurons:
    # each rotated coordinate carries (16 + 9) / 2 of the variance.
    c = 2 ** -0.5
    rot = torch.tensor([[c, -c, 0], [c, c, 0], [0, 0, 1]], dtype=torch.float64)
    ev = explained_variance(x @ rot, k=1)
    assert ev["pcs"] == pytest.approx(16 / 29) and ev["neurons"] == pytest.approx(12.5 / 29)
    assert explained_variance(x @ rot + 7.0, k=3) == pytest.approx({"pcs": 1.0, "neurons": 1.0})


def test_explained_variance_rejects_degenerate_input():
    with pytest.raises(ValueError, match="zero variance"):
        explained_variance(torch.ones(5, 3))
    with pytest.raises(ValueError, match="shape"):
        explained_variance(torch.ones(3))
    with pytest.raises(ValueError, match="k must"):
        explained_variance(torch.randn(5, 3), k=0)


def test_hidden_states_are_what_the_unembedding_reads():
    model = build_model(TransformerConfig(d_vocab=11, n_ctx=5, d_model=16, n_layers=2, n_heads=2), 0).eval()
    tokens = torch.randint(0, 11, (6, 5), generator=torch.Generator().manual_seed(0))
    states = hidden_states(model, tokens, batch_size=4)  # two chunks
    assert list(states) == ["layer 1", "layer 2"] and states["layer 2"].shape == (6, 16)
    with torch.no_grad():
        logits = model(tokens)
        assert torch.allclose(model.unembed(model.ln_final(states["layer 2"])), logits[:, -1], atol=1e-5)
        picked = torch.zeros(6, 5, dtype=torch.bool)
        picked[0, 1] = picked[3, 4] = True
        some = hidden_states(model, tokens, picked)["layer 2"]
        assert torch.allclose(model.unembed(model.ln_final(some)), logits[picked], atol=1e-5)


def test_isotropic_baseline_is_k_over_d_for_many_states_and_1_when_they_span_k_dims():
    from rt_lib.analysis.activations import isotropic_baseline
    assert isotropic_baseline(100_000, 64, k=8) == pytest.approx(8 / 64, rel=0.1)
    assert isotropic_baseline(11, 256, k=10) == pytest.approx(1.0)  # 11 states span 10 dims
    few = isotropic_baseline(174, 256, k=10)
    assert few > 10 / 173 > 10 / 256  # more than a share of the spanned dimensions
