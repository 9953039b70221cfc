"""Evidence: a finished run of a profile kept in the repository, with where and how it ran.

``results/`` is not committed: a GPU run of the paper (or any other) profile is gone with the
machine it ran on.  ``python -m rt_lib.site.evidence keep --profile paper`` keeps what a reader needs
to check its claims, under ``evidence/<profile>/<YYYY-MM-DD>T<HHMM>-<device>/`` (committed; the minute its last notebook
finished, so each job's run keeps its own folder):

* per notebook (``<NN_name>/``): the executed notebook, ``claims.csv``, ``parameters.yaml``
  (exploration runs only write one) and the figures (PNG); no checkpoints, models, databases or
  other data: the folder must stay small (at most :data:`MAX_MIB`, ``--max-mib``);
* ``provenance.yaml``: the device (GPU from torch, else the CPU model), torch, CUDA and Python
  versions, the git commit the run was made at (and whether the tree was dirty), the date it
  finished, each notebook's wall time (from the run's manifest), the command that made it.

Only a finished run is kept: every notebook folder of the profile's own run must have its entry
in the manifest (none failed, none interrupted; a folder holding only training runs that a
notebook of the run trained for itself is not one: :func:`runs_only`) and every kept file must
still match the sha256 the manifest recorded when the run finished.  An existing evidence folder is never overwritten
without ``--replace``.  :func:`kept_runs` reads the kept runs back; the site
(:mod:`rt_lib.site.pages`) shows each as a column of its claims table.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from rt_lib.claims import ledger as claims
from rt_lib.experiment import PARAMETERS_FILE
from rt_lib.runtime.context import DEFAULT_PROFILE, SMOKE, available_profiles
from rt_lib.runtime.io import (
    PROJECT_ROOT,
    RESUME,
    DamagedFileError,
    atomic_write_text,
    available_notebooks,
    profile_options,
    read_yaml_result,
    results_root,
    sha256_file,
    shown,
)
from rt_lib.runtime.manifest import FILENAME as MANIFEST
from rt_lib.runtime.manifest import Entry, Manifest, describe, versions
from rt_lib.runtime.sources import import_closure, sources_digest

EVIDENCE_DIR = PROJECT_ROOT / "evidence"  # committed, beside results/ (which is not)
PROVENANCE = "provenance.yaml"
FORMAT = 1  # of provenance.yaml; bumped when its layout changes
MAX_MIB = 20.0  # per kept run: the repository carries every one of them for good
_NOTEBOOK_FOLDER = re.compile(r"\d\d_[^+]+")  # a profile's own run; "+" marks an exploration
#: The layers whose code turns a run's numbers into its claims' statuses: the notebook's
#: experiment module and what it imports there, the claims' verdicts and ledger.
CHECK_LAYERS = ("experiments", "experiment", "claims")
#: What a kept status reads when the checks that judged it have changed since: it is history,
#: not evidence of today's claim, until the notebook runs again (``stale (was holds)``).
STALE = "stale"
METRICS = "metrics.csv"  # each notebook's final numbers per run, kept beside its claims


class EvidenceError(ValueError):
    """A run that cannot be kept (missing, unfinished, too large, already kept)."""


@cache
def checks_digest(notebook: str) -> str:
    """A digest of the code that judges ``notebook``'s claims today: its experiment module
    (rt_lib/experiments/<name without its number>.py) and the modules it imports within
    :data:`CHECK_LAYERS`, and the ledger.  Kept with each notebook of a kept run (provenance
    ``checks``): a kept status judged by other checks reads :data:`STALE`."""
    module = f"rt_lib.experiments.{notebook.split('_', 1)[1]}"
    sources = import_closure([module], CHECK_LAYERS) + ("claims/ledger.yaml",)
    return sources_digest(sources)[:16]


@dataclass(frozen=True)
class Device:
    kind: str  # "gpu" or "cpu"
    name: str  # "NVIDIA H100 80GB HBM3", or the CPU (rt_lib.site.evidence.cpu_name)
    slug: str  # the evidence folder's suffix: "h100", "2xh100", "cpu"
    count: int = 1  # GPUs seen by torch (1 for a CPU)
    detected: bool = True  # False: given with --device (kept on another machine than the run)


def gpu_slug(name: str, count: int = 1) -> str:
    """A GPU's short name for a folder: its first word with a digit ("NVIDIA H100 80GB HBM3" ->
    ``h100``, "NVIDIA A100-SXM4-40GB" -> ``a100``), ``2xh100`` for two."""
    words = [w for w in re.split(r"[\s_-]+", name) if w.lower() not in {"nvidia", "geforce",
                                                                        "tesla", "amd", "radeon"}]
    model = next((w for w in words if re.search(r"\d", w)), "gpu")
    slug = re.sub(r"[^a-z0-9]", "", model.lower()) or "gpu"
    return f"{count}x{slug}" if count > 1 else slug


def cpu_name() -> str:
    """The CPU as the platform and torch describe it: its architecture and the vector kernels torch
    runs on it (``x86_64 CPU (AVX2)``), what the CPU profile's numbers depend on
    (scripts/kernel_env.sh); ``--device`` names a machine more exactly."""
    import torch

    return f"{platform.machine() or 'unknown'} CPU ({torch.backends.cpu.get_cpu_capability()})"


def this_device() -> Device:
    """The device of this machine: its GPU(s) as torch sees them, else its CPU."""
    import torch

    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        name = torch.cuda.get_device_name(0)
        return Device("gpu", name, gpu_slug(name, count), count)
    return Device("cpu", cpu_name(), "cpu")


def named_device(name: str) -> Device:
    """``--device NAME``: the device a run kept on another machine ran on ("cpu" or the GPU's
    name as torch gives it)."""
    if name.strip().lower() == "cpu":
        return Device("cpu", cpu_name(), "cpu", detected=False)
    return Device("gpu", name.strip(), gpu_slug(name), detected=False)


def profile_results(profile: str, results: Path | None = None) -> Path:
    """The folder of ``profile``'s finished run: ``results`` as given (the folder holding its
    manifest, or a results root holding ``<profile>/``), else ``$RT_RESULTS`` or ``results/``
    with ``<profile>/`` below it (the CPU profile's run is the root itself)."""
    if results is not None:
        results = Path(results)
        if not (results / MANIFEST).exists() and (results / profile / MANIFEST).exists():
            return results / profile
        return results
    root = results_root()
    return root if profile == DEFAULT_PROFILE else root / profile


def _check_profile(profile: str) -> None:
    # Also keeps a path out of the folder name (the profile is one of its parts).
    known = available_profiles() + [p + SMOKE for p in available_profiles()
                                    if p != DEFAULT_PROFILE]
    if profile not in known:
        raise EvidenceError(f"--profile: no profile {profile!r}; known: {', '.join(known)}")


def finished_entries(root: Path, profile: str) -> dict[str, Entry]:
    """{notebook: its manifest entry} of the profile's own run under ``root``; refuses (naming
    the folder or file) a run that is missing, has a notebook that failed or did not finish, or
    a manifest that does not read."""
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise EvidenceError(f"no finished run of the {profile} profile: {shown(manifest_path)} "
                            f"does not exist (run ./run_all.sh{profile_options(profile)} "
                            "first, or name the run's folder with --results)")
    manifest = Manifest(root)
    if manifest.problems:
        raise EvidenceError(f"the {profile} profile's manifest does not read: "
                            + "; ".join(manifest.problems))
    entries = {name: e for name, e in manifest.entries.items()
               if _NOTEBOOK_FOLDER.fullmatch(name)}
    if not entries:
        raise EvidenceError(f"{shown(manifest_path)} records no finished notebook of the "
                            f"{profile} profile")
    other = sorted({e.profile for e in entries.values()} - {profile})
    if other:
        raise EvidenceError(f"{shown(manifest_path)} records runs of the {', '.join(other)} "
                            f"profile, not {profile}: --profile or --results is wrong")
    unfinished = []
    for folder in sorted(p for p in root.glob("[0-9][0-9]_*") if p.is_dir()
                         and _NOTEBOOK_FOLDER.fullmatch(p.name)):
        name = folder.name
        failed = folder / f"{name}.failed.ipynb"
        if failed.exists():
            unfinished.append(f"{name} failed (its notebook with the error: {shown(failed)})")
        elif name not in entries and runs_only(folder):
            continue  # a reader's training runs, where their own notebook finds them: not kept
        elif name not in entries:
            unfinished.append(f"{name} did not finish (no entry in {MANIFEST})")
        elif not (folder / f"{name}.ipynb").is_file():
            unfinished.append(f"{name}: its executed notebook {shown(folder / (name + '.ipynb'))}"
                              " is missing")
    for name in sorted(set(entries) - {p.name for p in root.iterdir()}):
        unfinished.append(f"{name}: its folder {shown(root / name)} is missing")
    if unfinished:
        raise EvidenceError(f"the {profile} profile's run in {shown(root)} is not a finished "
                            "run; rerun what failed, then keep it: " + "; ".join(unfinished))
    return dict(sorted(entries.items()))


def runs_only(folder: Path) -> bool:
    """Whether ``folder`` holds training runs and nothing else (``runs/``, each run a folder):
    what a reader kept alone trains where the notebook of those runs finds them (notebook 15's
    trained baseline is notebook 11's T_miiii, in ``11_miiii_training/runs/``), not a notebook
    that started and did not finish (that leaves its notebook, figures or tables too)."""
    inside = list(folder.iterdir())
    return bool(inside) and all(p.name == "runs" and p.is_dir() for p in inside)


def kept_files(folder: Path) -> list[Path]:
    """What is kept of one notebook's folder: the executed notebook, ``claims.csv``,
    ``parameters.yaml``, ``metrics.csv`` (the final numbers its claims were judged from) and the
    figures (PNG, also in subfolders but for mid-run checkpoints); checkpoints, models, databases
    and other tables of data stay out."""
    name = folder.name
    wanted = [folder / f"{name}.ipynb", folder / claims.FILENAME, folder / PARAMETERS_FILE,
              folder / METRICS]
    figures = sorted(p for p in folder.rglob("*.png")
                     if p.is_file() and RESUME not in p.relative_to(folder).parts)
    return [p for p in wanted if p.is_file()] + figures


def _verified(root: Path, entries: dict[str, Entry]) -> dict[Path, int]:
    """{file to keep: bytes}, each checked against the sha256 its run recorded: the evidence
    is what the run made, not a file changed since."""
    out: dict[Path, int] = {}
    changed = []
    for name, entry in entries.items():
        for path in kept_files(root / name):
            rel = str(path.relative_to(root))
            recorded = entry.files.get(rel)
            if recorded is None:
                changed.append(f"{shown(path)} is not in the run's record ({MANIFEST})")
            elif sha256_file(path) != recorded["sha256"]:
                changed.append(f"{shown(path)} changed since the run finished (its sha256 "
                               f"differs from {MANIFEST}'s)")
            else:
                out[path] = path.stat().st_size
    if changed:
        raise EvidenceError("the run's files are not as it left them: " + "; ".join(changed))
    return out


def _check_size(files: dict[Path, int], root: Path, max_mib: float) -> None:
    total = sum(files.values())
    if total > max_mib * 2**20:
        largest = sorted(files.items(), key=lambda kv: -kv[1])[:5]
        raise EvidenceError(
            f"the evidence of {shown(root)} would take {total / 2**20:.1f} MiB, over the limit "
            f"of {max_mib:g} MiB (--max-mib); largest: "
            + ", ".join(f"{p.relative_to(root)} ({n / 2**20:.2f} MiB)" for p, n in largest))


def _commit(entries: dict[str, Entry]) -> tuple[str, bool]:
    """(commit, dirty) of the run: the last notebook's (each notebook's is in provenance)."""
    last = max(entries.values(), key=lambda e: e.finished)
    head, _, flag = last.commit.partition("+")
    return head, flag == "dirty" or any(e.commit.endswith("+dirty") for e in entries.values())


def job_stamp(entries: dict[str, Entry]) -> str:
    """``2026-11-27T1201``: when the run's last notebook finished (UTC), to the minute: a kept
    folder per job, so chunks of one profile run on the same day keep apart."""
    last = max(e.finished for e in entries.values())
    return f"{last[:10]}T{last[11:13]}{last[14:16]}"


def default_command(profile: str, names: list[str]) -> str:
    """The ``./run_all.sh`` command that makes this run (its notebooks by number when not all)."""
    command = "./run_all.sh" + profile_options(profile)
    if sorted(names) != sorted(available_notebooks()):
        command += " --only " + ",".join(n[:2] for n in names)
    return command


def provenance(profile: str, entries: dict[str, Entry], device: Device, command: str | None,
               source: Path) -> dict[str, Any]:
    """The record written as ``provenance.yaml`` (files are added once copied)."""
    import torch

    commit, dirty = _commit(entries)
    return {
        "format": FORMAT,
        "profile": profile,
        "date": max(e.finished for e in entries.values())[:10],  # the day the run finished
        "device": {"kind": device.kind, "name": device.name, "slug": device.slug,
                   "count": device.count, "detected": device.detected},
        "torch": versions()["torch"],
        "cuda": torch.version.cuda,  # None for a CPU build of torch
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit,
        "dirty": dirty,
        "command": command or default_command(profile, list(entries)),
        "command_given": command is not None,  # False: rebuilt from the profile and notebooks
        "wall_seconds": round(sum(e.wall_seconds for e in entries.values()), 2),
        "notebooks": {name: {"wall_seconds": e.wall_seconds, "finished": e.finished,
                             "commit": e.commit} for name, e in entries.items()},
        # the claim checks that judged each notebook (kept right after its run, as gpu_run.sh
        # and the long chunks do): where today's differ, its statuses read stale
        "checks": {name: checks_digest(name) for name in entries},
        "kept": {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "from": shown(source)},
    }


def keep(profile: str, results: Path | None = None, evidence_dir: Path | None = None,
         command: str | None = None, device: Device | None = None, max_mib: float = MAX_MIB,
         replace: bool = False, removed: list[Path] | None = None) -> Path:
    """Keep ``profile``'s finished run as evidence (see the module docstring); returns the new
    folder, ``<evidence_dir>/<profile>/<date>T<HHMM>-<device slug>/``.

    ``replace``: the new folder supersedes the run kept already of the same notebooks on the
    same device, whichever minute it finished (a chunk judged again keeps one folder; git keeps
    the old one), and overwrites a folder of its own name; the folders it removed are appended
    to ``removed``.  Without it, an existing folder of its name is refused and earlier keeps of
    the same chunk stay beside it."""
    _check_profile(profile)
    root = profile_results(profile, results)
    entries = finished_entries(root, profile)
    files = _verified(root, entries)
    _check_size(files, root, max_mib)
    record = provenance(profile, entries, device or this_device(), command, root)
    parent = Path(evidence_dir or EVIDENCE_DIR) / profile
    target = parent / f"{job_stamp(entries)}-{record['device']['slug']}"
    if target.exists() and not replace:
        raise EvidenceError(f"{shown(target)} exists already (a run finished the same minute on "
                            "the same device): --replace overwrites it")
    parent.mkdir(parents=True, exist_ok=True)
    earlier = same_chunk(parent, record, target) if replace else []
    # Copied beside the target and renamed into place: an interrupted keep leaves no half folder.
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent))
    try:
        for path in files:
            dest = staging / path.relative_to(root)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest)
        record["files"] = describe(staging, staging)
        atomic_write_text(staging / PROVENANCE,
                          yaml.safe_dump(record, sort_keys=False, allow_unicode=True))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes it 0700; evidence is for everyone
        if target.exists():
            old = target.with_name(f".{target.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            target.rename(old)
            staging.rename(target)
            shutil.rmtree(old)
        else:
            staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for folder in earlier:  # only once the new one is in place
        shutil.rmtree(folder)
        if removed is not None:
            removed.append(folder)
    return target


def same_chunk(parent: Path, record: dict[str, Any], target: Path) -> list[Path]:
    """The kept folders under ``parent`` other than ``target`` whose provenance names the same
    notebooks on the same device as ``record``: what a re-keep of that chunk supersedes."""
    out = []
    for folder in sorted(parent.iterdir()):
        prov = folder / PROVENANCE
        if folder == target or folder.name.startswith(".") or not prov.is_file():
            continue
        try:
            old = yaml.safe_load(prov.read_text()) or {}
        except yaml.YAMLError:
            continue  # not ours to judge: left alone
        if (set(old.get("notebooks") or {}) == set(record["notebooks"])
                and (old.get("device") or {}).get("slug") == record["device"]["slug"]):
            out.append(folder)
    return out


@dataclass
class KeptRun:
    """One kept evidence run, as :func:`kept_runs` reads it."""

    folder: Path  # evidence/<profile>/<date>T<HHMM>-<device>/
    provenance: dict[str, Any]
    claims: dict[str, pd.DataFrame] = field(default_factory=dict)  # notebook -> its claims

    @property
    def profile(self) -> str:
        return str(self.provenance.get("profile", self.folder.parent.name))

    @property
    def device(self) -> str:
        """The device's short name, ``CPU`` or its slug in capitals (``H100``)."""
        slug = str((self.provenance.get("device") or {}).get("slug", "?"))
        return "CPU" if slug == "cpu" else slug.upper()

    @property
    def rung(self) -> str:
        """The site's column of the run: its profile and device, ``gpu · H100`` (every job of
        the same rung shares it; a claim shows the latest job's status)."""
        return f"{self.profile} · {self.device}"

    @property
    def label(self) -> str:
        """The run's own header: its rung with its date, ``paper · 2026-11-27 · H100``."""
        return f"{self.profile} · {self.provenance.get('date', '?')} · {self.device}"

    @property
    def device_name(self) -> str:
        return str((self.provenance.get("device") or {}).get("name", "?"))

    @property
    def commit(self) -> str:
        """The run's commit, short, with ``(dirty)`` when the tree differed from it."""
        return (str(self.provenance.get("commit", "?"))[:10]
                + (" (dirty)" if self.provenance.get("dirty") else ""))

    def current(self, notebook: str) -> bool:
        """Whether ``notebook``'s claims were judged by today's checks (:func:`checks_digest`);
        a run kept before provenance recorded them (no ``checks``) was not, as far as anyone
        can tell."""
        recorded = (self.provenance.get("checks") or {}).get(notebook)
        return recorded is not None and recorded == checks_digest(notebook)

    def recorded(self, notebook: str, claim: str) -> str | None:
        """The claim's status as the run recorded it; None where it did not."""
        table = self.claims.get(notebook)
        if table is None:
            return None
        match = table.loc[table["id"] == claim, "status"]
        return str(match.iloc[0]) if len(match) else None

    def task(self, notebook: str, claim: str) -> str:
        """On what task the run measured the claim: ``paper``, ``reduced: <how>``, or "" where its
        claims file does not say (kept before claims carried ``task_size``)."""
        table = self.claims.get(notebook)
        if table is None or "task_size" not in table:
            return ""
        match = table.loc[table["id"] == claim]
        if not len(match):
            return ""
        size = str(match["task_size"].iloc[0])
        reduction = str(match["reduction"].iloc[0]) if "reduction" in match else ""
        return (f"reduced: {reduction}" if size == "reduced" and reduction not in ("", "nan")
                else size if size in ("paper", "reduced") else "")

    def status(self, notebook: str, claim: str) -> str | None:
        """The claim's status in this run, ``stale (was holds)`` where the checks that judged it
        have changed since (:meth:`current`); None where the run did not record it."""
        found = self.recorded(notebook, claim)
        if found is None or self.current(notebook):
            return found
        return f"{STALE} (was {found})"


def read_kept(folder: Path) -> KeptRun:
    """One kept run: its provenance and the claims of each notebook; a damaged file raises
    :class:`~rt_lib.runtime.io.DamagedFileError` naming it."""
    try:
        record = read_yaml_result(folder / PROVENANCE)
        run = KeptRun(folder, record)
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()
                          and _NOTEBOOK_FOLDER.fullmatch(p.name)):
            table = claims.read(sub)
            if table is not None:
                run.claims[sub.name] = table
    except DamagedFileError as err:
        # The rerun it names is one way; the committed copy is the other.
        raise DamagedFileError(f"kept evidence: {err}; or restore the committed copy with "
                               f"git checkout -- {shown(folder)}") from err
    return run


def kept_runs(evidence_root: Path | None = None,
              problems: list[str] | None = None) -> list[KeptRun]:
    """Every kept run under ``evidence_root`` (default ``evidence/``), by profile then date;
    none when there is no such folder.  A run with a damaged file raises, or with ``problems``
    given is left out and its error appended there (one damaged run hides no other)."""
    root = Path(evidence_root or EVIDENCE_DIR)
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.glob(f"*/*/{PROVENANCE}")):
        try:
            out.append(read_kept(folder.parent))
        except DamagedFileError as err:
            if problems is None:
                raise
            problems.append(str(err))
    return out


def oldest_first(runs: Iterable[KeptRun]) -> list[KeptRun]:
    """Kept runs by their provenance's date, then folder name (date, time, device): a later job
    of the same rung comes after, and its statuses win."""
    return sorted(runs, key=lambda r: (str(r.provenance.get("date", "")), r.folder.name))


def check_kept(folder: Path, max_mib: float = MAX_MIB) -> KeptRun:
    """A kept run as it arrived from elsewhere: its provenance names a known profile and every
    file it lists, each with the sha256 and size it has, no other file beside them, the whole
    within ``max_mib``, and its claims read (:func:`read_kept`); else :class:`EvidenceError`."""
    run = read_kept(folder)
    record = run.provenance
    if record.get("format") != FORMAT:
        raise EvidenceError(f"{shown(folder)}: provenance format {record.get('format')!r}, "
                            f"this code reads {FORMAT}")
    _check_profile(str(record.get("profile")))
    listed = record.get("files") or {}
    present = {str(p.relative_to(folder)) for p in folder.rglob("*")
               if p.is_file() and p.name != PROVENANCE}
    problems = [f"{rel} is missing" for rel in sorted(set(listed) - present)]
    problems += [f"{rel} is not in its provenance" for rel in sorted(present - set(listed))]
    for rel in sorted(set(listed) & present):
        info, path = listed[rel], folder / rel
        if path.stat().st_size != info.get("bytes") or sha256_file(path) != info.get("sha256"):
            problems.append(f"{rel} does not match the sha256 its provenance records")
    if problems:
        raise EvidenceError(f"{shown(folder)} is not as its run kept it: " + "; ".join(problems))
    _check_size({folder / rel: int(listed[rel]["bytes"]) for rel in listed}, folder, max_mib)
    return run


def import_packed(tarball: Path, evidence_dir: Path | None = None, max_mib: float = MAX_MIB,
                  replace: bool = False) -> list[Path]:
    """Add the kept runs of a packed evidence tarball (scripts/gpu_run.sh's evidence.tgz, laid
    out ``<profile>/<run>/``) under ``evidence_dir`` after :func:`check_kept`; returns their
    folders.  Nothing is added unless every run in it checks."""
    import tarfile

    root = Path(evidence_dir or EVIDENCE_DIR)
    with tempfile.TemporaryDirectory(prefix=".import.", dir=_mkdir(root)) as tmp:
        try:
            with tarfile.open(tarball) as tar:
                tar.extractall(tmp, filter="data")  # no absolute paths, no links out, no devices
        except (OSError, tarfile.TarError) as err:
            raise EvidenceError(f"{shown(tarball)} does not read as a tarball ({err})") from None
        found = sorted(p.parent for p in Path(tmp).glob(f"*/*/{PROVENANCE}"))
        if not found:
            raise EvidenceError(f"{shown(tarball)} holds no kept run (<profile>/<run>/"
                                f"{PROVENANCE})")
        targets = []
        for folder in found:
            check_kept(folder, max_mib)
            target = root / folder.parent.name / folder.name
            if target.exists() and not replace:
                raise EvidenceError(f"{shown(target)} exists already: --replace overwrites it")
            targets.append((folder, target))
        for folder, target in targets:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():
                shutil.rmtree(target)
            folder.rename(target)
    return [t for _, t in targets]


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def known_commit(commit: str, repo: Path = PROJECT_ROOT) -> bool:
    """Whether ``commit`` names a commit of the project's repository (True where there is no
    repository to ask: nothing to check against)."""
    import subprocess

    if not (repo / ".git").exists():
        return True
    if not commit or commit == "unknown":
        return False
    try:
        return subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=repo,
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rt_lib.site.evidence",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    kp = sub.add_parser("keep", help="keep a profile's finished run under evidence/")
    kp.add_argument("--profile", required=True,
                    help="the run's profile, e.g. paper (paper-smoke for a smoke run)")
    kp.add_argument("--results", type=Path, metavar="DIR",
                    help="the run's folder (default: results/<profile>/, under $RT_RESULTS "
                         "when set)")
    kp.add_argument("--command", help="the command that made the run (default: the "
                                      "./run_all.sh command of the profile and its notebooks)")
    kp.add_argument("--device", metavar="NAME",
                    help="the GPU the run ran on, as torch names it, or cpu: when it is kept "
                         "on another machine (default: this machine's)")
    kp.add_argument("--evidence-dir", type=Path, metavar="DIR",
                    help="where evidence is kept (default: evidence/ in the project)")
    kp.add_argument("--max-mib", type=float, default=MAX_MIB,
                    help=f"refuse a folder larger than this (default {MAX_MIB:g})")
    kp.add_argument("--replace", action="store_true",
                    help="supersede the run kept already of the same notebooks on the same "
                         "device (its folder is removed; git keeps it)")
    ip = sub.add_parser("import", help="add the kept runs of a packed evidence tarball "
                                       "(scripts/gpu_run.sh's evidence.tgz) under evidence/")
    ip.add_argument("tarball", type=Path)
    ip.add_argument("--evidence-dir", type=Path, metavar="DIR",
                    help="where evidence is kept (default: evidence/ in the project)")
    ip.add_argument("--max-mib", type=float, default=MAX_MIB,
                    help=f"refuse a run larger than this (default {MAX_MIB:g})")
    ip.add_argument("--replace", action="store_true", help="overwrite a run kept already")
    args = parser.parse_args(argv)
    if args.max_mib <= 0:
        parser.error(f"--max-mib must be positive, got {args.max_mib:g}")
    if args.action == "import":
        try:
            added = import_packed(args.tarball, args.evidence_dir, args.max_mib, args.replace)
        except (EvidenceError, DamagedFileError) as err:
            print(f"rt_lib.site.evidence: error: {err}", file=sys.stderr)
            return 2
        for target in added:
            run = read_kept(target)
            print(f"imported {shown(target)}: {run.label}, commit {run.commit}, "
                  f"{len(run.claims)} notebook(s); commit it with git add {shown(target)}")
            commit = str(run.provenance.get("commit", "")).partition("+")[0]
            if not known_commit(commit):
                print(f"rt_lib.site.evidence: warning: {shown(target)} names commit "
                      f"{commit or 'none'}, which is not in this repository: its provenance may "
                      "name another repository's HEAD (check scripts/gpu_bundle.sh's COMMIT)",
                      file=sys.stderr)
        return 0
    removed: list[Path] = []
    try:
        target = keep(args.profile, args.results, args.evidence_dir, args.command,
                      named_device(args.device) if args.device else None, args.max_mib,
                      args.replace, removed)
    except (EvidenceError, DamagedFileError) as err:
        print(f"rt_lib.site.evidence: error: {err}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
    for folder in removed:
        print(f"removed {shown(folder)}: the same notebooks on the same device, superseded "
              "(--replace; git keeps it)")
    print(f"kept {shown(target)} ({size / 2**20:.1f} MiB); commit it with git add "
          f"{shown(target)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
