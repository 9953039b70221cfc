"""Paths anchored on the package and atomic writes of results.

Every file under ``results/`` is written to a temporary file in the same folder and renamed into
place, so an interrupted run leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def env_threads() -> int:
    """``RT_THREADS``, torch's threads per notebook: 1 when unset; anything but a positive
    integer is a :class:`ValueError` that names it."""
    raw = os.environ.get("RT_THREADS", "").strip()
    if not raw:
        return 1
    try:
        threads = int(raw)
    except ValueError:
        threads = 0
    if threads < 1:
        raise ValueError(f"RT_THREADS must be a positive integer (torch threads per notebook), "
                         f"got {raw!r}")
    return threads


def results_root() -> Path:
    """``$RT_RESULTS`` if set, else ``results/`` beside the package (never the working dir)."""
    return Path(os.environ.get("RT_RESULTS", PROJECT_ROOT / "results"))


RESUME = "resume"  # results/<name>/resume/<run key>/: mid-run checkpoints of an unfinished run


# name -> results folder of this process's run of it: the notebook's own folder (an exploration
# run has one of its own, see rt_lib.experiments.registry) and those of the runs it reads.
FOLDERS_ENV = "RT_FOLDERS"  # set by the runner for each notebook, JSON {name: folder}
_folders: dict[str, str] = {}


def use_folder(name: str, folder: str) -> None:
    """From now on :func:`results_dir` of ``name`` is ``results/<folder>/`` in this process."""
    _folders[name] = folder


def folder_of(name: str) -> str:
    """The folder name of ``name``'s results: set here, by the runner, or the name itself."""
    if name in _folders:
        return _folders[name]
    return json.loads(os.environ.get(FOLDERS_ENV) or "{}").get(name, name)


def results_dir(name: str, create: bool = True) -> Path:
    """``results/<name>/`` (or the folder :func:`folder_of` gives), created on demand
    (``create=False`` only names it)."""
    path = results_root() / folder_of(name)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix,
                               dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600 files; results are for everyone
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)


def atomic_write_text(path: str | Path, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


# Columns that measure time: they differ on every rerun, so they are kept out of the table.
TIMING_COLUMNS = ("wall_time_s", "wall_time", "time_s", "seconds")


def save_csv(df: Any, path: str | Path) -> Path:
    """Write a DataFrame as CSV atomically (floats at full precision, no index).

    Timing columns (:data:`TIMING_COLUMNS`) are left out of ``path``, so that the same settings
    and seeds give the same bytes on every rerun; when there are any, the whole table, timings
    included, goes beside it as ``<stem>.timings.csv``."""
    path = Path(path)
    timing = [c for c in df.columns if c in TIMING_COLUMNS]
    with atomic_path(path) as tmp:
        df.drop(columns=timing).to_csv(tmp, index=False)
    if timing:
        with atomic_path(path.with_name(f"{path.stem}.timings.csv")) as tmp:
            df.to_csv(tmp, index=False)
    return path


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Save a matplotlib figure atomically; PNG metadata carries no timestamp or version."""
    path = Path(path)
    fmt = path.suffix.lstrip(".") or "png"
    import matplotlib

    # No dates, versions or random ids: the same figure gives the same bytes on every rerun.
    metadata = {"png": {"Software": None},
                "pdf": {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None},
                "svg": {"Date": None, "Creator": None}}.get(fmt)
    with atomic_path(path) as tmp, matplotlib.rc_context({"svg.hashsalt": "rt-companion"}):
        fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight", metadata=metadata)
    return path


class CorruptFileError(ValueError):
    """A saved file whose bytes no longer match the sha256 recorded when it was written."""


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def checksum_path(path: str | Path) -> Path:
    return Path(f"{path}.sha256")


def atomic_save_torch(obj: Any, path: str | Path) -> Path:
    """``torch.save`` atomically, and the file's sha256 beside it (``<path>.sha256``), which
    :func:`load_torch` checks: a checkpoint damaged on disk is detected, never silently used."""
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)
        digest = sha256_file(tmp)
    atomic_write_text(checksum_path(path), digest + "\n")
    return Path(path)


def load_torch(path: str | Path, map_location: Any = "cpu") -> Any:
    """Load a file :func:`atomic_save_torch` wrote, after checking its sha256; raises
    :class:`CorruptFileError` when it does not match or was never recorded."""
    import torch

    path = Path(path)
    recorded = checksum_path(path)
    if not recorded.exists():
        raise CorruptFileError(f"{path}: no recorded sha256 ({recorded.name}); cannot be trusted")
    if sha256_file(path) != recorded.read_text().strip():
        raise CorruptFileError(f"{path}: contents do not match the sha256 recorded when saved")
    return torch.load(path, map_location=map_location, weights_only=False)
