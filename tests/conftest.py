import dataclasses
import os

import pytest
import torch

os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(autouse=True)
def _one_thread():
    # Unit tests are tiny; one thread keeps them deterministic and leaves a core for the rest.
    torch.set_num_threads(1)
    yield


@pytest.fixture(autouse=True, scope="module")
def _no_run_store():
    # A unit test trains what it tests (interruptions, resumes, faults): never a run loaded from
    # the reader's run store, nor one written into it.  The store's own tests point RT_CACHE at a
    # folder of theirs.  Module scope, autouse: made before any module fixture that copies the
    # environment into a run (Slurm's cluster, the fault and smoke runs), undone after the
    # module's last test (nbval's notebooks are not python tests: they use the store).
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RT_CACHE", "off")
        yield


@pytest.fixture
def results_tmp(tmp_path, monkeypatch):
    """Redirect results/ to a temporary folder for tests that write."""
    monkeypatch.setenv("RT_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"


@pytest.fixture
def run_context(monkeypatch):
    """A function that hands this process a run context as the runner does (``$RT_RUN``):
    the current one with the given fields changed; ``run_context(None)`` takes it away."""
    from rt_lib.runtime import context

    def hand(_clear: object = ..., **fields):
        if _clear is None:
            monkeypatch.delenv(context.ENV, raising=False)
            return None
        run = dataclasses.replace(context.current(), **fields)
        monkeypatch.setenv(context.ENV, run.to_env()[context.ENV])
        return run

    monkeypatch.delenv(context.ENV, raising=False)
    return hand


@pytest.fixture
def load_script():
    """A function that imports ``scripts/<name>.py`` as a module (the scripts are no package)."""
    import importlib.util

    from rt_lib.runtime.io import PROJECT_ROOT

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, PROJECT_ROOT / "scripts" / f"{name}.py")
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        return script

    return load
