"""The run store: every training run kept once, by what it was made from, outside the checkout.

A run's *key* is the sha256 of everything that decides its numbers (the caller's settings, the
code on its training path, the numeric platform); its *entry* is a folder of the files the run
wrote (its final checkpoint, its weight snapshots), with their sha256s in ``entry.json``.  Asked
for again with the same key, from any notebook, profile, results folder or clone, the run is
copied out of the store instead of trained (:func:`rt_lib.training.stored.train_stored`); any
other key trains.  The field's name for it is a content-addressed cache (DVC's, ccache's,
jupyter-cache's): the store is only ever a shortcut to what a retrain would give, never the one
copy of a result, so deleting it costs time, not results.

Where: ``$RT_CACHE`` (default ``~/.cache/rt-companion/runs``); ``RT_CACHE=off`` turns it off.
Safe like the results manifest: an entry is written into a temporary folder and renamed into
place whole; every file is checked against its sha256 on every load, and an entry that fails
(a partial copy, a flipped bit) is reported, removed and trained again, never used.  One lock
file per key serialises two processes that ask for the same run: the second waits, then loads
what the first stored.  Entries beyond ``$RT_CACHE_MAX_GIB`` (default 5) go, least recently used
first.  Every hit, miss and refusal is a line of ``events.log``, which the test command and
``./run_all.sh --cache`` count.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rt_lib.runtime.io import sha256_file

CACHE_ENV = "RT_CACHE"  # the store's folder (unset or empty: the default); "off" turns it off
#: The event of a finished run read from its own results folder (an earlier run of the same
#: notebooks): loaded, like a hit, though not from the store.
FOUND = "found"
MAX_ENV = "RT_CACHE_MAX_GIB"  # size cap in GiB (default 5)
SESSION_ENV = "RT_CACHE_SESSION"  # a tag on every event: the test command counts its own
# "<session>/<part>": one part of a session (a notebook of ./run_all.sh), counted in the session too
SUBSESSION = "/"
DEFAULT_ROOT = Path("~/.cache/rt-companion/runs")
DEFAULT_MAX_GIB = 5.0
OFF = ("off", "0", "none", "false", "no")
ENTRY = "entry.json"
EVENTS = "events.log"


class StoreError(ValueError):
    """A store setting that cannot be used (a cap that is not a number, say)."""


def root_from_env() -> Path | None:
    """The store's folder as ``$RT_CACHE`` says, None when it is off."""
    raw = (os.environ.get(CACHE_ENV) or "").strip()
    if not raw:  # unset or empty: the default folder
        return DEFAULT_ROOT.expanduser()
    if raw.lower() in OFF:
        return None
    return Path(raw).expanduser().resolve()


def max_bytes_from_env() -> int:
    raw = os.environ.get(MAX_ENV, "").strip()
    try:
        gib = float(raw) if raw else DEFAULT_MAX_GIB
    except ValueError:
        gib = -1.0
    if not gib > 0:
        raise StoreError(f"{MAX_ENV} must be a positive number of GiB, got {raw!r}")
    return int(gib * 2**30)


def digest(parts: Mapping[str, Any]) -> str:
    """The key of ``parts``: sha256 of their JSON (sorted keys; anything JSON cannot write is
    written as its ``repr``, which for the dataclasses of settings lists every field)."""
    text = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class Stats:
    entries: int
    bytes: int
    events: Counter  # (event) -> count, over the whole log or one session


class RunStore:
    """A store at ``root`` (see the module docstring)."""

    def __init__(self, root: str | Path, max_bytes: int | None = None) -> None:
        self.root = Path(root)
        self.max_bytes = max_bytes if max_bytes is not None else max_bytes_from_env()

    # -- layout ---------------------------------------------------------------------------
    def entry_dir(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / key

    def _lock_path(self, key: str) -> Path:
        return self.root / "locks" / f"{key}.lock"

    # -- the three operations ---------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold the key's lock: a second process asking for the same run waits here, then
        finds the entry the first one stored."""
        path = self._lock_path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def fetch(self, key: str, place: Callable[[str], Path], label: str = "") -> bool:
        """Copy each of the entry's files to ``place(its name in the entry)`` after checking
        every one against its sha256; False (nothing copied) when there is no entry or it fails
        a check, which is reported and removed so that the run trains again."""
        folder = self.entry_dir(key)
        record_path = folder / ENTRY
        if not record_path.is_file():
            self.log("miss", key, label)
            return False
        try:
            record = json.loads(record_path.read_text())
            files: dict[str, str] = record["files"]
            if not files:
                raise ValueError("it lists no files")
            for name, sha in files.items():
                if sha256_file(folder / name) != sha:
                    raise ValueError(f"{name} does not match its recorded sha256")
        except (OSError, ValueError, KeyError, TypeError) as err:
            print(f"run store: entry {key[:12]} ({label or 'a run'}) is damaged ({err}); it is "
                  "removed and the run trained again", file=sys.stderr, flush=True)
            self.log("damaged", key, label)
            self._remove(folder)
            return False
        for name in files:
            target = Path(place(name))
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
            shutil.copyfile(folder / name, tmp)
            os.replace(tmp, target)
        with contextlib.suppress(OSError):
            os.utime(record_path)  # least recently *used*: a hit counts as a use
        self.log("hit", key, label)
        return True

    def put(self, key: str, files: Mapping[str, Path], meta: Mapping[str, Any] | None = None,
            label: str = "") -> None:
        """Store ``files`` (name in the entry -> file) under ``key``, whole or not at all; an
        entry already there (another process stored it first) is kept.  A store that cannot
        be written (a full disk) is reported and left: the run's results are elsewhere."""
        final = self.entry_dir(key)
        if (final / ENTRY).is_file():
            return
        tmp = None
        try:
            (self.root / "tmp").mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f"{key[:12]}.", dir=self.root / "tmp"))
            shas = {}
            for name, source in files.items():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, tmp / name)
                shas[name] = sha256_file(tmp / name)
            record = {"key": key, "label": label, "files": shas, "made": time.time(),
                      "meta": dict(meta or {})}
            (tmp / ENTRY).write_text(json.dumps(record, sort_keys=True, default=repr, indent=1))
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(tmp, final)  # atomic: the entry appears whole or not at all
                tmp = None
            except OSError:
                if not (final / ENTRY).is_file():  # a damaged leftover: replace it
                    self._remove(final)
                    os.rename(tmp, final)
                    tmp = None
            self.log("stored", key, label)
        except OSError as err:
            print(f"run store: could not store {label or key[:12]} in {self.root} ({err}); the "
                  "run's own results are kept", file=sys.stderr, flush=True)
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)
        self.evict()

    # -- housekeeping ---------------------------------------------------------------------
    def entries(self) -> list[Path]:
        return sorted(p for p in (self.root / "entries").glob("*/*") if p.is_dir())

    @staticmethod
    def _size(folder: Path) -> int:
        return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())

    def evict(self) -> list[Path]:
        """Remove the least recently used entries until the store fits its cap."""
        sized = []
        for folder in self.entries():
            with contextlib.suppress(OSError):
                sized.append(((folder / ENTRY).stat().st_mtime, self._size(folder), folder))
        total = sum(s for _, s, _ in sized)
        gone = []
        for _, size, folder in sorted(sized, key=lambda t: t[0]):
            if total <= self.max_bytes:
                break
            self._remove(folder)
            self.log("evicted", folder.name, "")
            total -= size
            gone.append(folder)
        return gone

    def clear(self) -> int:
        n = len(self.entries())
        for sub in ("entries", "tmp", "locks"):
            shutil.rmtree(self.root / sub, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            (self.root / EVENTS).unlink()
        return n

    def _remove(self, folder: Path) -> None:
        # renamed aside first, so that no reader ever sees half an entry
        aside = folder.with_name(f".{folder.name}.{uuid.uuid4().hex[:8]}.gone")
        with contextlib.suppress(OSError):
            os.rename(folder, aside)
            shutil.rmtree(aside, ignore_errors=True)

    def log(self, event: str, key: str, label: str) -> None:
        line = json.dumps({"t": round(time.time(), 3), "event": event, "key": key[:16],
                           "label": label, "session": os.environ.get(SESSION_ENV, ""),
                           "pid": os.getpid()})
        with contextlib.suppress(OSError):
            self.root.mkdir(parents=True, exist_ok=True)
            with open(self.root / EVENTS, "a") as f:  # one short append: whole lines
                f.write(line + "\n")

    def stats(self, session: str | None = None) -> Stats:
        """Entries, bytes and the events of ``session`` and its parts (``<session>/<part>``;
        None: every event since the store was made or cleared)."""
        events: Counter = Counter()
        with contextlib.suppress(FileNotFoundError):
            for line in (self.root / EVENTS).read_text().splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                tag = str(e.get("session", ""))
                if session is None or tag == session or tag.startswith(session + SUBSESSION):
                    events[e.get("event", "?")] += 1
        entries = self.entries()
        return Stats(len(entries), sum(self._size(f) for f in entries), events)


def current() -> RunStore | None:
    """The store ``$RT_CACHE`` names, None when it is off."""
    root = root_from_env()
    return None if root is None else RunStore(root)


def describe(store: RunStore | None, session: str | None = None) -> str:
    """One line: where the store is, its entries and size, and its hits and trainings."""
    if store is None:
        return f"run store: off ({CACHE_ENV}=off or --no-cache): every run trains"
    s = store.stats(session)
    counted = "this session" if session else "since it was made or cleared"
    found = f" ({s.events[FOUND]} more read from their results folders)" if s.events[FOUND] else ""
    return (f"run store: {store.root}: {s.entries} entries, {s.bytes / 2**20:.1f} MiB "
            f"(cap {store.max_bytes / 2**30:g} GiB); {counted}: {s.events['hit']} runs loaded{found}, "
            f"{s.events['stored']} trained and stored, {s.events['damaged']} damaged entries "
            "retrained")


def main(argv: list[str] | None = None) -> int:
    """``python -m rt_lib.runtime.store [--clear] [--session S]``: the store's line."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m rt_lib.runtime.store",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--clear", action="store_true", help="empty the store")
    parser.add_argument("--session", help="count only this session's events")
    args = parser.parse_args(argv)
    try:
        store = current()
    except StoreError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.clear:
        if store is None:
            print("run store: off; nothing to clear")
            return 0
        print(f"run store: {store.root}: removed {store.clear()} entries")
        return 0
    print(describe(store, args.session))
    return 0


if __name__ == "__main__":
    sys.exit(main())
