"""Restarts trained as one batched model equal the same restarts trained one by one."""

from dataclasses import replace

import pytest
import torch

from rt_lib.model import LSTMConfig, TransformerConfig, build_model
from rt_lib.model.fast_paths import last_logits, shared_prefixes
from rt_lib.tasks.modular import modular_addition
from rt_lib.training.batched import can_batch, train_batched
from rt_lib.training.train import TrainConfig, train


def configs(seeds, **kw):
    base = dict(steps=12, batch_size=None, lr=3e-3, weight_decay=1e-3, warmup_steps=3, eval_every=4,
                threads=1,
                progress=False)
    base.update(kw)
    return [TrainConfig(seed=s, **base) for s in seeds]


def model_cfg(task, trainable="embeddings"):
    return TransformerConfig(d_vocab=task.d_vocab, n_ctx=3, d_model=16, n_heads=2,
                             d_vocab_out=task.d_vocab_out, trainable=trainable)


@pytest.mark.parametrize("trainable,batch_size,clip", [("embeddings", None, 1.0), ("all", None, 0.05),
                                                       ("all", 16, None)])
def test_batched_restarts_match_separate_runs(trainable, batch_size, clip):
    task = modular_addition(7, train_fraction=0.6)
    cfg = model_cfg(task, trainable)
    cfgs = configs([1, 2, 3], batch_size=batch_size, grad_clip=clip)  # 0.05: clipping acts
    together = train_batched([build_model(cfg, 10 + i) for i in range(3)], task, cfgs)
    for i, tcfg in enumerate(cfgs):
        alone = train(build_model(cfg, 10 + i), task, tcfg)
        cols = [c for c in alone.history.columns if c != "time_s"]
        a, b = together[i].history[cols], alone.history[cols]
        torch.testing.assert_close(torch.tensor(a.to_numpy()), torch.tensor(b.to_numpy()),
                                   rtol=1e-4, atol=1e-5)
        for (name, p), q in zip(together[i].model.named_parameters(), alone.model.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
    # the seeds really differ
    assert not torch.equal(together[0].model.W_E, together[1].model.W_E)


def test_batched_refuses_what_it_cannot_batch():
    task = modular_addition(7, train_fraction=0.6)
    cfg = model_cfg(task)
    models = [build_model(cfg, 0), build_model(cfg, 1)]
    with pytest.raises(ValueError, match="seed only"):
        train_batched(models, task, configs([1]) + configs([2], lr=1e-2))
    with pytest.raises(ValueError, match="checkpoints"):
        train_batched(models, task, configs([1, 2], checkpoint_path="x.pt"))
    with pytest.raises(ValueError, match="one TrainConfig per model"):
        train_batched(models, task, configs([1]))
    dropped = replace(cfg, dropout=0.1)
    with pytest.raises(ValueError, match="dropout"):
        train_batched([build_model(dropped, 0), build_model(dropped, 1)], task, configs([1, 2]))
    lstm = LSTMConfig(d_vocab=task.d_vocab, d_model=16, d_vocab_out=task.d_vocab_out)
    with pytest.raises(ValueError, match="transformers only"):
        train_batched([build_model(lstm, 0), build_model(lstm, 1)], task, configs([1, 2]))
    # what train_grid asks before it batches: the same conditions
    assert can_batch(cfg, configs([1])[0]) and not can_batch(dropped, configs([1])[0])
    assert not can_batch(lstm, configs([1])[0])


def test_vocab_prefixes_equal_the_full_forward():
    # the vmap-able prefix sharing (every one-token prefix once) against the plain forward
    task = modular_addition(7, train_fraction=0.6)
    model = build_model(TransformerConfig(d_vocab=7, n_ctx=2, d_model=16, n_heads=2), 0,
                        last_position="vocab")
    x, _ = task.get_batch(0, 20, 0)
    assert shared_prefixes(model, x) is not None  # the path is taken
    torch.testing.assert_close(last_logits(model, x), model(x)[:, -1], rtol=1e-5, atol=1e-6)


def test_train_grid_batches_restarts_with_the_same_results():
    from rt_lib.experiments.common import train_grid
    from rt_lib.experiments.modular_addition import ModularAdditionParams

    kinds = ("random transformer", "trained LSTM")  # the LSTM cannot batch: trained one by one
    params = ModularAdditionParams(p=7, train_fraction=0.6, models=kinds, widths=(16,), restarts=3,
                                   n_heads=2, seed=4, steps=10, batch_size=16, lr=3e-3,
                                   lstm_lr=3e-3, lstm_steps=None, warmup_steps=2, eval_every=5,
                                   threads=1)
    task = params.task()
    together = train_grid(task, replace(params, batch_restarts=True))
    apart = train_grid(task, replace(params, batch_restarts=False))
    cols = ["seed", "train_loss", "test_acc", "train_acc", "steps"]
    a, b = together.metrics[cols], apart.metrics[cols]
    torch.testing.assert_close(torch.tensor(a.to_numpy()), torch.tensor(b.to_numpy()),
                               rtol=1e-4, atol=1e-5)
    assert together.metrics["seed"].nunique() == 3


def test_batched_long_sequences_match_separate_runs():
    # > SHORT_SEQ positions: the fused attention kernel alone, plain matmuls batched
    from rt_lib.experiments.parentheses import ParenthesesParams

    task = ParenthesesParams(min_pairs=5, max_pairs=6, n_test=40).task()
    assert task.n_ctx > 8
    cfg = TransformerConfig(d_vocab=task.d_vocab, n_ctx=task.n_ctx, d_model=16, n_heads=2,
                            d_vocab_out=task.d_vocab_out, trainable="embeddings")
    cfgs = configs([5, 6], batch_size=8, steps=6, eval_every=3)
    together = train_batched([build_model(cfg, i) for i in range(2)], task, cfgs)
    for i, tcfg in enumerate(cfgs):
        alone = train(build_model(cfg, i), task, tcfg)
        cols = [c for c in alone.history.columns if c != "time_s"]
        torch.testing.assert_close(torch.tensor(together[i].history[cols].to_numpy()),
                                   torch.tensor(alone.history[cols].to_numpy()), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("readout", ["padded", "compact"])
def test_batched_miiii_runs_match_separate_runs(readout):
    """miiii's model (one output head per prime; its non-persistent output masks are no state to
    copy back) without dropout: stacked runs equal the same runs one by one, under either
    readout of the loss (the compact one's logits come out of vmap as [seeds, b, sum q])."""
    from rt_lib.model import miiii_config
    from rt_lib.tasks.miiii import miiii_task

    task = miiii_task(7, readout=readout)
    cfg = miiii_config(7, d_model=16, n_heads=2, dropout=0.0, out_sizes=task.qs)
    cfgs = configs([1, 2])
    assert can_batch(cfg, cfgs[0])
    together = train_batched([build_model(cfg, 20 + i) for i in range(2)], task, cfgs)
    for i, tcfg in enumerate(cfgs):
        alone = train(build_model(cfg, 20 + i), task, tcfg)
        for (name, p), q in zip(together[i].model.named_parameters(), alone.model.parameters()):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5, msg=name)
        cols = [c for c in alone.history.columns if c != "time_s"]  # every head's accuracy
        torch.testing.assert_close(torch.tensor(together[i].history[cols].to_numpy()),
                                   torch.tensor(alone.history[cols].to_numpy()),
                                   rtol=1e-4, atol=1e-5)


class Cut(Exception):
    """A run stopped from outside (pytest takes a KeyboardInterrupt as its own)."""


def _stacked(task, cfg, cfgs, **kw):
    return train_batched([build_model(cfg, 30 + i) for i in range(len(cfgs))], task, cfgs, **kw)


def _same(a, b):
    """Bit for bit: every seed's weights and history (its wall times aside)."""
    for x, y in zip(a, b):
        for (name, p), q in zip(x.model.named_parameters(), y.model.parameters()):
            assert torch.equal(p, q), name
        cols = [c for c in x.history.columns if c != "time_s"]
        assert x.history[cols].equals(y.history[cols])


def test_a_stacked_run_cut_short_resumes_to_the_uncut_result(tmp_path, monkeypatch):
    """Cut after its checkpoint at step 6 (an error at step 8, as a killed job), then run again: it
    goes on from step 6 (the AdamW moments, the schedule and the histories restored) and ends
    with the uncut run's weights and histories bit for bit; checkpoints change no number."""
    from rt_lib.jobs.resume import where_runs_stand
    from rt_lib.training.batched import BatchedRestarts

    task = modular_addition(7, train_fraction=0.6)
    cfg, cfgs = model_cfg(task, "all"), configs([1, 2, 3], batch_size=16)
    uncut = _stacked(task, cfg, cfgs)
    ckpt = tmp_path / "resume" / "grid_x3.pt"
    step = BatchedRestarts.step
    seen, cuts = [], [8]  # cut once, at step 8

    def cut(self, i):
        seen.append(i)
        if cuts and i == cuts[0]:
            cuts.pop()
            raise Cut
        return step(self, i)

    monkeypatch.setattr(BatchedRestarts, "step", cut)
    with pytest.raises(Cut):
        _stacked(task, cfg, cfgs, checkpoint_path=ckpt, checkpoint_every=3)
    stands = where_runs_stand(tmp_path)  # one line per seed, as a cut GPU job's log lists them
    assert [(r["step"], r["finished"]) for r in stands] == [(6, False)] * 3
    assert [r["run"] for r in stands] == [f"resume/grid_x3.pt seed {s}" for s in (1, 2, 3)]
    seen.clear()
    resumed = _stacked(task, cfg, cfgs, checkpoint_path=ckpt, checkpoint_every=3)
    assert seen == list(range(6, 12))  # from the checkpoint, not from step 0
    _same(resumed, uncut)
    # finished: loaded as it is, no step trained, the file left byte for byte
    before = ckpt.read_bytes()
    seen.clear()
    again = _stacked(task, cfg, cfgs, checkpoint_path=ckpt, checkpoint_every=3)
    assert seen == [] and ckpt.read_bytes() == before
    _same(again, uncut)


def test_a_stacked_checkpoint_of_other_settings_is_not_resumed(tmp_path):
    task = modular_addition(7, train_fraction=0.6)
    cfg = model_cfg(task)
    ckpt = tmp_path / "x.pt"
    _stacked(task, cfg, configs([1, 2]), checkpoint_path=ckpt, checkpoint_every=4)
    other = configs([1, 2], lr=1e-2)
    with pytest.warns(UserWarning, match="other settings"):
        got = _stacked(task, cfg, other, checkpoint_path=ckpt, checkpoint_every=4)
    _same(got, _stacked(task, cfg, other))  # trained from step 0 with its own lr


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (the GPU rung)")
def test_stacked_restarts_on_cuda_match_separate_runs_there():
    task = modular_addition(7, train_fraction=0.6)
    cfg = model_cfg(task, "all")
    cfgs = configs([1, 2, 3], batch_size=16, device="cuda")
    together = _stacked(task, cfg, cfgs)
    for i, tcfg in enumerate(cfgs):
        alone = train(build_model(cfg, 30 + i), task, tcfg)
        for (name, p), q in zip(together[i].model.named_parameters(), alone.model.parameters()):
            torch.testing.assert_close(p.cpu(), q.cpu(), rtol=1e-4, atol=1e-5, msg=name)
