import os

import pytest
import torch

os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(autouse=True)
def _one_thread():
    # Unit tests are tiny; one thread keeps them deterministic and leaves a core for the rest.
    torch.set_num_threads(1)
    yield


@pytest.fixture
def results_tmp(tmp_path, monkeypatch):
    """Redirect results/ to a temporary folder for tests that write."""
    monkeypatch.setenv("RT_RESULTS", str(tmp_path / "results"))
    return tmp_path / "results"
