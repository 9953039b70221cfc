"""Provenance of a GPU job: the bundle names the project's own commit (never another
repository's HEAD), a job refuses a bundle made for another Python or beside other sources, and
importing evidence warns when its commit is not in this repository."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from rt_lib.runtime.io import PROJECT_ROOT
from rt_lib.site import evidence

PY = f"{sys.version_info[0]}.{sys.version_info[1]}"


def _gpu_run(tmp_path, bundle):
    return subprocess.run(["bash", "scripts/gpu_run.sh", "--smoke", "11"], cwd=PROJECT_ROOT,
                          env={"PATH": "/usr/bin:/bin", "RT_GPU_BUNDLE": str(bundle),
                               "OUT": str(tmp_path / "out"), "HOME": str(tmp_path)},
                          capture_output=True, text=True, timeout=120)


def _sources_digest():
    return subprocess.run(["bash", "-c", "source <(sed -n '/^sources_digest()/,/; }$/p' "
                           "scripts/gpu_bundle.sh); sources_digest"], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_a_job_refuses_a_bundle_made_for_another_python(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "PYTHON").write_text("3.0\n")
    out = _gpu_run(tmp_path, bundle)
    assert out.returncode != 0 and "was made for Python 3.0" in out.stderr, out.stderr


def test_a_job_refuses_a_bundle_made_beside_other_sources(tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    have = subprocess.run(["/usr/bin/env", "python3", "-c",
                           "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
                          env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True).stdout
    (bundle / "PYTHON").write_text(have)
    (bundle / "COMMIT").write_text("0123456789ab\n")
    (bundle / "SOURCES").write_text("0" * 64 + "\n")
    out = _gpu_run(tmp_path, bundle)
    assert out.returncode != 0 and "made beside other sources" in out.stderr, out.stderr
    (bundle / "SOURCES").write_text(_sources_digest() + "\n")  # these sources: it goes on
    out = _gpu_run(tmp_path, bundle)
    assert "made beside other sources" not in out.stderr


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_bundle_made_inside_another_repository_names_no_commit(tmp_path):
    outer = tmp_path / "outer"
    project = outer / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(PROJECT_ROOT / "scripts" / "gpu_bundle.sh", project / "scripts")
    subprocess.run(["git", "init", "-q", str(outer)], check=True)
    subprocess.run(["git", "-C", str(outer), "-c", "user.name=x", "-c", "user.email=x@y",
                    "commit", "-q", "--allow-empty", "-m", "another project"], check=True)
    # it stops at the download (no index here); the commit is decided before it
    out = subprocess.run(["bash", "scripts/gpu_bundle.sh", "--python-version", PY], cwd=project,
                         env={"PATH": "/usr/bin:/bin", "PIP_INDEX_URL": "http://127.0.0.1:9/",
                              "PIP_NO_INDEX": "1", "HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=300)
    assert f"the git repository here ({outer}) is not this project's: commit unknown" in out.stderr


def test_evidence_import_knows_this_repositorys_commits():
    if not (PROJECT_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()
    assert evidence.known_commit(head)
    assert not evidence.known_commit("0" * 40)
    assert not evidence.known_commit("unknown")
