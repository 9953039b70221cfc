"""Values that would train on without a word: infinite or NaN parameters and losses, a bad
RT_THREADS.  Each stops with an error that names what was wrong."""

import math

import pytest
import torch

from rt_lib.experiments.modular_addition import ModularAdditionParams
from rt_lib.experiments.tinystories import TinyStoriesParams
from rt_lib.model import TransformerConfig, build_model
from rt_lib.pipeline import runner
from rt_lib.runtime.context import env_threads
from rt_lib.runtime.seeding import set_threads
from rt_lib.tasks import modular_addition
from rt_lib.training.batched import train_batched
from rt_lib.training.train import NonFiniteLossError, TrainConfig, train


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("name", ["lr", "weight_decay", "trained_lr"])  # trained_lr: float | None
def test_a_non_finite_number_is_refused_naming_the_parameter(name, value):
    with pytest.raises(ValueError, match=f"^{name} must be a finite number"):
        ModularAdditionParams(**{name: value})


def test_every_notebooks_numbers_are_checked_alike(tmp_path):
    with pytest.raises(ValueError, match="valid_fraction must be a finite number"):
        TinyStoriesParams(data_path=str(tmp_path), valid_fraction=math.nan)


def test_run_all_refuses_yaml_infinity_and_nan_before_anything_runs(results_tmp, capsys):
    for setting, name in (("lr=.inf", "lr"), ("weight_decay=.nan", "weight_decay")):
        assert runner.main(["--only", "01", "--set", setting, "--jobs", "1"]) == 2
        err = capsys.readouterr().err
        assert f"01_modular_addition: {name} must be a finite number" in err
    assert not results_tmp.exists() or not any(results_tmp.iterdir())  # nothing written


def _task():
    return modular_addition(7, train_fraction=0.8, split_seed=0)


def _model(seed=0):
    task = _task()
    return build_model(TransformerConfig(d_vocab=task.d_vocab, n_ctx=task.n_ctx, d_model=16,
                                         n_heads=2, d_vocab_out=task.d_vocab_out), seed)


def _poison_at(step_index: int):
    """A gradient hook that turns W_E to NaN in the optimiser step of ``step_index``: the next
    step's loss is the first that is not finite."""
    def hook(model, step):
        if step == step_index:
            with torch.no_grad():
                model.W_E.fill_(math.nan)
    return hook


def test_non_finite_weights_are_never_saved_and_the_last_good_checkpoint_is_kept(tmp_path):
    ckpt = tmp_path / "run.pt"
    cfg = TrainConfig(steps=12, batch_size=8, lr=1e-3, weight_decay=1e-3, warmup_steps=1,
                      eval_every=6, checkpoint_every=2,
                      checkpoint_path=str(ckpt), progress=False, threads=1)
    with pytest.raises(NonFiniteLossError, match=r"^restart 3: the weights are not finite .* "
                                                 rf"after step 4 of 12 \(lr {cfg.lr:g}.*{ckpt}"):
        train(_model(), _task(), cfg, grad_hook=_poison_at(3), desc="restart 3")
    saved = torch.load(ckpt, weights_only=False)
    assert saved["step"] == 2  # the last step saved before the weights went bad
    assert all(torch.isfinite(p).all() for p in saved["model"].values())


def test_a_nan_loss_stops_the_run_naming_the_first_step_it_happened():
    cfg = TrainConfig(steps=12, batch_size=8, lr=1e-3, weight_decay=1e-3, warmup_steps=1,
                      eval_every=6, progress=False, threads=1)
    with pytest.raises(NonFiniteLossError, match=r"^restart 3: the training loss is not finite "
                                                 r".* at step 5 of 12"):
        train(_model(), _task(), cfg, grad_hook=_poison_at(3), desc="restart 3")


def test_a_finite_run_is_not_stopped():
    result = train(_model(), _task(), TrainConfig(steps=6, batch_size=8, lr=1e-3,
                                                  weight_decay=1e-3, warmup_steps=1,
                                                  eval_every=3, progress=False, threads=1))
    assert result.steps_done == 6 and result.history["train_loss"].map(math.isfinite).all()


def test_a_stacked_member_with_a_nan_loss_stops_the_stack_naming_its_seed():
    models = [_model(0), _model(1)]
    with torch.no_grad():
        models[1].W_U.fill_(math.nan)  # this member's very first loss is NaN
    cfgs = [TrainConfig(steps=4, batch_size=None, lr=1e-3, weight_decay=1e-3, warmup_steps=1,
                        eval_every=2, seed=s,
                        progress=False, threads=1) for s in (5, 6)]
    with pytest.raises(NonFiniteLossError, match=r"seed 6 of 2 stacked: .* at step 1 of 4"):
        train_batched(models, _task(), cfgs)


@pytest.mark.parametrize("raw", ["abc", "0", "-2", "1.5"])
def test_a_bad_rt_threads_is_named(raw, monkeypatch, capsys, results_tmp):
    monkeypatch.setenv("RT_THREADS", raw)
    with pytest.raises(ValueError, match=f"RT_THREADS must be a positive integer .*got '{raw}'"):
        env_threads()
    with pytest.raises(ValueError, match="RT_THREADS"):
        set_threads()
    assert runner.main(["--only", "01", "--jobs", "1"]) == 2
    assert "RT_THREADS must be a positive integer" in capsys.readouterr().err
    assert not results_tmp.exists() or not any(results_tmp.iterdir())


def test_rt_threads_unset_or_blank_is_one_thread(monkeypatch):
    monkeypatch.delenv("RT_THREADS", raising=False)
    assert env_threads() == 1
    monkeypatch.setenv("RT_THREADS", " 2 ")
    assert env_threads() == 2
