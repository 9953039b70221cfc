"""bf16 autocast (TrainConfig.bf16): what it changes and where the accuracy target still holds."""

import torch

from rt_lib.model import TransformerConfig, build_model, fast_paths, miiii_config
from rt_lib.tasks.modular import modular_addition
from rt_lib.training.train import TrainConfig, make_optimizer, train, train_step


def test_bf16_forward_is_fp32_up_to_bf16_rounding_and_the_loss_stays_fp32():
    task = modular_addition(23, 0.9, 0)
    model = build_model(TransformerConfig(d_vocab=23, n_ctx=2, d_model=64, n_heads=4), 0)
    x, y = task.get_batch(0, None, 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = fast_paths.last_logits(model, x)
    assert low.dtype == torch.bfloat16
    high = fast_paths.last_logits(model, x)
    # bf16 keeps 8 bits of mantissa: relative error ~ 2^-8 per op, a few ops deep
    assert (low.float() - high).abs().max() < 0.05 * high.abs().max()
    assert not torch.equal(low.float(), high)  # autocast really ran in bf16
    recipe = dict(steps=1, batch_size=None, lr=1e-3, weight_decay=1e-3, warmup_steps=0)
    opt = make_optimizer(model, TrainConfig(**recipe))
    loss = train_step(model, task, opt, x, y, TrainConfig(**recipe, bf16=True, progress=False))
    assert loss.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())  # weights stay fp32


def test_bf16_training_reaches_the_fp32_accuracy_on_modular_addition():
    # p = 23, fully trained width 64, 300 full-batch steps: fp32 reaches 0.96 test accuracy,
    # bf16 0.94 (measured).  Where bf16 does not hold (the random transformer of the CPU profile
    # of notebook 01: 0.38 against 1.00) it stays off; see benchmarks/README.md.
    task = modular_addition(23, 0.9, 0)
    cfg = TransformerConfig(d_vocab=23, n_ctx=2, d_model=64, n_heads=4)
    accs = {}
    for bf16 in (False, True):
        tcfg = TrainConfig(steps=300, batch_size=None, lr=1e-2, weight_decay=1e-3, warmup_steps=20,
                           eval_every=300,
                           threads=1, progress=False, bf16=bf16, seed=1)
        accs[bf16] = train(build_model(cfg, 0), task, tcfg).final("test_acc")
    assert accs[False] >= 0.9 and accs[True] >= 0.9, accs


def test_bf16_miiii_logits_keep_the_masked_classes_masked():
    model = build_model(miiii_config(11, d_model=32, n_heads=4, dropout=0.0), 0)
    x = torch.tensor([[3, 4, 11], [10, 0, 11]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(x, last_only=True)
    for i, q in enumerate(model.cfg.out_sizes):
        assert torch.isinf(logits[:, i, q:]).all() and torch.isfinite(logits[:, i, :q]).all()
