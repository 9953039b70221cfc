"""``results/manifest.json``: what each notebook's results were made from, so a re-run of
``./run_all.sh`` skips the notebooks that are up to date and reruns the rest.

Per notebook it records a *content key*: the sha256 of the notebook's cell sources (outputs
excluded), the profile and injected parameters, every ``rt_lib`` source file, the torch and Python
versions, the environment settings that change numbers (``RT_THREADS``, ``RT_TINYSTORIES``) and
the keys of the notebooks whose results it reads; and every file the notebook left under
``results/<name>/`` with its sha256, with the run's wall time and git commit.  A notebook is up
to date when its key matches and every recorded file still has its hash.

Every entry also carries the sha256 of its own content: an entry that does not match it, or a
manifest that does not parse, is reported and dropped (its notebook reruns), never used.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import time
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from rt_lib.runtime.fingerprint import this_platform
from rt_lib.runtime.io import PROJECT_ROOT, atomic_write_text, sha256_file

FILENAME = "manifest.json"
FORMAT = 1  # bumped when the layout changes: older manifests are then rebuilt
ENV_KEYS = ("RT_THREADS", "RT_TINYSTORIES")  # settings outside the parameters that change results


def _sha256_json(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


@cache
def library_digest() -> str:
    """sha256 over every ``rt_lib`` source file (path and bytes)."""
    h = hashlib.sha256()
    root = PROJECT_ROOT / "rt_lib"
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def notebook_digest(path: Path) -> str:
    """sha256 of a notebook's cells (type and source): outputs and metadata do not count."""
    cells = json.loads(Path(path).read_text())["cells"]
    return _sha256_json([(c["cell_type"], "".join(c["source"])) for c in cells])


@cache
def versions() -> dict[str, str]:
    return {"python": platform.python_version(), "torch": metadata.version("torch")}


def content_key(notebook: Path, profile: str, parameters: dict,
                reads: dict[str, str | None]) -> str:
    """The key a notebook's results are valid for (see the module docstring)."""
    return _sha256_json({
        "notebook": notebook_digest(notebook), "profile": profile, "parameters": parameters,
        "rt_lib": library_digest(), **versions(),
        "env": {k: os.environ.get(k) for k in ENV_KEYS}, "reads": reads,
    })


#: Where a copy without ``.git`` (a GPU job's) says which commit it is: written with the bundle.
SOURCE_COMMIT_ENV = "RT_SOURCE_COMMIT"


@cache
def git_commit() -> str:
    """:func:`head_commit`, read once per process."""
    return head_commit()


def head_commit() -> str:
    """HEAD's hash, ``+dirty`` when tracked files differ from it, read now.  ``$RT_SOURCE_COMMIT`` comes
    first when set: scripts/gpu_run.sh sets it from the bundle's ``COMMIT``, written where the
    code was committed, while the copy a GPU job runs in may carry no ``.git`` or a stale one.
    Without either, ``unknown``."""
    if named := os.environ.get(SOURCE_COMMIT_ENV, "").strip():
        return named

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], capture_output=True,
                              text=True, check=True, timeout=30).stdout.strip()
    try:
        head = git("rev-parse", "HEAD")
        return head + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def is_temporary(path: Path) -> bool:
    """A file :func:`rt_lib.runtime.io.atomic_path` writes before renaming it into place."""
    return path.name.startswith(".") and ".tmp" in path.name


def output_files(folder: Path) -> list[Path]:
    """The results a notebook left in ``folder``: every file, minus temporaries and failures."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and not is_temporary(p)
                  and not p.name.endswith(".failed.ipynb"))


@dataclass
class Entry:
    key: str
    profile: str
    parameters: dict
    commit: str
    wall_seconds: float
    finished: str  # UTC, ISO 8601
    files: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> sha256, bytes
    # the numeric platform it ran on (rt_lib.runtime.fingerprint); {} in entries written before it was
    platform: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        fields = asdict(self)
        if not fields["platform"]:  # an entry from before the field keeps its hash
            del fields["platform"]
        return _sha256_json(fields)


def describe(folder: Path, root: Path) -> dict[str, dict[str, Any]]:
    """{path relative to ``root``: {"sha256", "bytes"}} for every output file under ``folder``."""
    return {str(p.relative_to(root)): {"sha256": sha256_file(p), "bytes": p.stat().st_size}
            for p in output_files(folder)}


class Manifest:
    """The manifest of one results root (``results/`` or ``results/<profile>/``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.path = self.root / FILENAME
        self.entries: dict[str, Entry] = {}
        self.problems: list[str] = []  # what was wrong with the file on disk, and dropped
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text())
            if data.get("format") != FORMAT:
                raise ValueError(f"format {data.get('format')!r}, expected {FORMAT}")
            raw = data["notebooks"]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
            self.problems.append(f"{self.path} is unreadable ({err}): rebuilt, every notebook "
                                 "reruns")
            return
        for name, item in raw.items():
            try:
                stored = item.pop("sha256")
                entry = Entry(**item)
                ok = entry.digest() == stored
            except (TypeError, AttributeError, KeyError):
                ok = False
            if ok:
                self.entries[name] = entry
            else:
                self.problems.append(f"{self.path}: the entry of {name} does not match its hash: "
                                     "dropped, the notebook reruns")

    def save(self) -> None:
        notebooks = {name: {**asdict(e), "sha256": e.digest()}
                     for name, e in sorted(self.entries.items())}
        atomic_write_text(self.path, json.dumps({"format": FORMAT, "notebooks": notebooks},
                                                indent=1, sort_keys=True) + "\n")

    def stale_reason(self, name: str, key: str) -> str | None:
        """None if ``name``'s results are up to date for ``key``; else why not."""
        entry = self.entries.get(name)
        if entry is None:
            return "not run yet"
        if entry.key != key:
            return "its inputs changed"
        return self.files_problem(name)

    def files_problem(self, name: str) -> str | None:
        """None if every file ``name``'s entry records is on disk as recorded (or it has no
        entry); else which one is not."""
        entry = self.entries.get(name)
        for rel, info in (entry.files.items() if entry is not None else ()):
            path = self.root / rel
            if not path.is_file():
                return f"{rel} is missing"
            if path.stat().st_size != info["bytes"] or sha256_file(path) != info["sha256"]:
                return f"{rel} does not match its recorded hash"
        return None

    def forget(self, name: str) -> None:
        """Drop an entry before its notebook reruns: an interrupted rerun is then never current."""
        if self.entries.pop(name, None) is not None:
            self.save()

    def record(self, name: str, key: str, profile: str, parameters: dict, folder: Path,
               wall_seconds: float, commit: str | None = None) -> Entry:
        """Record ``name``'s finished run; ``commit``: the code it ran (:func:`head_commit` at
        its start, which its kernel imported), else this process's :func:`git_commit`."""
        entry = Entry(key=key, profile=profile, parameters=parameters, commit=commit or git_commit(),
                      wall_seconds=round(wall_seconds, 2),
                      finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      files=describe(folder, self.root), platform=this_platform())
        self.entries[name] = entry
        self.save()
        return entry
