import pytest

from rt_lib.experiments.modular_addition import ModularAdditionParams, run
from rt_lib.experiments.reporting import claim_check, results_table


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(p=1), "p must be an integer >= 2"),
        (dict(widths=[30], n_heads=4), "width 30 is not divisible by n_heads=4"),
        (dict(models=["random transformer", "random GRU"]), "models=.*random GRU"),
        (dict(widths=[]), "widths"),
        (dict(restarts=0), "restarts"),
        (dict(steps=-5), "steps must be a positive integer"),
        (dict(lr=-1.0), "lr must be positive"),
        (dict(device="tpu"), "device='tpu'"),
    ],
)
def test_bad_parameters_raise_before_any_work(kwargs, match, results_tmp):
    with pytest.raises(ValueError, match=match):
        ModularAdditionParams(**kwargs)
    assert not results_tmp.exists()


def test_tiny_run_writes_metrics_rows_per_model_and_restart(results_tmp):
    params = ModularAdditionParams(p=5, widths=(8,), restarts=2, steps=3, eval_every=3,
                                   warmup_steps=1)
    result = run(params)
    m = result.metrics
    assert len(m) == 3 * 2
    assert m.groupby("model")["seed"].nunique().eq(2).all()  # restarts differ in seed
    assert (m.groupby("restart")["seed"].nunique() == 1).all()  # same seed across models
    assert (results_tmp / "01_modular_addition" / "models").is_dir()
    table = results_table(m)
    assert list(table["restarts"]) == [2, 2, 2]
    claim = claim_check(m, "random transformer", 8, "test_acc", 0.0)
    assert claim.holds and "2 restart(s)" in str(claim)
    with pytest.raises(ValueError, match="no runs"):
        claim_check(m, "random transformer", 16, "test_acc", 0.5)
