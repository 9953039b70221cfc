"""miiii analysis (notebooks 12, 13, 15): correlations, singular-value marks, Fourier spectra,
neuron grids, the neuron explorer, snapshots and the random-transformer variant."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from rt_lib.analysis import fourier
from rt_lib.experiments import miiii_common as mc
from rt_lib.experiments import miiii_neurons as mn
from rt_lib.experiments import miiii_training as mi
from rt_lib.experiments.miiii_common import MiiiiParams
from rt_lib.experiments.random_miiii import RandomMiiiiParams, per_head_table
from rt_lib.experiments.random_miiii import run as run_random
from rt_lib.model import build_model, miiii_config
from rt_lib.plots.explorers import neuron_explorer

TINY = dict(p=7, epochs=12, eval_points=4, n_snapshots=3, d_model=16, n_heads=2, threads=1)


def cos_grid(p, w0, w1, amplitude=1.0):
    a = np.arange(p)
    return amplitude * np.cos(2 * np.pi * (w0 * a[:, None] + w1 * a[None, :]) / p)


def test_pearson_matches_numpy():
    gen = np.random.default_rng(0)
    a, b = gen.normal(size=50), gen.normal(size=50)
    assert fourier.pearson(a, a * 3 + 1) == pytest.approx(1.0)
    assert fourier.pearson(a, b) == pytest.approx(np.corrcoef(a, b)[0, 1])
    with pytest.raises(ValueError, match="constant"):
        fourier.pearson(a, np.ones(50))


def test_positional_correlation_reads_the_two_digit_positions():
    model = build_model(miiii_config(5, d_model=8, n_heads=2), 0)
    with torch.no_grad():
        model.W_pos[0] = torch.arange(8.0)
        model.W_pos[1] = -2 * torch.arange(8.0)
        model.W_pos[2] = torch.randn(8)  # the "=" position is not part of it
    assert fourier.positional_correlation(model) == pytest.approx(-1.0)


def test_positional_correlation_over_the_first_dims_only():
    model = build_model(miiii_config(5, d_model=8, n_heads=2), 0)
    with torch.no_grad():
        model.W_pos[0] = torch.tensor([1.0, 2, 3, 4, 0, 5, 0, 5])
        model.W_pos[1] = torch.tensor([1.0, 2, 3, 4, 5, 0, 5, 0])
    # the first four dimensions agree exactly; the last four disagree
    assert fourier.positional_correlation(model, dims=4) == pytest.approx(1.0)
    w = model.W_pos.detach().numpy()
    full = np.corrcoef(w[0], w[1])[0, 1]
    assert fourier.positional_correlation(model) == pytest.approx(full)
    with pytest.raises(ValueError, match="dims"):
        fourier.positional_correlation(model, dims=9)


def test_correlation_noise_is_the_spread_of_r_between_random_vectors():
    gen = np.random.default_rng(0)
    n = 37
    rs = [np.corrcoef(gen.normal(size=n), gen.normal(size=n))[0, 1] for _ in range(4000)]
    assert np.std(rs) == pytest.approx(fourier.correlation_noise(n), rel=0.05)


def test_cumulative_marks_on_values_and_on_their_squares():
    s = np.array([3.0, 2.0, 1.0])
    # sums 3/6 = 0.5, 5/6 = 0.83, 1: half at the first value, 90 % needs all three
    assert fourier.cumulative_marks(s, (0.5, 0.9)) == [1, 3]
    # squares 9/14 = 0.64, 13/14 = 0.93: the variance is more concentrated
    assert fourier.cumulative_marks(s, (0.5, 0.9), squared=True) == [1, 2]
    with pytest.raises(ValueError):
        fourier.cumulative_marks(s, (1.5,))


def test_fourier_power_finds_the_embedding_frequencies():
    p = 13
    x = np.arange(p)
    emb = np.stack([np.cos(2 * np.pi * 3 * x / p), np.sin(2 * np.pi * 3 * x / p),
                    np.cos(2 * np.pi * 5 * x / p)], 1)
    power = fourier.fourier_power(emb)
    assert power.shape == (6,)  # w = 1..6
    expected = np.zeros(6)
    expected[2], expected[4] = 2 / 3, 1 / 3  # two unit columns at w = 3, one at w = 5
    np.testing.assert_allclose(power, expected, atol=1e-12)
    # even length: the Nyquist frequency is its own twin
    alt = np.cos(np.pi * np.arange(8))[:, None]
    np.testing.assert_allclose(fourier.fourier_power(alt), [0, 0, 0, 1], atol=1e-12)


def test_vector_periodicity_reads_each_top_singular_vector_at_its_strongest_frequency():
    p = 37
    x = np.arange(p)
    cos3, sin5 = np.cos(2 * np.pi * 3 * x / p), np.sin(2 * np.pi * 5 * x / p)
    # orthogonal columns: the singular vectors are the two waves, s in the ratio 3 : 2, so the
    # first alone reaches half the sum of s and both reach 0.9
    emb = np.stack([3 * cos3, 2 * sin5, np.zeros(p)], 1)
    np.testing.assert_allclose(fourier.vector_periodicity(emb, 0.5), [1.0], atol=1e-12)
    np.testing.assert_allclose(fourier.vector_periodicity(emb, 0.9), [1.0, 1.0], atol=1e-12)
    # one vector that is two waves of equal power: half of it at its strongest frequency
    np.testing.assert_allclose(fourier.vector_periodicity((cos3 + sin5)[:, None]), [0.5], atol=1e-12)
    # noise: no vector near one frequency (18 frequencies at p = 37)
    noise = fourier.vector_periodicity(np.random.default_rng(0).normal(size=(p, 64)))
    assert len(noise) > 5 and max(noise) < 0.5


def test_active_and_top_frequencies_of_a_known_grid():
    p = 11
    grid = np.stack([cos_grid(p, 2, 4), cos_grid(p, 1, 0, 0.5) + cos_grid(p, 3, 3)], -1)
    power = fourier.spectrum_2d(grid)
    active = {tuple(pair) for pair in fourier.active_frequencies(power, k=1.0).tolist()}
    assert active == {(2, 4), (1, 0), (3, 3)}  # each listed once, not with its twin (-w0, -w1)
    top = fourier.top_frequencies(power[..., 1], 2)
    # power ratio 1 : 0.25 between the (3, 3) and (1, 0) waves
    assert [(a, b) for a, b, _ in top] == [(3, 3), (1, 0)]
    assert [share for *_, share in top] == pytest.approx([0.8, 0.2])


def test_interaction_share_separates_sums_from_products():
    p = 11
    additive = (cos_grid(p, 2, 0) + cos_grid(p, 0, 3))[..., None]  # f(x1) + g(x0)
    product = (cos_grid(p, 2, 0) * cos_grid(p, 0, 3))[..., None]  # = half (2, 3) + half (2, -3)
    # each unit wave has power p^4 / 2; the product's two half waves p^4 / 8 each, so doubling it
    # gives both neurons the same power p^4
    mixed = np.concatenate([additive, 2 * product], -1)
    assert fourier.interaction_share(fourier.spectrum_2d(additive)) == pytest.approx(0.0, abs=1e-12)
    assert fourier.interaction_share(fourier.spectrum_2d(product)) == pytest.approx(1.0)
    assert fourier.interaction_share(fourier.spectrum_2d(mixed)) == pytest.approx(0.5)


def test_neuron_grid_matches_the_full_forward():
    p = 7
    model = build_model(miiii_config(p, d_model=16, n_heads=2), 3)
    grid = fourier.neuron_grid(model, p)
    assert grid.shape == (p, p, 64)
    with torch.no_grad():  # every position computed
        _, cache = model.eval().run_with_cache(torch.tensor([[4, 2, p]]), ["blocks.0.mlp.hook_post"])
    np.testing.assert_allclose(grid[4, 2], cache["blocks.0.mlp.hook_post"][0, -1].numpy(),
                               atol=1e-5)


def test_readout_strength_is_the_norm_through_each_head():
    model = build_model(miiii_config(7, d_model=8, n_heads=2), 0)
    strength = mn.readout_strength(model)
    assert strength.shape == (32, 3)  # d_mlp x heads (q = 2, 3, 5)
    w_out, w_u = model.blocks[0].mlp.W_out.detach(), model.W_U.detach()
    assert strength[5, 1] == pytest.approx(float((w_out[5] @ w_u[1]).norm()), rel=1e-5)


def test_neuron_explorer_redraws_on_every_slider():
    p = 7
    grids = {10: np.random.default_rng(0).normal(size=(p, p, 4)),
             20: np.random.default_rng(1).normal(size=(p, p, 4))}
    explorer = neuron_explorer(grids, (2, 3, 5))
    sliders = {w.description: w for w in explorer.children[0].children}
    image = explorer.children[-1]
    assert set(sliders) == {"neuron", "epoch", "task q"}
    for name, value in (("neuron", 2), ("epoch", 10), ("task q", 5)):
        before = image.value
        sliders[name].value = value
        assert image.value != before, f"moving {name} did not change the figure"
        assert image.value[:8] == b"\x89PNG\r\n\x1a\n"


def test_training_params_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown keys"):
        mc.training_params({"learning_rate": 1e-3}, ("miiii",))
    with pytest.raises(ValueError, match="trainable"):
        MiiiiParams(trainable="nothing")


def test_runs_are_reused_and_snapshots_load(results_tmp):
    params = mc.training_params(TINY, ("miiii",))
    first = mc.load_runs(params)["miiii"]
    again = mc.load_runs(params)["miiii"]  # loaded from its finished checkpoint, not retrained
    assert again.folder == first.folder
    assert again.result.history.equals(first.result.history)
    models = mc.snapshot_models(again)
    assert sorted(models) == list(models) and max(models) == 12
    final = again.result.model.cpu()
    for name, value in models[12].state_dict().items():
        torch.testing.assert_close(value, final.state_dict()[name])


def _tree(folder):
    """{relative path: bytes} of every file under ``folder``."""
    return {f.relative_to(folder): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def test_a_run_another_notebook_finished_is_read_from_its_folder_and_left_untouched(results_tmp):
    from rt_lib.experiments import miiii_embeddings as me
    params = mc.training_params(TINY, ("miiii",))
    other = mc.run(params, name=mn.NAME, seed=1)["T_miiii"]  # 13's further seed, trained there
    assert other.folder.parent.parent == results_tmp / mn.NAME
    before = _tree(results_tmp / mn.NAME)
    # 12 asks for the same run with 13's folder to search (run(reuse=...): any notebook's
    # folder holding the same run): loaded from there, not retrained, nothing written in either
    found = mc.run(params, name=me.NAME, seed=1, reuse=(results_tmp / mn.NAME,))["T_miiii"]
    assert found.folder == other.folder
    assert found.result.history.equals(other.result.history)
    assert _tree(results_tmp / mn.NAME) == before
    assert not (results_tmp / me.NAME / "runs").exists()
    # another seed is in neither folder searched: trained in the notebook's own
    own = mc.run(params, name=me.NAME, seed=2, reuse=(results_tmp / mn.NAME,))["T_miiii"]
    assert own.folder.parent.parent == results_tmp / me.NAME


def test_notebook_12s_further_seeds_come_from_11s_extra_seeds_else_its_own_folder(results_tmp):
    from rt_lib.experiments import miiii_embeddings as me
    params = me.EmbeddingParams(variants=("nanda", "miiii"), train_params=TINY, pos_dims=4,
                                seeds=(0, 1, 2))
    training = params.training()
    mc.seed_runs(replace(training, extra_seeds=(1,)))  # 11 trained seed 1 of each variant
    eleven = mc.runs_folder(training) / "runs"
    trained_by_11 = sorted(f.name for f in eleven.iterdir())
    tables = me.seed_tables(params)
    assert len(tables) == 2 and all(list(t.task) == ["T_nanda", "T_miiii"] for t in tables)
    # seed 1 read from 11's folder (nothing added there), seed 2 trained in 12's own
    assert sorted(f.name for f in eleven.iterdir()) == trained_by_11
    mine = sorted(f.name for f in (results_tmp / me.NAME / "runs").iterdir())
    two = replace(training, seed=2)
    assert mine == sorted(two.run_key(v, two.grokfast_lambda) for v in ("nanda", "miiii"))
    for bad in ((1, 2), (0, 1, 1)):  # 11's seed missing, a seed twice
        with pytest.raises(ValueError, match="seeds"):
            me.EmbeddingParams(train_params=TINY, pos_dims=4, seeds=bad)


def test_random_miiii_trains_only_the_embeddings(results_tmp):
    params = RandomMiiiiParams(variants=("nanda",), train_params=TINY, widths=(16,))
    runs = run_random(params)
    random_run = runs["random (d=16) · T_nanda"]
    assert random_run.result.model.cfg.trainable == "embeddings"
    # the frozen block is still exactly its initialisation (same seed as MiiiiParams.model)
    fresh = params.random(16).model(random_run.task)
    trained = random_run.result.model.cpu()
    torch.testing.assert_close(trained.blocks[0].mlp.W_in, fresh.blocks[0].mlp.W_in)
    assert not torch.equal(trained.W_E, fresh.W_E)
    table = per_head_table(runs, "nanda")
    assert list(table.columns) == ["q", "trained (d=16)", "random (d=16)"]
    with pytest.raises(ValueError, match="widths"):
        RandomMiiiiParams(widths=(0,))


def test_authors_neuron_spectrum_against_an_explicit_dft():
    p, gen = 7, np.random.default_rng(1)
    grid = gen.normal(size=(p, p, 3))
    n = p - 1  # token 0 left out on both axes
    g = grid[1:, 1:, 0]
    expected = []
    for v in range(n // 2 + 1):  # the second token's frequencies (real input: half the spectrum)
        mags = [abs(sum(g[a, b] * np.exp(-2j * np.pi * (u * a + v * b) / n)
                        for a in range(n) for b in range(n))) for u in range(n)]
        expected.append(np.mean(mags))  # averaged over the first token's frequencies
    spectrum = fourier.authors_neuron_spectrum(grid, neurons=2)
    assert spectrum.shape == (2, n // 2 + 1)
    np.testing.assert_allclose(spectrum[0], expected, rtol=1e-10)


def test_authors_active_counts_normalise_each_frequency_over_time():
    # frequency 0 is flat over time (1/3 each); frequency 1 puts 0.8 of its power at the last time
    series = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 8.0]])
    # shares 1/3, 1/3, 1/3, 0.1, 0.1, 0.8: mean 1/3, std 0.233, so only 0.8 is above mean + std
    assert fourier.authors_active_counts(series, k=1.0).tolist() == [0, 0, 1]
    # scaling one frequency's power changes nothing: the count is per frequency's own history
    assert fourier.authors_active_counts(series * [5.0, 1.0], k=1.0).tolist() == [0, 0, 1]
    with pytest.raises(ValueError, match="series"):
        fourier.authors_active_counts(np.ones(4))


def test_authors_table_counts_neuron_0_over_the_snapshots_in_epoch_order():
    gen = np.random.default_rng(2)
    grids = {epoch: gen.normal(size=(5, 5, 3)) for epoch in (100, 1, 10)}
    table = mn.authors_active_frequency_table(grids, (1.0,), neurons=2)
    assert table["epoch"].tolist() == [1, 10, 100]
    series = np.stack([fourier.authors_neuron_spectrum(grids[e], 2)[0] for e in (1, 10, 100)])
    assert table["active, neuron 0 (k = 1)"].tolist() == fourier.authors_active_counts(series, 1.0).tolist()


def test_a_t_miiii_longer_than_its_baselines_is_read_at_their_last_epoch(results_tmp, tmp_path):
    """With baseline_epochs below epochs, T_miiii keeps its weights at the baselines' end, and
    every comparison reads it there: the same weights and validation accuracy as a T_miiii run
    trained for exactly that many epochs (not the nearest epoch logged before it)."""
    from rt_lib.claims.ledger import Claims
    from rt_lib.experiments import miiii_embeddings as me

    # at p = 7 three frequencies are all there is (every share is 1); lr 0.1 moves W_E enough
    # between epochs 7 and 12 to tell the two apart
    tiny = TINY | {"p": 11, "lr": 0.1}
    runs = mc.run(mc.training_params(tiny | {"baseline_epochs": 7}, ("miiii", "basis")))
    long, basis = runs["T_miiii"], runs["T_basis"]
    short = mc.run(mc.training_params(tiny | {"epochs": 7}, ("miiii",)))["T_miiii"]
    assert mc.epochs_trained(long) == 12 and mc.epochs_trained(basis) == 7
    assert 7 not in long.result.history["step"].tolist()  # logged at 5 and 12, not at 7
    expected = short.result.model.state_dict()
    for name, value in mc.model_at(long, 7).state_dict().items():
        torch.testing.assert_close(value, expected[name], rtol=0, atol=0)
    end = short.result.history.iloc[-1]
    row = mc.row_at(long, 7)
    assert (row["valid_acc"], row["train_acc"]) == (end["valid_acc"], end["train_acc"])
    assert mc.valid_at(long, 12) == long.result.history["valid_acc"].iloc[-1]
    with pytest.raises(ValueError, match="kept no weights at epoch 6.*baseline_epochs=6"):
        mc.valid_at(long, 6)
    # mi-basis-memorises: T_miiii's W_E read at T_basis's epoch
    params = mc.training_params(tiny | {"baseline_epochs": 7}, ("miiii", "basis"))
    record = Claims(tmp_path, strict=False, notebook=mi.NAME)
    tables = {label: mi.generalisation_table(r, 0.95) for label, r in runs.items()}
    mi.check_claims(runs, tables, params, record)
    measured = next(c.measured for c in record.claims if c.id == "mi-basis-memorises")
    shares = {e: fourier.top_frequency_share(fourier.token_embedding(m, 11))
              for e, m in ((7, short.result.model), (12, long.result.model))}
    assert f"{shares[7]:.2f}" != f"{shares[12]:.2f}"  # else this test could not tell them apart
    assert f"T_miiii {shares[7]:.2f}, T_basis" in measured
    # notebook 12's table: every row at the shortest run's end
    table = me.embedding_table({"miiii": long, "basis": basis}, 11, pos_dims=4).set_index("task")
    assert table["epochs"].tolist() == [7, 7]
    assert table.loc["T_miiii", "final valid acc"] == end["valid_acc"]
    alone = me.embedding_table({"miiii": short}, 11, pos_dims=4).set_index("task")
    assert table.loc["T_miiii", "top-3 frequencies' power share"] == alone.loc[
        "T_miiii", "top-3 frequencies' power share"]


def test_only_t_miiii_longer_than_its_baselines_keeps_a_snapshot_at_their_end():
    plain = MiiiiParams(**TINY, variants=("miiii", "basis"))
    longer = replace(plain, baseline_epochs=7)
    assert longer.compared_at("miiii", 2.0) == (7,)
    # the baselines end there; a variant at full epochs is compared with none of them
    assert longer.compared_at("basis", 2.0) == longer.compared_at("miiii", 0.0) == ()
    assert replace(longer, full_epoch_variants=("masked",)).compared_at("masked", 2.0) == ()
    assert plain.compared_at("miiii", 2.0) == replace(plain, baseline_epochs=12).compared_at("miiii", 2.0) == ()
    # the run gains a snapshot, so a key of its own; the baselines and every run of a profile
    # without baseline_epochs keep theirs (results stored before stay found)
    assert longer.run_key("miiii", 2.0) != plain.run_key("miiii", 2.0)
    assert longer.run_key("basis", 2.0) == replace(plain, epochs=7).run_key("basis", 2.0)
    assert replace(plain, baseline_epochs=12).run_key("miiii", 2.0) == plain.run_key("miiii", 2.0)
    steps = longer.train_config(2.0, Path("x"), 12, longer.compared_at("miiii", 2.0)).snapshot_steps
    assert 7 in steps and 7 not in plain.train_config(2.0, Path("x"), 12).snapshot_steps
    with pytest.raises(ValueError, match="baseline_epochs=13 must not exceed epochs=12"):
        replace(plain, baseline_epochs=13)


def test_a_models_interaction_share_is_the_one_its_snapshot_row_shows(results_tmp):
    run = mc.load_runs(mc.training_params(TINY, ("miiii",)))["miiii"]
    snapshots = mc.snapshot_models(run)
    table = mn.active_frequency_table(mn.neuron_grids(snapshots, 7), (1.0,)).set_index("epoch")
    for epoch, model in snapshots.items():
        assert mn.interaction_share(model, 7) == table.loc[epoch, "interaction share"]
    assert mn.interaction_share(run.result.model, 7) == table["interaction share"].iloc[-1]
