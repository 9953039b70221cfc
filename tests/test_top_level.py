"""The repository's top level holds the project's own entries: a run's output written to the working
directory (a notebook's results folder such as ``07_table1/``) is not committed beside them."""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = {".ci", ".gitignore", "CITATION.cff", "README.md", "benchmarks", "configs", "conftest.py", "docs",
           "environment.yml", "evidence", "notebooks", "pyproject.toml", "requirements.lock", "requirements.txt",
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


def _pins(path: Path) -> dict[str, str]:
    """{normalised name: version} of every ``name==version`` line of a requirements file."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"{path.name}: {line!r} is not name==version"
            out[re.sub(r"[-_.]+", "-", name).lower()] = version
    return out


def test_the_lock_pins_every_package_and_each_direct_pin_at_its_version():
    """requirements.lock (what scripts/setup.sh installs) holds requirements.txt's pins exactly,
    and every other package pinned too: a fresh clone next month installs the recording's."""
    direct, lock = _pins(ROOT / "requirements.txt"), _pins(ROOT / "requirements.lock")
    assert {name: lock.get(name) for name in direct} == direct
    assert len(lock) > 3 * len(direct)  # the transitive packages too
    assert "-r requirements.lock" in (ROOT / "environment.yml").read_text()
    assert "requirements.lock" in (ROOT / "scripts" / "setup.sh").read_text()
