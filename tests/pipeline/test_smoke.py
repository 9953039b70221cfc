"""The paper profile's smoke test (./run_all.sh --profile paper --smoke) and rt_lib.training.footprint."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields, replace

import pytest
from torch.utils.flop_counter import FlopCounterMode

from rt_lib.experiments import miiii_common, miiii_training
from rt_lib.experiments.common import GridParams
from rt_lib.model import TransformerConfig, build_model
from rt_lib.pipeline import runner
from rt_lib.pipeline.registry import registry
from rt_lib.runtime.io import PROJECT_ROOT
from rt_lib.runtime.params import Params
from rt_lib.tasks import modular_addition
from rt_lib.training.footprint import StepShape, measure, on_meta
from rt_lib.training.train import TrainConfig, make_optimizer, train_step

# What a smoke test may change: how long, how much is evaluated, how many rows a step takes,
# how many restarts or seeds;
# never what is trained (widths, vocabularies, lengths, depth, heads, p, tasks).
CUTS = {"steps", "epochs", "baseline_epochs", "lstm_steps", "trained_steps", "restarts",
        "batch_size", "eval_every", "warmup_steps", "eval_rows", "n_test", "eval_points",
        "n_snapshots", "max_states", "fallback_steps", "n_trials", "max_stories",
        "n_valid_windows", "sample_tokens", "from_hub", "task_profile", "train_params", "fixed",
        "random_overrides", "extra_seeds"}
# Notebook 08's widest model does not fit this machine beside the rest (TinyStoriesParams)
WIDTHS_LEFT_OUT = {"08_tinystories": {"widths", "random_widths"}}


def _plans():
    return ({j.name: j for j in runner.plan("paper", None, {})},
            {j.name: j for j in runner.plan("paper-smoke", None, {})})


@pytest.fixture(scope="module")
def plans(monkeypatch_module_data):
    return _plans()


def _need_tinystories() -> None:
    """Notebook 08 validates that its text exists: skip without it, but fail where the data is
    required (RT_REQUIRE_DATA=1: CI, whose notebooks need it anyway)."""
    if os.environ.get("RT_TINYSTORIES"):
        return
    reason = "RT_TINYSTORIES is not set (scripts/data_env.sh sets it)"
    if os.environ.get("RT_REQUIRE_DATA") == "1":
        pytest.fail(reason + " (RT_REQUIRE_DATA=1: required here)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def monkeypatch_module_data():
    # notebook 08 validates that its text exists: the repository's sample, as the runner finds it
    _need_tinystories()


def test_smoke_changes_only_lengths_and_sizes_and_never_grows_them(plans):
    paper, smoke = plans
    assert set(smoke) == set(paper)
    for name, job in smoke.items():
        assert job.output_dir.parent.name == "paper-smoke" and job.folder == name, name
        before = paper[name].parameters
        assert set(job.parameters) == set(before), name  # still names every parameter
        changed = {k for k in before if job.parameters[k] != before[k]}
        assert changed <= CUTS | WIDTHS_LEFT_OUT.get(name, set()), (name, changed - CUTS)
        for key in changed:
            old, new = before[key], job.parameters[key]
            if isinstance(old, (int, float)) and isinstance(new, (int, float)):
                assert new <= old, (name, key, old, new)
            if key == "extra_seeds":  # fewer seeds, never others
                assert set(new) < set(old), (name, key, old, new)


def test_smoke_cuts_the_long_notebooks_to_a_handful_of_steps(plans):
    _, smoke = plans
    for name, job in smoke.items():
        for key in ("steps", "epochs"):
            value = job.parameters.get(key)
            assert value is None or value <= 4, (name, key, value)


def test_smoke_readers_ask_for_notebook_11s_smoke_runs(plans):
    _, smoke = plans
    main = miiii_common.MiiiiParams(**smoke[miiii_training.NAME].parameters)
    for job in smoke.values():
        if "train_params" in job.parameters:
            again = miiii_common.training_params(job.parameters["train_params"], ("miiii",))
            assert again.run_key("miiii", main.grokfast_lambda) == \
                main.run_key("miiii", main.grokfast_lambda), job.name


def test_a_smoke_number_is_an_upper_bound_and_only_named_parameters_are_cut():
    cut = GridParams.smoke_config({"steps": 1, "restarts": 10, "batch_size": None, "lr": 0.1})
    assert cut["steps"] == 1  # already below the cut
    assert cut["restarts"] == GridParams.SMOKE["restarts"]
    assert cut["batch_size"] == GridParams.SMOKE["batch_size"]  # None (full batch) is replaced
    assert cut["lr"] == 0.1 and "eval_every" not in cut  # not named by the config: left out


def test_every_cut_names_a_parameter_of_its_class():
    for exp in registry().values():
        names = {f.name for f in fields(exp.params)}
        assert set(exp.params.SMOKE) <= names, exp.name
    assert Params.SMOKE == {}


def test_smoke_of_the_cpu_profile_is_refused(capsys):
    assert runner.main(["--smoke", "--only", "01"]) == 2
    assert "--smoke" in capsys.readouterr().err


def _tiny_shape(rows: int = 16) -> StepShape:
    task = modular_addition(p=7, train_fraction=0.8, split_seed=0)
    cfg = TransformerConfig(d_vocab=task.d_vocab, n_ctx=task.n_ctx, d_model=16, n_layers=1,
                            n_heads=2, d_vocab_out=task.d_vocab_out, trainable="all")
    return StepShape("tiny", cfg, task, rows, TrainConfig(steps=1, batch_size=rows, lr=1e-3,
                                                             weight_decay=1e-3, warmup_steps=0))


@pytest.mark.parametrize("trainable", ["all", "embeddings"])
def test_meta_step_counts_the_flops_of_the_real_plain_step(trainable):
    """Also for the random transformer, whose last-position shortcut depends on the data (the
    meta device runs the plain forward, an upper bound of the shortcut's work)."""
    shape = _tiny_shape()
    shape = replace(shape, model=replace(shape.model, n_layers=2, trainable=trainable))
    model = build_model(shape.model, 0, last_position="full")
    x, y = shape.task.get_batch(0, 16, 0)
    with FlopCounterMode(display=False) as counter:
        train_step(model, shape.task, make_optimizer(model, shape.train), x, y, shape.train)
    peak, flops, n = on_meta(shape, 16)
    assert flops == counter.get_total_flops() > 0
    assert n == sum(p.numel() for p in model.parameters())
    shortcut = build_model(shape.model, 0)  # the default forward: never more work
    with FlopCounterMode(display=False) as counter:
        train_step(shortcut, shape.task, make_optimizer(shortcut, shape.train), x, y, shape.train)
    assert counter.get_total_flops() <= flops


def test_meta_estimate_holds_weights_gradients_adam_and_activations():
    shape = _tiny_shape()
    model = build_model(shape.model, 0)
    weights = sum(p.numel() * 4 for p in model.parameters())
    small, large = on_meta(shape, 16)[0], on_meta(shape, 160)[0]
    assert small > 4 * weights  # + gradients + two AdamW moments + activations
    assert large > small  # activations grow with the batch


def test_a_cheap_step_is_measured_in_a_process_of_its_own():
    fp = measure(_tiny_shape(), max_flops=1e12)
    assert fp.peak_kind == "measured" and fp.measured_rows == (16,)
    assert 0 < fp.peak_bytes < 2**30 and fp.flops > 0 and fp.seconds > 0


def test_the_footprint_table_is_written_and_printed(tmp_path, capsys):
    """What a smoke run ends with (``--no-footprints`` leaves it out, as the run below does: the
    whole table takes minutes of both cores): here for notebook 11's one step."""
    runner.report_footprints("paper", [miiii_training.NAME], tmp_path)
    table = (tmp_path / "footprint.csv").read_text().splitlines()
    assert len(table) == 2 and table[1].startswith(f"{miiii_training.NAME},")
    out = capsys.readouterr().out
    assert "one training step at the paper profile's batch" in out and "GFLOP/step" in out


def test_no_footprints_needs_the_smoke_test(capsys):
    assert runner.main(["--no-footprints", "--only", "01"]) == 2
    assert "--no-footprints goes with --smoke" in capsys.readouterr().err


@pytest.mark.long
def test_the_paper_profile_smoke_test_runs_end_to_end(tmp_path):
    """Every notebook at the paper's shapes, a handful of steps, readers reading the smoke runs
    (the footprint table left out: the test above takes it).  One notebook at a time beside the
    nbval notebooks (docs/measurements.md has its time); RT_TEST_SMOKE=0 leaves it out of a quick local
    run."""
    if os.environ.get("RT_TEST_SMOKE") == "0":
        pytest.skip("RT_TEST_SMOKE=0: the paper-profile smoke run left out "
                    "(./run_all.sh --profile paper --smoke runs it alone)")
    _need_tinystories()
    env = {**os.environ, "RT_RESULTS": str(tmp_path / "results"), "TQDM_DISABLE": "1"}
    proc = subprocess.run([sys.executable, "-m", "rt_lib.pipeline.runner", "--profile", "paper",
                           "--smoke", "--jobs", "1", "--no-footprints"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    root = tmp_path / "results" / "paper-smoke"
    assert not (tmp_path / "results" / "paper").exists()
    for name in registry():
        assert (root / name / f"{name}.ipynb").exists(), name
    assert not (root / "footprint.csv").exists()
    assert "one training step at the paper profile's batch" not in proc.stdout
