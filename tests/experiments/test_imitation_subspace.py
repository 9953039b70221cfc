"""Circuit imitation (notebook 10) and the subspace statistic's model sources (notebook 09)."""

import math

import pytest
import torch
import torch.nn.functional as F

from rt_lib.experiments.circuit_imitation import ImitationParams, run
from rt_lib.experiments.common import run_task_grid
from rt_lib.experiments.modular_addition import ModularAdditionParams
from rt_lib.experiments.subspace import SubspaceParams, checkpoints, common_width, load_or_train, subspace_rows
from rt_lib.model import TransformerConfig, build_model
from rt_lib.runtime.io import atomic_save_torch, results_dir
from rt_lib.tasks.imitation import CircuitImitation, imitation_target, kl_divergence


def test_kl_matches_torch():
    gen = torch.Generator().manual_seed(0)
    target = F.log_softmax(torch.randn(6, 9, generator=gen), -1)
    logits = torch.randn(6, 9, generator=gen)
    expected = F.kl_div(F.log_softmax(logits, -1), target, log_target=True, reduction="none").sum(-1)
    assert torch.allclose(kl_divergence(target, logits), expected, atol=1e-6)
    assert torch.allclose(kl_divergence(target, target), torch.zeros(6), atol=1e-6)


def test_target_carries_the_authors_scalings():
    target = imitation_target(32, d_vocab=20, n_ctx=6, n_layers=2, n_heads=2, seed=3)
    plain = build_model(TransformerConfig(d_vocab=20, n_ctx=6, d_model=32, n_layers=2, n_heads=2), 3)
    assert torch.allclose(target.blocks[1].attn.W_K, 10 * plain.blocks[1].attn.W_K)
    assert torch.allclose(target.blocks[0].mlp.W_out, 20 * plain.blocks[0].mlp.W_out)
    assert torch.allclose(target.W_U, plain.W_U * 100 / math.sqrt(32))
    assert torch.equal(target.W_E, plain.W_E)
    assert not any(p.requires_grad for p in target.parameters())


def test_imitation_targets_depend_on_the_input_and_the_blind_baseline_is_best_constant():
    task = CircuitImitation(imitation_target(16, d_vocab=12, n_ctx=5, seed=0), n_test=200)
    tokens, logp = task.test
    assert torch.allclose(logp.exp().sum(-1), torch.ones(200), atol=1e-5)
    assert torch.allclose(task.target_logprobs(tokens[:3]), logp[:3])
    assert (logp[0] - logp[1]).abs().max() > 0.1  # different inputs, different distributions
    base = task.baseline_kl()
    assert base > 0
    for const in (torch.zeros(12), torch.randn(12, generator=torch.Generator().manual_seed(1))):
        assert kl_divergence(logp, const.expand(200, 12)).mean() >= base  # no constant beats it
    x, y = task.get_batch(0, 32, seed=0)
    assert torch.allclose(task.target_logprobs(x), y)  # the stream's targets are the target's


def test_imitation_parameters_are_checked():
    with pytest.raises(ValueError, match="target_widths"):
        ImitationParams(target_widths=[8, 0])
    with pytest.raises(ValueError, match="not divisible by target_heads"):
        ImitationParams(target_widths=[9])
    with pytest.raises(ValueError, match="batch_size"):
        ImitationParams(batch_size=None)


def test_imitation_keeps_each_runs_curve_and_each_kind_trains_at_its_own_lr(results_tmp):
    params = ImitationParams(models=("random transformer", "trained transformer"), widths=(8,),
                             n_layers=1, n_heads=2, target_widths=(4, 8), target_layers=1,
                             d_vocab=6, n_ctx=3, n_test=16, steps=4, batch_size=8,
                             warmup_steps=1, eval_every=2, lr=1e-2, trained_lr=1e-3, threads=1)
    assert (params.lr_of("random transformer"), params.lr_of("trained transformer")) == (1e-2, 1e-3)
    assert params.lr_of("trained LSTM") == params.lstm_lr
    result = run(params)
    keys = set(zip(result.metrics["target_width"], result.metrics["model"],
                   result.metrics["imitator_width"], result.metrics["restart"]))
    assert set(result.histories) == keys and len(keys) == 4
    for (tw, kind, _width, _restart), h in result.histories.items():
        row = result.metrics[(result.metrics["target_width"] == tw) & (result.metrics["model"] == kind)]
        assert list(h["step"]) == [2, 4]
        assert h["test_kl"].iloc[-1] == pytest.approx(float(row["test_kl"].iloc[0]))
        assert torch.allclose(torch.tensor(h["kl_ratio"].values),
                              torch.tensor((h["test_kl"] / row["baseline_kl"].iloc[0]).values))


def test_checkpoints_are_compared_at_the_widest_width_both_kinds_saved(results_tmp):
    folder = results_dir("01_modular_addition") / "models"
    for kind, width, meta in (("random", 64, {"params": 1}), ("random", 128, {"params": 1}),
                              ("random", 256, {"params": 1}), ("random", 512, {}),
                              ("trained", 64, {"params": 1}), ("trained", 128, {"params": 1})):
        atomic_save_torch({"state_dict": {}, **meta}, folder / f"{kind}_transformer_d{width}_r0.pt")
    atomic_save_torch({"params": 1}, folder / "trained_transformer_d256_r1.pt")  # restart 1 alone
    atomic_save_torch({"params": 1}, folder / "random_transformer_d128_r2.pt")
    # d512 cannot rebuild its task (no params); every restart saved at a width is listed
    assert checkpoints("01_modular_addition", "random transformer") == {
        64: {0: folder / "random_transformer_d64_r0.pt"},
        128: {0: folder / "random_transformer_d128_r0.pt", 2: folder / "random_transformer_d128_r2.pt"},
        256: {0: folder / "random_transformer_d256_r0.pt"}}
    assert list(checkpoints("01_modular_addition", "trained transformer")[256]) == [1]
    both = ("random transformer", "trained transformer")
    assert common_width("01_modular_addition", both) == 256  # trained's restart 1 counts
    (folder / "trained_transformer_d256_r1.pt").unlink()
    assert common_width("01_modular_addition", both) == 128  # not random's 256
    assert common_width("01_modular_addition", ("random transformer",)) == 256
    assert common_width("01_modular_addition", both + ("trained LSTM",)) == 128  # no LSTM saved
    assert common_width("02_needle_in_a_haystack", both) is None


def test_subspace_reads_every_saved_restart_with_its_task(results_tmp):
    params = ModularAdditionParams(p=11, models=("random transformer",), widths=(8,), steps=3,
                                   restarts=2, n_heads=2, eval_every=3, threads=1)
    grid = run_task_grid("01_modular_addition", params)
    task = grid.task
    loaded = load_or_train("modular addition", "random transformer", SubspaceParams())
    assert [(restart, source) for restart, _, _, source in loaded] == [
        (r, f"01_modular_addition/models/random_transformer_d8_r{r}.pt") for r in (0, 1)]
    for restart, model, rebuilt, _ in loaded:
        trained = grid.models[("random transformer", 8, restart)]
        assert torch.equal(model.W_E, trained.W_E) and torch.equal(rebuilt.test[0], task.test[0])
    assert not torch.equal(loaded[0][1].W_E, loaded[1][1].W_E)  # two models, not one twice
    _, model, rebuilt, _ = loaded[0]
    rows = subspace_rows(model, rebuilt, k=3, max_states=5, seed=0)
    assert [r["layer"] for r in rows] == ["layer 1", "layer 2"]
    assert all(r["n_states"] == 5 and r["d_model"] == 8 and r["pcs"] >= r["neurons"] for r in rows)


def test_subspace_parameters_are_checked():
    with pytest.raises(ValueError, match="tasks"):
        SubspaceParams(tasks=["sorting"])
    with pytest.raises(ValueError, match="models"):
        SubspaceParams(models=["trained LSTM"])
