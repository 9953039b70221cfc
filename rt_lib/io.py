"""Paths anchored on the package and atomic writes of results.

Every file under ``results/`` is written to a temporary file in the same folder and renamed into
place, so an interrupted run leaves either the old file or the new one, never half of one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def results_root() -> Path:
    """``$RT_RESULTS`` if set, else ``results/`` beside the package (never the working dir)."""
    return Path(os.environ.get("RT_RESULTS", PROJECT_ROOT / "results"))


def results_dir(name: str, create: bool = True) -> Path:
    """``results/<name>/``, created on demand (``create=False`` only names it)."""
    path = results_root() / name
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


def save_csv(df: Any, path: str | Path) -> Path:
    """Write a DataFrame as CSV atomically (floats at full precision, no index)."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False)
    return Path(path)


def save_figure(fig: Any, path: str | Path, dpi: int = 120) -> Path:
    """Save a matplotlib figure atomically; PNG metadata carries no timestamp or version."""
    path = Path(path)
    fmt = path.suffix.lstrip(".") or "png"
    metadata = {"Software": None} if fmt == "png" else None
    if fmt == "pdf":
        metadata = {"CreationDate": None, "ModDate": None, "Producer": None, "Creator": None}
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight", metadata=metadata)
    return path


def atomic_save_torch(obj: Any, path: str | Path) -> Path:
    import torch

    with atomic_path(path) as tmp:
        torch.save(obj, tmp)
    return Path(path)
