import math

import pytest
import torch

from rt_lib.model import LSTMConfig, TransformerConfig, build_model
from rt_lib.tasks import modular_addition
from rt_lib.training.train import (
    TrainConfig,
    eval_due,
    log_spaced_steps,
    lr_lambda,
    make_optimizer,
    param_groups,
    prepare,
    train,
    train_step,
)


def tiny_task():
    return modular_addition(7, train_fraction=0.8, split_seed=0)


def tiny_model(trainable="all", seed=0):
    return build_model(TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_heads=4,
                                         trainable=trainable), seed)


#: a recipe for the tiny runs here (TrainConfig has no recipe of its own: each notebook's is)
RECIPE = dict(steps=6, batch_size=8, lr=1e-3, weight_decay=1e-3, warmup_steps=2)


def quick(**kw):
    base = RECIPE | dict(eval_every=3, progress=False, threads=1)
    base.update(kw)
    return TrainConfig(**base)


def test_dropout_is_seeded_per_run_and_resumes_exactly(tmp_path):
    def dropout_model(seed=0):
        return build_model(TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_heads=4,
                                             dropout=0.3), seed)

    ref = train(dropout_model(), tiny_task(), quick(steps=8, eval_every=2, seed=4))
    torch.rand(1000)  # whatever ran before must not change a run's dropout masks
    again = train(dropout_model(), tiny_task(), quick(steps=8, eval_every=2, seed=4))
    other = train(dropout_model(), tiny_task(), quick(steps=8, eval_every=2, seed=5))
    cols = [c for c in ref.history.columns if c != "time_s"]
    assert again.history[cols].equals(ref.history[cols])
    assert not other.history["train_loss"].equals(ref.history["train_loss"])
    state = torch.get_rng_state()
    ckpt = str(tmp_path / "run.pt")
    train(dropout_model(), tiny_task(), quick(steps=8, eval_every=2, seed=4, checkpoint_path=ckpt,
                                              stop_metric="step", stop_value=4))
    assert torch.equal(torch.get_rng_state(), state)  # the caller's generator is left alone
    resumed = train(dropout_model(seed=9), tiny_task(),
                    quick(steps=8, eval_every=2, seed=4, checkpoint_path=ckpt, resume=True))
    assert resumed.history[cols].equals(ref.history[cols])


@pytest.mark.parametrize(
    "trainable, expected",
    [
        ("all", None),
        ("embeddings", {"W_E", "W_pos", "W_U"}),
        ("unembed", {"W_U"}),
        ("embed", {"W_E", "W_pos"}),
        ("token_unembed", {"W_E", "W_U"}),
    ],
)
def test_one_step_changes_exactly_the_named_parameters(trainable, expected):
    model = tiny_model(trainable)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    # LayerNorm gains start at exactly 1 and biases at 0; weight decay alone would not move them,
    # but a gradient step does, so "all" must change every tensor.
    train(model, tiny_task(), quick(steps=1, eval_every=1, lr=1e-2, warmup_steps=0))
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    everything = set(before)
    assert changed == (everything if expected is None else expected)
    for n in everything - changed:
        assert torch.equal(dict(model.named_parameters())[n], before[n])  # bit-identical


def test_lstm_random_trains_only_embedding_and_readout():
    model = build_model(LSTMConfig(d_vocab=7, d_model=8, trainable="embeddings"), 0)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    train(model, tiny_task(), quick(steps=1, eval_every=1, warmup_steps=0))
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed == {"W_E", "W_U", "b_U"}


def test_same_seed_gives_identical_history():
    a = train(tiny_model(seed=3), tiny_task(), quick(seed=11)).history
    b = train(tiny_model(seed=3), tiny_task(), quick(seed=11)).history
    cols = [c for c in a.columns if c != "time_s"]
    assert a[cols].equals(b[cols])
    c = train(tiny_model(seed=3), tiny_task(), quick(seed=12)).history
    assert not a[cols].equals(c[cols])


def test_history_columns_and_eval_steps():
    hist = train(tiny_model(), tiny_task(), quick(steps=7, eval_every=3)).history
    assert hist["step"].tolist() == [3, 6, 7]
    for col in ("lr", "train_loss", "train_acc", "test_acc", "test_loss", "time_s"):
        assert col in hist


def test_eval_last_adds_the_final_steps_and_leaves_training_alone():
    plain = train(tiny_model(), tiny_task(), quick(steps=7, eval_every=3))
    dense = train(tiny_model(), tiny_task(), quick(steps=7, eval_every=3, eval_last=3))
    assert dense.history["step"].tolist() == [3, 5, 6, 7]
    # evaluating more often changes no weight
    for (name, a), b in zip(plain.model.state_dict().items(), dense.model.state_dict().values()):
        assert torch.equal(a, b), name
    with pytest.raises(ValueError, match="eval_last"):
        quick(steps=7, eval_last=8)


def test_accuracy_matches_an_independent_count():
    task, model = tiny_task(), tiny_model()
    res = train(model, task, quick(steps=3))
    x, y = task.test
    with torch.no_grad():
        expected = (model(x)[:, -1].argmax(-1) == y).float().mean().item()
    assert res.final("test_acc") == pytest.approx(expected)


def test_warmup_then_cosine_to_zero():
    cfg = quick(steps=110, warmup_steps=10)
    f = lr_lambda(cfg)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.5)
    assert f(110) == pytest.approx(0.0, abs=1e-12)
    assert f(35) == pytest.approx(0.5 * (1 + math.cos(math.pi * 25 / 100)))


def test_no_weight_decay_on_vectors():
    opt = make_optimizer(tiny_model(), quick(weight_decay=0.5))
    for group in opt.param_groups:
        assert all(p.ndim >= 2 for p in group["params"]) == (group["weight_decay"] == 0.5)


def test_param_groups_of_stacked_restarts_decay_the_same_tensors():
    # batched restarts stack seeds on a leading axis: matrices then have >= 3 axes
    model = tiny_model()  # matrices, and vectors (biases, LayerNorm)
    stacked = [torch.stack([p, p]).detach().requires_grad_(p.requires_grad)
               for p in model.parameters()]
    plain = param_groups(model.parameters(), 0.5)
    batched = param_groups(stacked, 0.5, matrix_ndim=3)
    assert [g["weight_decay"] for g in plain] == [g["weight_decay"] for g in batched] == [0.5, 0.0]
    for a, b in zip(plain, batched):
        assert [p.shape for p in a["params"]] == [p.shape[1:] for p in b["params"]]
    with pytest.raises(ValueError, match="no trainable parameters"):
        param_groups([torch.zeros(2, 2)], 0.5)


def test_evaluation_schedule_is_one_rule():
    due = eval_due(quick(steps=10, eval_every=4))
    assert [s for s in range(1, 11) if due(s)] == [4, 8, 10]  # and always the last step
    due = eval_due(quick(steps=20, eval_log_points=3))
    assert [s for s in range(1, 21) if due(s)] == log_spaced_steps(20, 3) == [1, 4, 20]


def test_resume_from_checkpoint_matches_uninterrupted_run(tmp_path):
    ref = train(tiny_model(), tiny_task(), quick(steps=8, eval_every=2, seed=4))
    ckpt = str(tmp_path / "run.pt")
    # "Interrupt" after step 4: stop early on a condition met there; a checkpoint is saved.
    cut = train(tiny_model(), tiny_task(), quick(steps=8, eval_every=2, seed=4,
                                                  checkpoint_path=ckpt, stop_metric="step",
                                                  stop_value=4))
    assert cut.steps_done == 4 and torch.load(ckpt, weights_only=False)["step"] == 4
    # Resume into a differently initialised model: the checkpoint must overwrite everything.
    resumed = train(tiny_model(seed=99), tiny_task(), quick(steps=8, eval_every=2, seed=4,
                                                             checkpoint_path=ckpt, resume=True))
    cols = [c for c in ref.history.columns if c != "time_s"]
    assert resumed.history[cols].equals(ref.history[cols])
    for a, b in zip(resumed.model.parameters(), ref.model.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(steps=0), "steps must be a positive integer"),
        (dict(lr=0.0), "lr must be positive"),
        (dict(batch_size=0), "batch_size"),
        (dict(schedule="linear"), "schedule='linear'"),
        (dict(device="tpu"), "device='tpu'"),
    ],
)
def test_bad_train_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        quick(**kwargs)


@pytest.mark.parametrize("missing", sorted(RECIPE))
def test_a_recipe_without_one_of_its_values_is_refused_naming_it(missing):
    """The recipe's one home is the notebook's parameters: TrainConfig takes no default for it."""
    with pytest.raises(TypeError, match=missing):
        TrainConfig(**{k: v for k, v in RECIPE.items() if k != missing})


def test_unknown_stop_metric_is_reported():
    with pytest.raises(KeyError, match="stop_metric='test_accuracy'"):
        train(tiny_model(), tiny_task(), quick(stop_metric="test_accuracy"))


def test_two_threads_are_still_bit_for_bit_repeatable():
    # With two threads the embedding backward accumulates in parallel; deterministic kernels
    # (TrainConfig.deterministic, the default) must make two runs identical anyway.
    # (Sizes where deterministic=False was seen to differ in the last bits on a 2-core machine.)
    task = modular_addition(59, 0.95, 0)
    weights = []
    for _ in range(2):
        model = build_model(TransformerConfig(d_vocab=59, n_ctx=2, d_model=128, n_heads=4,
                                              trainable="embeddings"), 0)
        train(model, task, quick(steps=15, batch_size=None, threads=2, lr=3e-3, eval_every=15))
        weights.append(model.W_E.detach().clone())
    assert torch.equal(*weights)


def test_log_spaced_steps_cover_every_decade():
    assert log_spaced_steps(1000, 4) == [1, 10, 100, 1000]
    assert log_spaced_steps(5, 20) == [1, 2, 3, 4, 5]  # never more steps than there are


def test_log_spaced_evaluation_and_kept_snapshots(tmp_path):
    model = tiny_model()
    res = train(model, tiny_task(), quick(steps=20, eval_log_points=3, snapshot_steps=(2, 20),
                                          snapshot_dir=str(tmp_path)))
    assert res.history["step"].tolist() == [1, 4, 20]  # logspace(0, log10 20, 3) rounded
    assert sorted(p.name for p in tmp_path.glob("*.pt")) == ["step_2.pt", "step_20.pt"]
    last = torch.load(tmp_path / "step_20.pt")
    assert last["step"] == 20 and torch.equal(last["state_dict"]["W_E"], model.W_E.detach())
    early = torch.load(tmp_path / "step_2.pt")["state_dict"]["W_E"]
    assert not torch.equal(early, model.W_E.detach())
    with pytest.raises(ValueError, match="snapshot_dir"):
        quick(snapshot_steps=(5,))



@pytest.mark.parametrize("which", ["miiii tables, batch dropout", "miiii gpt2 dropout", "modular"])
def test_a_deterministic_step_never_reads_uninitialised_memory(which):
    """prepare() turns off deterministic mode's NaN fill of new tensors: a training step gives
    the same bits with the fill on, where a read of unwritten memory would show as a NaN."""
    from rt_lib.model import miiii_config
    from rt_lib.tasks.miiii import miiii_task
    from rt_lib.training.grokfast import Grokfast

    if which == "modular":
        task, model_cfg, grokfast = tiny_task(), tiny_model().cfg, False
    else:
        task = miiii_task(13, "miiii", split="code", train_fraction=0.5)
        kw = {} if which.startswith("miiii tables") else {"dropout_at": "gpt2", "dropout_mask": "sample"}
        model_cfg = miiii_config(13, d_model=32, n_heads=4, dropout=0.1, **kw)
        grokfast = True
    cfg = TrainConfig(**RECIPE | {"batch_size": None if grokfast else 8}, progress=False,
                      deterministic=True, seed=1)

    def steps(fill: bool) -> list[torch.Tensor]:
        prepare(cfg, torch.device("cpu"))
        assert torch.utils.deterministic.fill_uninitialized_memory is False
        torch.utils.deterministic.fill_uninitialized_memory = fill
        torch.manual_seed(0)
        model = build_model(model_cfg, 0)
        hook = Grokfast(0.98, 2.0, "zero") if grokfast else None  # its EMA is state: one per run
        optimizer = make_optimizer(model, cfg)
        x, y = task.get_batch(0, cfg.batch_size, 1)
        for step in range(cfg.steps):
            train_step(model, task, optimizer, x, y, cfg, hook, step)
        return [p.detach().clone() for p in model.parameters()]

    try:
        with_fill, without = steps(True), steps(False)
    finally:
        torch.utils.deterministic.fill_uninitialized_memory = True
        torch.use_deterministic_algorithms(False)
    assert all(torch.equal(a, b) for a, b in zip(with_fill, without, strict=True))
    assert all(torch.isfinite(a).all() for a in with_fill)


def test_a_repeated_batch_goes_to_the_device_once():
    # meta stands in for a GPU: a tensor moved there is a new tensor, as on CUDA
    from rt_lib.training.train import DeviceBatches

    move = DeviceBatches(torch.device("meta"))
    x, y = torch.zeros(4, 3), torch.ones(4)
    first = move(x, y)
    assert all(t.device.type == "meta" for t in first)
    again = move(x, y)  # the full batch of the next step: the same tensors
    assert all(a is b for a, b in zip(first, again))
    other = move(x.clone(), y)  # a new batch (a minibatch's next rows) is moved again
    assert other[0] is not first[0] and other[0].device.type == "meta"
    on_cpu = DeviceBatches(torch.device("cpu"))
    assert on_cpu(x, y)[0] is x  # nothing copied where the batch already is


@pytest.mark.parametrize("init", ["grad", "zero"])
def test_grokfast_filters_every_parameter_as_its_own_loop(init):
    # several parameters, one without a gradient at first: each filtered as the paper's
    # formula says for it alone, e <- a e + (1 - a) g, g <- g + lamb e (from its first gradient)
    from rt_lib.training.grokfast import Grokfast

    model = torch.nn.Module()
    model.a, model.b = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2, 2))
    hook, alpha, lamb = Grokfast(alpha=0.9, lamb=1.5, init=init), 0.9, 1.5
    g = torch.Generator().manual_seed(0)
    ema: dict[str, torch.Tensor] = {}
    for step in range(4):
        grads = {"a": torch.randn(3, generator=g), "b": torch.randn(2, 2, generator=g)}
        if step == 0:
            grads.pop("b")  # b's first gradient comes at step 1
        model.a.grad = grads["a"].clone()
        model.b.grad = grads["b"].clone() if "b" in grads else None
        hook(model, step)
        for name, grad in grads.items():
            if name not in ema:
                ema[name] = grad.clone() if init == "grad" else (1 - alpha) * grad
            else:
                ema[name] = alpha * ema[name] + (1 - alpha) * grad
            got = getattr(model, name).grad
            assert torch.allclose(got, grad + lamb * ema[name], atol=1e-6), (step, name)
        if step == 0:
            assert model.b.grad is None and "b" not in hook.ema
