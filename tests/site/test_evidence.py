"""Evidence kept from a finished run (rt_lib.site.evidence) and its columns on the site: a real
paper-profile smoke run of notebook 05 (about half a minute on one core), kept into temporary
evidence folders."""

from __future__ import annotations

import csv
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from rt_lib.runtime.io import PROJECT_ROOT, DamagedFileError
from rt_lib.site import evidence
from rt_lib.site.pages import NOT_RECORDED, build_site

NAME = "05_memorisation"  # the quickest notebook of the smoke run: a claim, a figure, models
PROFILE = "paper-smoke"
COMMAND = "./run_all.sh --profile paper --smoke --only 05"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory) -> Path:
    """The paper profile's smoke run of notebook 05, as ./run_all.sh leaves it."""
    base = tmp_path_factory.mktemp("smoke")
    env = {**os.environ, "RT_RESULTS": str(base / "results"), "TQDM_DISABLE": "1"}
    proc = subprocess.run([sys.executable, "-m", "rt_lib.pipeline.runner", "--profile", "paper", "--smoke",
                           "--only", "05", "--no-footprints", "--jobs", "1"], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return base / "results" / PROFILE


def _keep(results: Path, evidence_dir: Path, *extra: str) -> int:
    return evidence.main(["keep", "--profile", PROFILE, "--results", str(results),
                          "--evidence-dir", str(evidence_dir), *extra])


@pytest.fixture(scope="module")
def kept(smoke_run, tmp_path_factory) -> Path:
    """The smoke run kept twice: as this machine's (a CPU) and as if it had run on an H100
    (``--device``); returns the evidence folder."""
    root = tmp_path_factory.mktemp("evidence")
    # --results names the results root here: the profile's folder below it is found
    assert _keep(smoke_run.parent, root, "--command", COMMAND) == 0
    assert _keep(smoke_run, root, "--command", COMMAND, "--device", H100) == 0
    return root


def _manifest(smoke_run: Path) -> dict:
    return json.loads((smoke_run / "manifest.json").read_text())["notebooks"]


def _folder(kept: Path, smoke_run: Path, slug: str) -> Path:
    finished = _manifest(smoke_run)[NAME]["finished"]  # the minute the job's run finished
    return kept / PROFILE / f"{finished[:10]}T{finished[11:13]}{finished[14:16]}-{slug}"


def test_a_kept_run_holds_the_notebook_its_claims_and_figures_and_nothing_else(kept, smoke_run):
    folder = _folder(kept, smoke_run, "cpu")
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    figures = sorted(str(p.relative_to(smoke_run)) for p in (smoke_run / NAME).rglob("*.png"))
    assert figures, "the run drew no figure: nothing to check"
    assert (smoke_run / NAME / "metrics.csv").is_file(), "the run wrote no metrics: nothing to check"
    assert files == sorted(["provenance.yaml", f"{NAME}/{NAME}.ipynb", f"{NAME}/claims.csv",
                            f"{NAME}/metrics.csv", *figures])
    for rel in files:
        if rel != "provenance.yaml":  # the rest as the run left it
            assert (folder / rel).read_bytes() == (smoke_run / rel).read_bytes(), rel


def test_no_checkpoint_or_data_table_is_kept(kept, smoke_run):
    left = [p for p in (smoke_run / NAME).rglob("*") if p.suffix in (".pt", ".sha256", ".csv")
            and p.name not in ("claims.csv", "metrics.csv")]
    assert any(p.suffix == ".pt" for p in left), "the run saved no model: nothing to check"
    kept_names = {p.name for p in kept.rglob("*")}
    assert not kept_names & {p.name for p in left}
    assert not list(kept.rglob("models"))


def test_the_provenance_records_device_versions_commit_date_wall_times_command(kept, smoke_run):
    entry = _manifest(smoke_run)[NAME]
    record = yaml.safe_load((_folder(kept, smoke_run, "cpu") / "provenance.yaml").read_text())
    cpu = f"{platform.machine()} CPU ({torch.backends.cpu.get_cpu_capability()})"
    assert record["device"] == {"kind": "cpu", "name": cpu, "slug": "cpu", "count": 1,
                                "detected": True}
    assert record["profile"] == PROFILE and record["command"] == COMMAND
    assert record["command_given"] is True
    assert record["torch"] == torch.__version__ and record["python"] == platform.python_version()
    head, _, flag = entry["commit"].partition("+")
    assert re.fullmatch(r"[0-9a-f]{40}", record["commit"]) and record["commit"] == head
    assert record["dirty"] is (flag == "dirty")
    assert record["date"] == entry["finished"][:10]
    assert record["notebooks"][NAME]["wall_seconds"] == entry["wall_seconds"]
    assert record["wall_seconds"] == pytest.approx(entry["wall_seconds"])
    assert set(record["files"]) == {f"{NAME}/{NAME}.ipynb", f"{NAME}/claims.csv",
                                    f"{NAME}/metrics.csv"} | {
        str(p.relative_to(smoke_run)) for p in (smoke_run / NAME).rglob("*.png")}
    assert record["checks"] == {NAME: evidence.checks_digest(NAME)}  # the checks that judged it

    named = yaml.safe_load((_folder(kept, smoke_run, "h100") / "provenance.yaml").read_text())
    assert named["device"] == {"kind": "gpu", "name": H100, "slug": "h100", "count": 1,
                               "detected": False}


def test_the_commit_a_gpu_job_names_wins_over_a_stale_git_in_its_copy(monkeypatch, tmp_path):
    """A GPU job's copy of the tree may carry an old ``.git``; scripts/gpu_run.sh names the
    bundle's commit in $RT_SOURCE_COMMIT, and that is the commit the manifest records."""
    from rt_lib.runtime import manifest
    stale = tmp_path / "copy"
    subprocess.run(["git", "init", "-q", str(stale)], check=True)
    subprocess.run(["git", "-C", str(stale), "-c", "user.name=x", "-c", "user.email=x@x",
                    "commit", "-q", "--allow-empty", "-m", "old"], check=True)
    monkeypatch.setattr(manifest, "PROJECT_ROOT", stale)
    old = subprocess.run(["git", "-C", str(stale), "rev-parse", "HEAD"], capture_output=True,
                         text=True, check=True).stdout.strip()
    manifest.git_commit.cache_clear()
    try:
        monkeypatch.delenv(manifest.SOURCE_COMMIT_ENV, raising=False)
        assert manifest.git_commit() == old  # without the variable: the copy's git
        manifest.git_commit.cache_clear()
        monkeypatch.setenv(manifest.SOURCE_COMMIT_ENV, "f" * 40 + "+dirty")
        assert manifest.git_commit() == "f" * 40 + "+dirty"
    finally:
        manifest.git_commit.cache_clear()


@pytest.mark.parametrize("name, count, slug", [
    ("NVIDIA H100 80GB HBM3", 1, "h100"), ("NVIDIA H200", 1, "h200"),
    ("NVIDIA A100-SXM4-40GB", 1, "a100"), ("Tesla V100-SXM2-16GB", 1, "v100"),
    ("NVIDIA H100 80GB HBM3", 2, "2xh100")])
def test_a_gpu_is_named_by_its_model(name, count, slug):
    assert evidence.gpu_slug(name, count) == slug


def test_keep_refuses_a_folder_over_the_size_limit_naming_the_largest_files(
        smoke_run, tmp_path, capsys):
    assert _keep(smoke_run, tmp_path, "--max-mib", "0.01") == 2
    err = capsys.readouterr().err
    assert "over the limit of 0.01 MiB (--max-mib)" in err and f"{NAME}/{NAME}.ipynb (" in err
    assert not list(tmp_path.rglob("*.ipynb"))  # nothing half kept


def test_keep_refuses_to_overwrite_a_kept_run_unless_told_to_replace_it(smoke_run, tmp_path,
                                                                        capsys):
    assert _keep(smoke_run, tmp_path) == 0
    (folder,) = (tmp_path / PROFILE).iterdir()
    (folder / "mine.txt").write_text("not the run's")
    assert _keep(smoke_run, tmp_path) == 2
    assert "exists already" in capsys.readouterr().err and (folder / "mine.txt").exists()
    assert _keep(smoke_run, tmp_path, "--replace") == 0
    assert not (folder / "mine.txt").exists() and (folder / "provenance.yaml").exists()
    assert [p.name for p in (tmp_path / PROFILE).iterdir()] == [folder.name]  # no leftovers


def test_replace_supersedes_an_earlier_keep_of_the_same_chunk_only(smoke_run, tmp_path,
                                                                    capsys):
    # the same notebooks judged again finish at another minute: --replace leaves one folder of
    # that chunk on that device; another chunk's and another device's stay, as without it
    assert _keep(smoke_run, tmp_path) == 0
    (folder,) = (tmp_path / PROFILE).iterdir()
    earlier = folder.with_name("2026-01-01T0000-" + folder.name.split("-")[-1])
    shutil.copytree(folder, earlier)
    for name, edit in (("2026-01-01T0001-cpu", {"notebooks": {"99_other": {}}}),
                       ("2026-01-01T0002-h100", {"device": {"slug": "h100"}})):
        shutil.copytree(folder, folder.with_name(name))
        prov = folder.with_name(name) / "provenance.yaml"
        prov.write_text(yaml.safe_dump(yaml.safe_load(prov.read_text()) | edit))
    assert _keep(smoke_run, tmp_path, "--replace") == 0
    left = sorted(p.name for p in (tmp_path / PROFILE).iterdir())
    assert left == sorted([folder.name, "2026-01-01T0001-cpu", "2026-01-01T0002-h100"])
    out = capsys.readouterr().out
    assert f"{earlier.name}: the same notebooks on the same device, superseded" in out
    assert not earlier.exists()
    shutil.copytree(folder, earlier)  # without --replace an earlier keep stays beside it
    shutil.rmtree(folder)
    assert _keep(smoke_run, tmp_path) == 0 and earlier.exists() and folder.exists()


def _copy(smoke_run: Path, tmp_path: Path) -> Path:
    """The run without its models (the checks refuse it before they matter)."""
    copy = tmp_path / "results" / PROFILE
    shutil.copytree(smoke_run, copy, ignore=shutil.ignore_patterns("*.pt", "*.sha256"))
    return copy


def test_keep_refuses_a_run_missing_failed_or_changed_naming_it(smoke_run, tmp_path):
    with pytest.raises(evidence.EvidenceError, match=r"no finished run of the paper-smoke "
                       r"profile: .*manifest.json does not exist"):
        evidence.keep(PROFILE, tmp_path / "nowhere", tmp_path / "ev")
    with pytest.raises(evidence.EvidenceError, match="no profile 'papr'"):
        evidence.keep("papr", smoke_run, tmp_path / "ev")

    copy = _copy(smoke_run, tmp_path)
    failed = copy / "11_miiii_training" / "11_miiii_training.failed.ipynb"
    failed.parent.mkdir()
    failed.write_text("{}")
    with pytest.raises(evidence.EvidenceError, match=r"11_miiii_training failed \(its notebook "
                       r"with the error: .*11_miiii_training.failed.ipynb\)"):
        evidence.keep(PROFILE, copy, tmp_path / "ev")
    failed.unlink()
    with pytest.raises(evidence.EvidenceError, match=r"11_miiii_training did not finish"):
        evidence.keep(PROFILE, copy, tmp_path / "ev")
    # a notebook stopped in its training leaves its mid-run checkpoints (resume/) beside its runs
    (failed.parent / "runs" / "miiii_lambda2_0").mkdir(parents=True)
    (failed.parent / "resume").mkdir()
    with pytest.raises(evidence.EvidenceError, match=r"11_miiii_training did not finish"):
        evidence.keep(PROFILE, copy, tmp_path / "ev")
    (failed.parent / "resume").rmdir()
    (failed.parent / "metrics.csv").write_text("run,valid_acc\n")  # or its tables
    with pytest.raises(evidence.EvidenceError, match=r"11_miiii_training did not finish"):
        evidence.keep(PROFILE, copy, tmp_path / "ev")
    (failed.parent / "metrics.csv").unlink()
    # runs alone are a reader's (notebook 15 kept alone trains 11's T_miiii there): not kept
    assert evidence.runs_only(failed.parent)
    folder = evidence.keep(PROFILE, copy, tmp_path / "ev-runs")
    assert {p.name for p in folder.iterdir()} == {NAME, "provenance.yaml"}
    shutil.rmtree(failed.parent)

    with open(copy / NAME / "claims.csv", "a") as f:
        f.write("x,ours,edited,,holds,,True\n")
    with pytest.raises(evidence.EvidenceError, match=rf"{NAME}/claims.csv changed since the run"):
        evidence.keep(PROFILE, copy, tmp_path / "ev")
    assert not (tmp_path / "ev").exists()


def test_a_damaged_kept_claims_file_is_named_and_its_run_left_out(kept, tmp_path):
    copy = tmp_path / "evidence"
    shutil.copytree(kept, copy)
    runs = evidence.kept_runs(copy)
    assert len(runs) == 2 and all(NAME in r.claims for r in runs)
    damaged = runs[0].folder / NAME / "claims.csv"
    damaged.write_bytes(damaged.read_bytes()[:-10])  # cut short
    with pytest.raises(DamagedFileError, match=re.escape(str(damaged))):
        evidence.kept_runs(copy)
    problems: list[str] = []
    assert [r.folder for r in evidence.kept_runs(copy, problems)] == [runs[1].folder]
    assert len(problems) == 1 and str(damaged) in problems[0]
    assert evidence.kept_runs(tmp_path / "no evidence here") == []


class _Tables(HTMLParser):
    """Each ``<table>``'s header and rows as text, by the table's class; a status cell's task line
    (``<small class="rt-task">``) apart, in ``tasks``."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, list]] = {}
        self._table: dict[str, list] | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self.coloured: list[bool] = []  # per cell of the last row: is it a coloured status
        self.task: list[str] | None = None  # inside a task line
        self.tasks: list[str] = []  # per cell of the last row: its task line

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("class", ""),
                                                 {"head": [], "rows": [], "bold": [], "tasks": []})
        elif tag == "tr" and self._table is not None:
            self._row, self.coloured, self.tasks = [], [], []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
            self.coloured.append(False)
            self.tasks.append("")
        elif tag == "small" and "rt-task" in attrs.get("class", "") and self._cell is not None:
            self.task = []
        elif tag == "b" and self._cell is not None and "color:" in attrs.get("style", ""):
            self.coloured[-1] = True

    def handle_data(self, data):
        if self.task is not None:
            self.task.append(data)
        elif self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag):
        if tag == "small" and self.task is not None:
            self.tasks[-1], self.task = "".join(self.task), None
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if not self._table["head"]:
                self._table["head"] = self._row
            else:
                self._table["rows"].append(self._row)
                self._table["bold"].append(self.coloured)
                self._table["tasks"].append(self.tasks)
            self._row = None
        elif tag == "table":
            self._table = None


def _tables(index: Path) -> dict[str, dict[str, list]]:
    parser = _Tables()
    parser.feed(index.read_text())
    return parser.tables


def _tasks(csv_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """({claim: status}, {claim: the task line its cell shows}) read from a claims.csv apart:
    ``paper task``, or ``reduced: <how>`` (cut at 40 characters)."""
    table = pd.read_csv(csv_path, keep_default_na=False)
    lines = {}
    for row in table.itertuples():
        line = "paper task" if row.task_size == "paper" else f"reduced: {row.reduction}"
        lines[row.id] = line if len(line) <= 49 else line[:46] + "..."
    return dict(zip(table["id"], table["status"])), lines


def _statuses(csv_path: Path) -> dict[str, str]:
    with open(csv_path, newline="") as f:
        return {row["id"]: row["status"] for row in csv.DictReader(f)}


def _restatused(kept: Path, smoke_run: Path, slug: str, into: Path) -> dict[str, str]:
    """A copy of ``kept`` in ``into`` whose run ``slug`` recorded every claim with another
    status than the run did (its provenance's sha256 and size updated to match), so that two
    kept runs' columns differ; returns {claim: the status written there}."""
    shutil.copytree(kept, into)
    folder = _folder(into, smoke_run, slug)
    table = pd.read_csv(folder / NAME / "claims.csv", keep_default_na=False)
    other = {"holds": "fails", "fails": "holds", "not shown": "holds", "not checked": "holds"}
    table["status"] = table["status"].map(other)
    table["reason"] = ""
    table.to_csv(folder / NAME / "claims.csv", index=False)
    record = yaml.safe_load((folder / "provenance.yaml").read_text())
    path = folder / NAME / "claims.csv"
    record["files"][f"{NAME}/claims.csv"] = {"sha256": evidence.sha256_file(path),
                                            "bytes": path.stat().st_size}
    (folder / "provenance.yaml").write_text(yaml.safe_dump(record, sort_keys=False))
    return dict(zip(table["id"], table["status"]))


def test_the_sites_claims_table_has_a_column_per_kept_run_with_its_statuses(kept, smoke_run,
                                                                             tmp_path):
    # the H100 run's statuses all differ from the CPU run's: a column under the wrong header fails
    gpu_statuses = _restatused(kept, smoke_run, "h100", tmp_path / "evidence")
    index = build_site(smoke_run, PROFILE, [NAME], evidence=tmp_path / "evidence")
    table = _tables(index)["rt-claims"]
    cpu, gpu = f"{PROFILE} · CPU", f"{PROFILE} · H100"  # a column per profile and device
    head = table["head"]
    status = head.index(f"status · {PROFILE}")
    assert head[status + 1: status + 3] == [cpu, gpu] and head[-1] == "details"
    expected = _statuses(smoke_run / NAME / "claims.csv")  # the run's own record, read apart
    assert len(table["rows"]) == len(expected) >= 1
    for row, bold in zip(table["rows"], table["bold"]):
        claim = row[head.index("claim")]
        assert row[status].split(": ")[0] == row[status + 1] == expected[claim]
        assert row[status + 2] == gpu_statuses[claim] != expected[claim]
        assert bold[status + 1] and bold[status + 2]
    # every status cell says on what task it was measured: the run's, and each kept job's
    (_, tasks), (_, kept_tasks) = _tasks(smoke_run / NAME / "claims.csv"), _tasks(
        evidence.read_kept(_folder(tmp_path / "evidence", smoke_run, "h100")).folder / NAME / "claims.csv")
    for row, cells in zip(table["rows"], table["tasks"]):
        claim = row[head.index("claim")]
        assert cells[status] == tasks[claim] != ""
        assert cells[status + 2] == kept_tasks[claim]
    runs = _tables(index)["rt-kept-runs"]
    assert [r[0] for r in runs["rows"]] == [cpu, gpu]
    assert runs["rows"][1][runs["head"].index("device")] == H100
    assert runs["rows"][0][runs["head"].index("command")] == COMMAND
    assert "Left out:" not in index.read_text()  # both runs read, none left out


def _claims(rows: list[list]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["id", "source", "paper", "measured", "status", "scale",
                                       "own"])


def test_a_claim_a_kept_run_did_not_record_reads_blank_and_no_evidence_adds_no_column(
        kept, smoke_run, tmp_path):
    """Another profile's root (the CPU's, as the site builds it) beside the kept smoke runs."""
    folder = tmp_path / NAME
    folder.mkdir()
    shutil.copy(smoke_run / NAME / f"{NAME}.ipynb", folder)
    measured = _statuses(smoke_run / NAME / "claims.csv")
    claim = next(iter(measured))
    _claims([[claim, "Zhong & Andreas 2024, §5.1, Table 3", "its value", "1.0", "holds", "",
              False],
             ["c-ours", "ours", "a claim of ours", "0.9", "not shown", "width 1024", True]]
            ).to_csv(folder / "claims.csv", index=False)
    table = _tables(build_site(tmp_path, "cpu", [NAME], evidence=kept))["rt-claims"]
    head = table["head"]
    kept_columns = [h for h in head if h.startswith(f"{PROFILE} · ")]
    assert len(kept_columns) == 2 and "status · cpu" in head
    rows = {r[head.index("claim")]: (r, b) for r, b in zip(table["rows"], table["bold"])}
    for column in kept_columns:
        at = head.index(column)
        assert rows[claim][0][at] == measured[claim] and rows[claim][1][at]
        assert rows["c-ours"][0][at] == NOT_RECORDED and not rows["c-ours"][1][at]

    bare = _tables(build_site(tmp_path, "cpu", [NAME], evidence=tmp_path / "none"))
    assert bare["rt-claims"]["head"] == ["notebook", "claim", "paper", "status · cpu", "details"]
    assert "rt-kept-runs" not in bare


def test_jobs_of_one_profile_and_device_share_a_column_each_claim_from_the_latest(kept, smoke_run,
                                                                                 tmp_path):
    """Two later H100 jobs: the first recorded every claim with another status, the last
    recorded none.  The H100 column shows the first's statuses (the latest job that recorded
    each claim), its cells name that job; still one column per profile and device."""
    root = tmp_path / "evidence"
    shutil.copytree(kept, root)
    earlier = _folder(root, smoke_run, "h100")

    def job(suffix: str, table: pd.DataFrame) -> Path:
        folder = shutil.copytree(earlier, earlier.with_name(earlier.name + suffix))
        path = folder / NAME / "claims.csv"
        table.to_csv(path, index=False)
        record = yaml.safe_load((folder / "provenance.yaml").read_text())
        record["files"][f"{NAME}/claims.csv"] = {"sha256": evidence.sha256_file(path),
                                                "bytes": path.stat().st_size}
        (folder / "provenance.yaml").write_text(yaml.safe_dump(record, sort_keys=False))
        return folder

    table = pd.read_csv(earlier / NAME / "claims.csv", keep_default_na=False)
    other = {"holds": "fails", "fails": "holds", "not shown": "holds", "not checked": "holds"}
    table["status"], table["reason"] = table["status"].map(other), ""
    middle = job("b", table)
    job("c", table.iloc[:0])  # the latest: no claim of this notebook recorded

    index = build_site(smoke_run, PROFILE, [NAME], evidence=root)
    claims_table = _tables(index)["rt-claims"]
    head = claims_table["head"]
    assert [h for h in head if h.startswith(f"{PROFILE} · ")] == [f"{PROFILE} · CPU",
                                                                 f"{PROFILE} · H100"]
    at = head.index(f"{PROFILE} · H100")
    measured = _statuses(smoke_run / NAME / "claims.csv")
    newer = dict(zip(table["id"], table["status"]))
    assert len(claims_table["rows"]) == len(measured) >= 1
    for row in claims_table["rows"]:
        claim = row[head.index("claim")]
        assert row[at] == newer[claim] != measured[claim]
    assert f'title="job {middle.name}: ' in index.read_text()
    assert len(_tables(index)["rt-kept-runs"]["rows"]) == 4  # every job described


def test_the_claims_table_script_lists_each_kept_claim_from_its_latest_job(kept, smoke_run,
                                                                           tmp_path, load_script):
    """scripts/claims_table.py --kept: the H100 job (the later folder of the same minute) whose
    statuses all differ from the CPU job's gives every row, naming itself."""
    script = load_script("claims_table")
    gpu_statuses = _restatused(kept, smoke_run, "h100", tmp_path / "evidence")
    rows = script.kept_rows(PROFILE, tmp_path / "evidence")
    job = _folder(tmp_path / "evidence", smoke_run, "h100").name
    assert {r[0]: r[2] for r in rows} == gpu_statuses
    assert {r[6] for r in rows} == {job} and {r[1] for r in rows} == {NAME}
    assert script.kept_rows("paper", tmp_path / "evidence") == []


def test_a_status_judged_by_checks_changed_since_reads_stale_on_the_site_and_in_the_table(
        kept, smoke_run, tmp_path, load_script):
    """The stale rule: a kept run records a digest of the claim checks that judged each notebook
    (its experiment module, what that imports of experiments and claims, the ledger); where
    today's checks differ, or the run recorded none, its statuses read ``stale (was ...)``."""
    root = tmp_path / "evidence"
    shutil.copytree(kept, root)
    for other in root.glob("*/*-h100"):  # the CPU job alone: the latest of its profile
        shutil.rmtree(other)
    measured = _statuses(smoke_run / NAME / "claims.csv")
    run = next(r for r in evidence.kept_runs(root) if r.device == "CPU")
    claim = next(iter(measured))
    assert run.current(NAME) and run.status(NAME, claim) == measured[claim]

    # the checks change: a digest no longer today's (an edit to memorisation.py would do it)
    record_path = run.folder / evidence.PROVENANCE
    record = yaml.safe_load(record_path.read_text())
    record["checks"][NAME] = "0" * 16
    record_path.write_text(yaml.safe_dump(record, sort_keys=False))
    run = next(r for r in evidence.kept_runs(root) if r.device == "CPU")
    assert not run.current(NAME)
    assert run.status(NAME, claim) == f"stale (was {measured[claim]})"
    assert run.recorded(NAME, claim) == measured[claim]  # the record itself is untouched
    rows = {r[0]: r[2] for r in load_script("claims_table").kept_rows(PROFILE, root)}
    assert rows == {c: f"stale (was {s})" for c, s in measured.items()}
    index = build_site(smoke_run, PROFILE, [NAME], evidence=root)
    table = _tables(index)["rt-claims"]
    column = table["head"].index(f"{PROFILE} · CPU")
    assert {row[column] for row in table["rows"]} == {f"stale (was {s})" for s in measured.values()}

    # a run kept before provenance recorded its checks: nobody can tell what judged it
    del record["checks"]
    record_path.write_text(yaml.safe_dump(record, sort_keys=False))
    run = next(r for r in evidence.kept_runs(root) if r.device == "CPU")
    assert run.status(NAME, claim) == f"stale (was {measured[claim]})"


def test_the_checks_digest_follows_the_notebooks_module_its_imports_and_the_ledger(tmp_path,
                                                                                   monkeypatch):
    """An edit to the notebook's module, to a module it imports within experiments or claims, or
    to the ledger changes its digest; an edit to another notebook's module or to the site does not."""
    from rt_lib.runtime import sources

    copy = tmp_path / "rt_lib"
    shutil.copytree(sources.RT_LIB, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(evidence, "import_closure",
                        lambda entries, layers: sources.import_closure(entries, layers, copy))
    monkeypatch.setattr(evidence, "sources_digest", lambda files: sources.sources_digest(files, copy))

    def digest() -> str:
        evidence.checks_digest.cache_clear()
        return evidence.checks_digest("11_miiii_training")

    before = digest()
    for rel, bites in [("experiments/miiii_training.py", True), ("experiments/miiii_common.py", True),
                       ("claims/verdicts.py", True), ("claims/ledger.yaml", True),
                       ("experiments/tinystories.py", False), ("site/pages.py", False),
                       ("model/transformer.py", False)]:
        path = copy / rel
        text = path.read_text()
        path.write_text(text + "\n# an edit\n")
        assert (digest() != before) is bites, rel
        path.write_text(text)
    assert digest() == before
    evidence.checks_digest.cache_clear()


def test_a_notebook_page_links_its_kept_evidence_on_every_rung(kept, smoke_run, tmp_path):
    """The page of a notebook kept on two rungs links both kept notebooks, each link a file that
    exists (relative to the page); a page without kept evidence has no such line."""
    _restatused(kept, smoke_run, "h100", tmp_path / "evidence")
    index = build_site(smoke_run, PROFILE, [NAME], evidence=tmp_path / "evidence")
    page = (index.parent / f"{NAME}.html").read_text()
    hrefs = re.findall(r'<a href="([^"]+\.ipynb)" title="([^"]*)">([^<]+)</a>', page)
    assert "kept on other rungs" in page and len(hrefs) == 2
    assert [label.split(" · ")[-1] for _, _, label in hrefs] == ["CPU", "H100"]
    for href, counts, _ in hrefs:
        assert (index.parent / href).resolve().is_file(), href
        assert re.fullmatch(r"(\d+ [a-z ()]+)(, \d+ [a-z ()]+)*", counts), counts
    bare = build_site(smoke_run, PROFILE, [NAME], evidence=tmp_path / "none")
    assert "kept on other rungs" not in (bare.parent / f"{NAME}.html").read_text()
