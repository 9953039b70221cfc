"""What a run says while it runs: one line per notebook started and finished, and between them
a progress line against each notebook's last run."""

from __future__ import annotations

import shutil
import sys

from rt_lib.pipeline.plan import Job, recorded_duration
from rt_lib.runtime.context import DEFAULT_PROFILE
from rt_lib.runtime.manifest import Manifest


def clock(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour)."""
    seconds = max(int(round(seconds)), 0)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def expected_seconds(job: Job, manifest: Manifest | None, profile: str) -> float | None:
    """What ``job`` took last time: its manifest entry's wall time, else (CPU profile) the time
    papermill recorded in the committed notebook; None when neither says."""
    entry = manifest.entries.get(job.folder) if manifest is not None else None
    if entry is not None:
        return entry.wall_seconds
    return recorded_duration(job.notebook) if profile == DEFAULT_PROFILE else None


def progress_line(running: dict[str, tuple[float, float | None]], done: int, total: int,
                  now: float) -> str:
    """One line over the notebooks running: {name: (start, expected seconds or None)}."""
    parts = []
    for name, (start, expected) in running.items():
        spent = now - start
        if expected and spent > expected:  # e.g. the last run resumed from stored runs
            parts.append(f"{name} {clock(spent)}, past the {clock(expected)} of its last run")
        elif expected:
            parts.append(f"{name} {clock(spent)} of ~{clock(expected)} ({spent / expected:.0%})")
        else:
            parts.append(f"{name} {clock(spent)} (no earlier run to compare)")
    return f"    [{done}/{total} done] " + " | ".join(parts)


class Ticker:
    """The progress line between "started" and "done": redrawn in place every second on a
    terminal, printed once a minute into a log (a pipe or file: no carriage returns there)."""

    def __init__(self, stream=None, interval: float | None = None) -> None:
        self.stream = stream or sys.stdout
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (1.0 if self.tty else 60.0)
        self.shown = False

    def show(self, line: str) -> None:
        if self.tty:
            width = shutil.get_terminal_size((120, 20)).columns
            self.stream.write("\r\033[K" + line[: width - 1])
            self.shown = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False
