"""Seeds in one place.

Every random choice of an experiment (model init, batch order, data split) is a pure function of
one integer seed and a purpose string, so a re-run reproduces it and restarts differ only in it.
"""

from __future__ import annotations

import hashlib
import os

import torch

from rt_lib.runtime import context


def derive(seed: int, purpose: str) -> int:
    """A 63-bit seed for ``purpose``, stable across Python runs (unlike ``hash``)."""
    digest = hashlib.sha256(f"{seed}:{purpose}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def set_threads(threads: int | None = None) -> int:
    """Set torch's intra-op threads: argument, else the run context's (``$RT_THREADS``, else 1).

    One thread is the default because on small shared machines (2 cores) it is usually as fast
    as two for these model sizes and, unlike a varying count, keeps float reductions identical
    from run to run.
    """
    if threads is None:
        threads = context.current().threads
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    torch.set_num_threads(threads)
    return threads


def default_jobs() -> int:
    """Processes to run at once (notebooks, local training jobs, footprint measurements): the
    usable cores divided by the torch threads each uses (:func:`set_threads`), at most 4."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, (cores or 1) // context.current().threads))
