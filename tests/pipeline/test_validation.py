"""Bad parameters, for every notebook: ``./run_all.sh`` refuses them before any work, with a
message naming the notebook, the parameter and (for a choice) what is allowed.

Each case goes through :func:`rt_lib.pipeline.plan.plan`, i.e. the notebook's own parameters cell plus
the injected value, built by the validator the notebook itself calls."""

from __future__ import annotations

import pytest

from rt_lib.pipeline import plan as planning
from rt_lib.pipeline import runner
from rt_lib.pipeline.registry import registry

pytestmark = pytest.mark.fault

# (notebook, parameter, bad value, text the message must contain besides the parameter name)
CASES = [
    ("01", "p", 1, ""),
    ("01", "train_fraction", 1.5, ""),
    ("01", "models", ["random mlp"], "random transformer"),
    ("01", "widths", [0], ""),
    ("01", "steps", "many", ""),
    ("01", "lr", -1.0, ""),
    ("01", "lr", "abc", "must be a number, got 'abc'"),
    ("01", "batch_restarts", "yes", "true or false"),
    ("02", "widths", "wide", "a list of integers"),
    ("01", "device", "tpu", "cuda"),
    ("02", "max_keys", 0, ""),
    ("02", "batch_size", -4, ""),
    ("02", "restarts", 0, ""),
    ("03", "n_digits", 0, ""),
    ("03", "models", ["trained gru"], "trained LSTM"),
    ("04", "min_pairs", 20, ""),
    ("04", "n_heads", 0, ""),
    ("05", "n", 0, ""),
    ("05", "widths", [16.5], ""),
    ("06", "tasks", ["sorting"], "decimal addition"),
    ("06", "variants", ["random: nothing"], "random transformer"),
    ("06", "task_profile", "tpu", "paper"),
    ("07", "widths", [-16], ""),
    ("08", "vocab_size", 10, ""),
    ("08", "data_path", "/nonexistent/tinystories", "does not exist"),
    ("08", "temperature", -1.0, ""),
    ("08", "sample_width", 7, "widths"),
    ("09", "tasks", ["sorting"], "modular addition"),
    ("09", "k", 0, ""),
    ("10", "target_widths", [0], ""),
    ("10", "d_vocab", 1, ""),
    ("11", "p", 36, "prime"),
    ("11", "variants", ["miiii", "collatz"], "nanda"),
    ("11", "split", "random", "code"),
    ("11", "dropout_at", "everywhere", "residual"),
    ("11", "dropout", 1.0, ""),
    ("11", "epochs", 0, ""),
    ("12", "variants", ["collatz"], "miiii"),
    ("12", "fractions", [1.5], ""),
    ("12", "train_params", {"p": 36}, "prime"),
    ("13", "variant", "collatz", "miiii"),
    ("13", "n_neurons", 0, ""),
    ("14", "objective", "test_acc", "valid_acc"),
    ("14", "n_trials", 0, ""),
    ("14", "space", {"colour": [1, 2]}, ""),
    ("15", "widths", [0], ""),
    ("15", "variants", ["collatz"], "miiii"),
    # as people type them: a repeated entry would train one seed twice and count it as two
    ("01", "widths", [256, 256, 256], "repeats 256"),
    ("02", "models", ["random transformer", "random transformer"], "repeats"),
    ("11", "extra_seeds", [1, 1], "repeats 1"),
    ("11", "extra_seeds", [0, 1], "would count twice"),
    ("01", "threads", 0, "positive integer"),  # refused before anything starts, not 40 s in
    ("11", "threads", -2, "positive integer"),
    ("11", "p", 100003, "too large for this machine"),  # before its p^2 numbers are made
    ("01", "p", 1000003, "too large for this machine"),
]


@pytest.mark.parametrize("notebook, name, value, allowed", CASES,
                         ids=[f"{nb}-{name}={value!r}" for nb, name, value, _ in CASES])
def test_bad_parameter_is_refused_naming_it(notebook, name, value, allowed, results_tmp):
    with pytest.raises(runner.RunError) as info:
        runner.plan("cpu", [notebook], {name: value})
    message = str(info.value)
    assert message.startswith(next(iter(planning.select([notebook]))))  # names the notebook
    assert name in message and allowed in message, message
    assert not results_tmp.exists()  # nothing written


def test_every_notebook_has_bad_input_cases_and_a_validator():
    books = runner.available_notebooks()
    assert {nb for nb, *_ in CASES} == {name[:2] for name in books}
    assert set(registry()) == set(books)  # each notebook's experiment declares its parameters


def test_defaults_of_every_notebook_pass_their_validator():
    assert len(runner.plan("cpu", None, {})) == len(runner.available_notebooks())


@pytest.mark.parametrize("typed", ["widths=[16,", "p=[1", "x=!!python/object/apply:os.system ['true']"])
def test_malformed_yaml_in_set_is_one_line_naming_the_parameter(typed, capsys):
    assert runner.main(["--only", "01", "--set", typed]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"run_all.sh: error: --set {typed.partition('=')[0]}=") and "not a YAML value" in err


def test_a_relative_rt_results_is_relative_to_where_the_command_was_typed(tmp_path):
    import os
    import subprocess

    from rt_lib.runtime.io import PROJECT_ROOT

    env = {**os.environ, "RT_RESULTS": "mine/results"}
    out = subprocess.run(["bash", str(PROJECT_ROOT / "run_all.sh"), "--list"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert f"runs of the cpu profile ({tmp_path / 'mine' / 'results'}): none" in out.stdout
