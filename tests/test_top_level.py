"""The repository's top level holds the project's own entries: a run's output written to the working
directory (a notebook's results folder such as ``07_table1/``) is not committed beside them."""

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = {".ci", ".gitignore", "CITATION.cff", "README.md", "benchmarks", "configs", "conftest.py", "docs",
           "environment.yml", "evidence", "notebooks", "pyproject.toml", "requirements.txt",
           "results", "rt_lib", "run_all.sh", "run_tests.sh", "scripts", "tests"}


def test_only_the_projects_entries_are_tracked_at_the_top_level():
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"not a git checkout ({err})")
    top = {line.split("/")[0] for line in listed.splitlines()}
    assert top <= ENTRIES, f"tracked at the top level and not the project's: {sorted(top - ENTRIES)}"
    assert {"rt_lib", "notebooks", "tests"} <= top
