"""The long CPU profile (configs/long/): the CPU profile's tasks run for hours on a reader's own
2-core machine, in chunks of at most 90 minutes (configs/long_chunks.yaml), each kept as evidence.
It names only what it changes from the CPU profile; every comparison it runs has three seeds or
restarts a side."""

from __future__ import annotations

import pytest

from rt_lib.experiment import STRICT_PROFILES
from rt_lib.experiments import miiii_common
from rt_lib.pipeline import plan as planning
from rt_lib.pipeline import runner
from rt_lib.pipeline.registry import registry
from rt_lib.runtime.context import CONFIGS

COVERED = sorted(p.stem for p in (CONFIGS / "long").glob("*.yaml"))


@pytest.fixture(scope="module")
def jobs():
    return {job.name: job for job in runner.plan("long", None, {})}


def test_the_long_profile_runs_miiii_and_tables_2_and_3_each_config_valid(jobs):
    assert list(jobs) == COVERED
    assert {"05_memorisation", "06_embedding_ablations", "11_miiii_training",
            "12_miiii_embeddings", "13_miiii_neurons", "15_random_miiii"} == set(COVERED)
    for name, job in jobs.items():
        params = registry()[name].params(**job.parameters)  # raises on a bad value
        assert job.output_dir.parent.name == "long" and job.folder == name
        # a reduced task like the CPU profile's, said so on every claim row (the scale rule)
        assert params.smaller_than_paper(), name
    assert "long" not in STRICT_PROFILES  # its statuses are recorded as measured, none fails a run


def test_every_comparison_of_the_long_profile_has_three_seeds_or_restarts_a_side(jobs):
    p = {name: registry()[name].params(**job.parameters) for name, job in jobs.items()}
    eleven = p["11_miiii_training"]
    assert len({eleven.seed, *eleven.extra_seeds}) >= 3 and eleven.epochs >= 10_000
    assert len(set(p["12_miiii_embeddings"].seeds)) >= 3
    assert len(set(p["13_miiii_neurons"].trained_seeds)) >= 3
    assert p["05_memorisation"].restarts >= 3 and p["06_embedding_ablations"].restarts >= 3
    assert "decimal addition" in p["06_embedding_ablations"].tasks


def test_the_long_profiles_readers_read_notebook_11s_long_runs(jobs):
    """12, 13 and 15 ask for exactly notebook 11's long runs (else they would train them again)."""
    main = miiii_common.MiiiiParams(**jobs[miiii_common.TRAINING].parameters)
    readers = [j for j in jobs.values() if "train_params" in j.parameters]
    assert {j.name for j in readers} == {"12_miiii_embeddings", "13_miiii_neurons", "15_random_miiii"}
    for job in readers:
        again = miiii_common.training_params(job.parameters["train_params"], ("miiii",))
        lamb = main.grokfast_lambda
        assert again.run_key("miiii", lamb) == main.run_key("miiii", lamb), job.name
        assert (again.seed, again.extra_seeds) == (main.seed, main.extra_seeds), job.name


def test_each_long_config_states_its_expected_minutes_and_every_chunk_fits_a_sitting():
    for name in COVERED:
        assert "Expected:" in (CONFIGS / "long" / f"{name}.yaml").read_text(), name
    pieces = planning.chunks("long")
    assert sorted(n for c in pieces for n in c.notebooks) == COVERED  # each in one chunk
    assert all(c.minutes <= planning.CHUNK_MINUTES["long"] == 90 for c in pieces)
    # a reader runs after what it reads: 11 in a chunk before (or with) 12, 13 and 15
    order = [n for c in pieces for n in c.notebooks]
    assert all(order.index("11_miiii_training") < order.index(r)
               for r in ("12_miiii_embeddings", "13_miiii_neurons", "15_random_miiii"))


def test_a_long_chunk_over_90_minutes_is_refused_naming_it(tmp_path, monkeypatch):
    configs = tmp_path / "configs"
    (configs / "long").mkdir(parents=True)
    (configs / "long" / "05_memorisation.yaml").write_text("restarts: 3\n")
    (configs / "long_chunks.yaml").write_text("- notebooks: [5]\n  minutes: 95\n")
    monkeypatch.setattr(planning, "CONFIGS", configs)
    with pytest.raises(planning.RunError, match=r"chunk 05 expects 95 minutes, over one chunk's 90"):
        planning.chunks("long")
