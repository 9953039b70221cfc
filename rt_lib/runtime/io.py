"""Paths anchored on the package, atomic writes of results, and checked reads of them.

Every file under ``results/`` is written to a temporary file in the same folder and renamed into
place, so an interrupted run leaves either the old file or the new one, never half of one.  A
write that fails (a full disk, a read-only or protected folder) raises :class:`WriteFailedError`
naming the file and the cause, with the previous version of the file as it was and no temporary
left.  A notebook's result that another notebook reads goes through :func:`read_result` (or
:func:`read_csv_result`, :func:`read_yaml_result`): a file cut short or malformed raises
:class:`DamagedFileError` naming it and the ``./run_all.sh`` command that writes it again.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import io
import os
import pickle
import re
import tempfile
import types
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rt_lib.runtime import context
from rt_lib.runtime.context import DEFAULT_PROFILE, PROJECT_ROOT, available_profiles, base_profile, is_smoke


def results_root() -> Path:
    """Where the notebooks' results folders are: the run context's (``results/[<profile>/]``),
    else ``$RT_RESULTS`` or ``results/`` beside the package (never the working dir)."""
    return context.current().results_root


RESUME = "resume"  # results/<name>/resume/<run key>/: mid-run checkpoints of an unfinished run

NOTEBOOKS = PROJECT_ROOT / "notebooks"  # $RT_NOTEBOOKS: another folder of numbered notebooks


def notebooks_dir() -> Path:
    """The folder of the numbered notebooks: ``$RT_NOTEBOOKS``, else ``notebooks/`` beside the
    package."""
    return Path(os.environ.get("RT_NOTEBOOKS", NOTEBOOKS))


def available_notebooks() -> dict[str, Path]:
    """{name: path} of the numbered notebooks (``NN_name.ipynb``), in their order."""
    return {p.stem: p for p in sorted(notebooks_dir().glob("[0-9][0-9]_*.ipynb"))}


# name -> results folder set in this process (use_folder), over the run context's folders.
_folders: dict[str, str] = {}


def use_folder(name: str, folder: str) -> None:
    """From now on :func:`results_dir` of ``name`` is ``results/<folder>/`` in this process."""
    _folders[name] = folder


def folder_of(name: str) -> str:
    """The folder name of ``name``'s results: set here, by the runner, or the name itself."""
    if name in _folders:
        return _folders[name]
    return context.current().folders.get(name, name)


def results_dir(name: str, create: bool = True) -> Path:
    """``results/<name>/`` (or the folder :func:`folder_of` gives), created on demand
    (``create=False`` only names it)."""
    path = results_root() / folder_of(name)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path


def shown(path: str | Path) -> str:
    """``path`` as an error shows it: relative to the project when inside it
    (``results/01_modular_addition/metrics.csv``), else as given."""
    path = Path(path)
    with contextlib.suppress(ValueError):
        return str(path.resolve().relative_to(PROJECT_ROOT))
    return str(path)


#: errno of a write the storage refused -> (the cause, in an error's words; what to do about it)
_FREE = "free some space"
_WRITABLE = "make the folder writable (or point RT_RESULTS at one that is)"
STORAGE_FAULTS = {
    errno.ENOSPC: ("no space left on device", _FREE),
    errno.EDQUOT: ("disk quota exceeded", _FREE),
    errno.EFBIG: ("file too large for the file system or this process's limit", _FREE),
    errno.EROFS: ("read-only file system", _WRITABLE),
    errno.EACCES: ("permission denied", _WRITABLE),
    errno.EPERM: ("operation not permitted", _WRITABLE),
}


class WriteFailedError(OSError):
    """A file the storage refused to write (full disk, quota, read-only or protected folder).

    Its message names the file and the cause; the file's previous version, if any, is left as
    it was and no temporary file stays beside it.  An :class:`OSError` with the original errno,
    so handlers of OSError still see it."""

    def __init__(self, err: OSError, path: Path) -> None:
        cause, remedy = STORAGE_FAULTS[err.errno]
        message = (f"{cause} while writing {shown(path)}: its previous version, if any, is "
                   f"left as it was; {remedy}, then run again (./run_all.sh reruns only what did "
                   "not finish)")
        super().__init__(err.errno, message, str(path))

    def __str__(self) -> str:  # the message alone, without OSError's "[Errno 28] ...: 'path'"
        return self.strerror


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` only if the block succeeds.

    A write the storage refuses (creating the temporary, writing it, renaming it) raises
    :class:`WriteFailedError`; the temporary is removed in any case."""
    path = Path(path)
    tmp_path = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp" + path.suffix,
                                   dir=path.parent)
        os.close(fd)
        tmp_path = Path(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)  # mkstemp makes 0600 files; results are for everyone
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as err:
        # Already named (a write nested inside this one, e.g. a checkpoint's .sha256), or not the
        # storage's refusal (e.g. a notebook's own OSError inside the runner's write): as it is.
        if isinstance(err, WriteFailedError) or err.errno not in STORAGE_FAULTS:
            raise
        raise WriteFailedError(err, path) from err
    finally:
        # A folder gone read-only mid-write cannot take the unlink either: the next
        # ./run_all.sh removes what is left (runner.remove_unfinished).
        if tmp_path is not None:
            with contextlib.suppress(OSError):
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
    :func:`load_torch` checks: a checkpoint damaged on disk is detected, never silently used.

    Serialised in memory first: torch's own file writer turns a full disk into a RuntimeError
    without the cause (and names its archive after the random temporary file, so the same
    object gave other bytes on every save); Python's write raises the OSError itself.

    Two files cannot be renamed into place at once, so the pair goes in three atomic steps,
    after each of which the ``.pt`` on disk has its sha256 in the ``.sha256``: (1) the
    ``.sha256`` lists the sha256s recorded so far and the new one's, (2) the new ``.pt``
    replaces the old, (3) the ``.sha256`` holds the new one's alone.  A process killed, or a
    write refused, at any point leaves a pair that loads: the previous checkpoint or the new."""
    import torch

    path = Path(path)
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    data = buffer.getbuffer()
    new = hashlib.sha256(data).hexdigest()
    with atomic_path(path) as tmp:
        # written before the .sha256's write begins: a failure here is named as the .pt's
        tmp.write_bytes(data)
        # every sha256 recorded so far (more than one only after a save killed between steps):
        # the .pt on disk is one of them or damaged, and a damaged one stays refused
        previous = _recorded_sha256s(path)
        with atomic_path(checksum_path(path)) as tmp_sum:
            tmp_sum.write_text("".join(f"{h}\n" for h in dict.fromkeys(previous + [new])))
    if [h for h in previous if h != new]:
        atomic_write_text(checksum_path(path), new + "\n")
    return path


def _recorded_sha256s(path: Path) -> list[str]:
    """The sha256s ``<path>.sha256`` lists (the newest last; more than one only while a save
    is under way, or after one was killed), [] where there is none."""
    try:
        return checksum_path(path).read_text().split()
    except FileNotFoundError:
        return []


def load_torch(path: str | Path, map_location: Any = "cpu") -> Any:
    """Load a file :func:`atomic_save_torch` wrote, after checking its sha256 against the ones
    recorded beside it; raises :class:`CorruptFileError` when none matches or none was recorded."""
    import torch

    path = Path(path)
    recorded = checksum_path(path)
    if not recorded.exists():
        raise CorruptFileError(f"{path}: no recorded sha256 ({recorded.name}); cannot be trusted")
    if sha256_file(path) not in _recorded_sha256s(path):
        raise CorruptFileError(f"{path}: contents do not match the sha256 recorded when saved")
    return torch.load(path, map_location=map_location, weights_only=False,
                      pickle_module=_pickle_with_moves)


#: Modules that moved into rt_lib's layer folders: a checkpoint or job result pickled before
#: names a class by its old module, and is read under the new one (results/ of earlier runs).
MOVED_MODULES = {f"rt_lib.{old}": f"rt_lib.{new}" for old, new in (
    ("fast_paths", "model.fast_paths"), ("train", "training.train"),
    ("grokfast", "training.grokfast"), ("seeding", "runtime.seeding"),
    ("batched", "training.batched"), ("footprint", "training.footprint"),
    ("analysis", "analysis.activations"), ("fourier", "analysis.fourier"),
    ("plots", "plots.figures"), ("widgets", "plots.explorers"), ("claims", "claims.ledger"),
    ("verdicts", "claims.verdicts"), ("portable", "claims.portable"),
    ("context", "runtime.context"), ("io", "runtime.io"), ("params", "runtime.params"),
    ("fingerprint", "runtime.fingerprint"), ("manifest", "runtime.manifest"),
    ("data", "tasks.stories"), ("text", "tasks.tokenizer"))}


class _MovedModulesUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return super().find_class(MOVED_MODULES.get(module, module), name)


# torch.load's pickle_module: the standard pickle but for where it looks up a class
_pickle_with_moves = types.SimpleNamespace(
    Unpickler=_MovedModulesUnpickler, __name__="pickle",
    load=lambda file, **kw: _MovedModulesUnpickler(file, **kw).load())


class DamagedFileError(CorruptFileError):
    """A result that cannot be read as it was written (cut short, malformed, failing its
    sha256): the message names the file and the ``./run_all.sh`` command that writes it again."""


_NOTEBOOK_FOLDER = re.compile(r"\d\d_")


def rerun_command(path: str | Path, notebook: str | None = None) -> str:
    """The ``./run_all.sh`` command that writes ``path`` again: the notebook whose results
    folder (``[<profile>/]NN_name[+changes]/``) holds it, in that profile, with ``--force``
    (``notebook``: the one that writes it, for a file outside the results folders)."""
    path = Path(path).absolute()
    folder = next((p for p in path.parents if _NOTEBOOK_FOLDER.match(p.name)), None)
    # The profile is the folder above the notebook's when it names one (results/paper/01_x,
    # as ./run_all.sh --list reads them); else the one this process runs (the run context: a
    # notebook the runner started has results/paper itself as its results root).
    above = folder.parent.name if folder is not None else ""
    if base_profile(above) in available_profiles() and above != DEFAULT_PROFILE:
        profile = above
    else:
        profile = context.current().profile
    if folder is None:
        command = f"./run_all.sh --only {notebook[:2]} --force" if notebook else (
            "./run_all.sh --force (the notebook that wrote it)")
        return command + profile_options(profile)
    command = f"./run_all.sh --only {folder.name[:2]} --force" + profile_options(profile)
    if "+" in folder.name:  # an exploration run: its folder is named after its changes
        command += (f" with the --set of that run ({folder.name}/parameters.yaml lists its "
                    "changes)")
    return command


def profile_options(profile: str) -> str:
    """``./run_all.sh``'s options that select ``profile`` ("" for the CPU profile)."""
    if base_profile(profile) == DEFAULT_PROFILE:
        return ""
    return f" --profile {base_profile(profile)}" + (" --smoke" if is_smoke(profile) else "")


def damaged(path: str | Path, cause: object, first: str = "",
            notebook: str | None = None) -> DamagedFileError:
    """The error for a result that cannot be read: ``<file> is damaged (<cause>); [<first>]rerun
    <command>`` (``first``: what to do before, e.g. move a database aside; ``notebook``: see
    :func:`rerun_command`)."""
    cause = str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__
    return DamagedFileError(f"{shown(path)} is damaged ({cause}); {first}rerun "
                            f"{rerun_command(path, notebook)}")


T = TypeVar("T")

#: What a reader raises on bytes it cannot make sense of (a parse error of a format, a pickle or
#: zip cut short, a tensor of the wrong shape): the file is damaged, not the code that reads it.
PARSE_ERRORS: tuple[type[BaseException], ...] = (ValueError, KeyError, TypeError, EOFError,
                                                  RuntimeError)


def read_result(path: str | Path, read: Callable[[Path], T]) -> T:
    """``read(path)`` for a file another notebook wrote; bytes it cannot read (and a checkpoint
    failing its sha256, :func:`load_torch`) raise :class:`DamagedFileError` naming the file and
    the notebook to rerun.  A missing file is the caller's to report (what to run first)."""
    import zipfile

    path = Path(path)
    try:
        return read(path)
    except (DamagedFileError, FileNotFoundError, PermissionError):
        raise  # named already; or no damage to the bytes (what to run first, who may read)
    except (*PARSE_ERRORS, OSError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        # OSError too: torch's zip reader refuses a file cut short with EINVAL
        # load_torch's own errors start with the path, which the message names already
        raise damaged(path, str(err).removeprefix(f"{path}: ") or type(err).__name__) from err


def _csv_table(path: Path, columns: Sequence[str], **read_csv: Any) -> Any:
    import pandas as pd

    raw = path.read_bytes()
    if not raw.strip():
        raise ValueError("empty")
    if not raw.endswith(b"\n"):  # save_csv ends every row with one: a file without was cut short
        raise ValueError("cut short: its last line is incomplete")
    # pandas fills a row with too few fields with NaN; a file written whole has none such
    rows = list(csv.reader(io.StringIO(raw.decode("utf-8"))))
    short = next((i for i, row in enumerate(rows) if len(row) != len(rows[0])), None)
    if short is not None:
        raise ValueError(f"line {short + 1} has {len(rows[short])} fields, the header "
                         f"{len(rows[0])}")
    table = pd.read_csv(path, **read_csv)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"no column {', '.join(missing)}")
    return table


def read_csv_result(path: str | Path, columns: Sequence[str] = (), **read_csv: Any) -> Any:
    """A table :func:`save_csv` wrote (a DataFrame, ``read_csv`` passed to pandas), checked
    whole: it ends with its newline, every row has as many fields as the header, ``columns``
    are there; else :class:`DamagedFileError`."""
    return read_result(path, lambda p: _csv_table(p, columns, **read_csv))


def _yaml_mapping(path: Path) -> dict:
    import yaml

    try:
        record = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ValueError(f"not YAML: {str(err).splitlines()[0]}") from err
    if record is None:
        return {}
    if not isinstance(record, dict):
        raise ValueError(f"a {type(record).__name__}, not a mapping")
    return record


def read_yaml_result(path: str | Path) -> dict:
    """A YAML mapping a notebook wrote (``parameters.yaml``); an empty file is ``{}``, anything
    else but a mapping :class:`DamagedFileError`."""
    return read_result(path, _yaml_mapping)
