"""Training through the run store (:mod:`rt_lib.runtime.store`): a run made before is loaded.

:func:`train_stored` is :func:`~rt_lib.training.train.train` with a shortcut: it first computes
the run's key from everything that decides its numbers, and where the store holds that key it
copies the run's final checkpoint (and weight snapshots) into place and lets ``train`` load it,
exactly as ``train`` loads a finished run it finds on resuming.  A hit therefore returns what a
retrain would (the same weights, history and step count, bit for bit on the same platform:
tests/training/test_stored.py trains one run twice from nothing and compares), and the caller
cannot tell the two apart except by the time it took.

What the key covers (:func:`run_key`):

* the run's settings: its :class:`TrainConfig` without the bookkeeping fields (where it is saved,
  how it is shown), the grad hook's settings (grokfast's alpha, lambda, init);
* the model: its class, config and the sha256 of its initial weights and which of them train
  (so the init seed, the init scheme and the frozen parts are all in it);
* the task: its class and every attribute that is not a private cache, tensors and models by
  the sha256 of their bytes (the data itself: TinyStories' tokens, an imitation target's weights);
* the code on the training path: the sha256 of every rt_lib source file the training loop, the
  model and the task import, followed through their imports (:func:`training_sources`, derived
  from the code, not typed by hand); analysis, claims, plots, the site, the experiments' own
  modules, docs and tests are not on it, so editing them keeps every stored run;
* the numeric platform: torch's and Python's versions, the device, the threads and the kernel
  hashes of :func:`rt_lib.runtime.fingerprint.kernel_hashes` (the CPU kernel path).
"""

from __future__ import annotations

import dataclasses
import hashlib
import platform
import sys
import tempfile
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rt_lib.runtime import store as run_store
from rt_lib.runtime.context import env_threads
from rt_lib.runtime.io import CorruptFileError, load_torch
from rt_lib.runtime.sources import RT_LIB, import_closure, sources_digest
from rt_lib.tasks.base import Task
from rt_lib.training.train import _BOOKKEEPING, TrainConfig, TrainResult, _same_run, resolve_device, train

#: The folders (and top-level modules) of rt_lib a run's numbers can depend on; imports into the
#: other layers (analysis, plots, claims, jobs, site, experiments, pipeline) are not followed.
TRAINING_LAYERS = ("runtime", "model", "tasks", "training", "primes")
#: Where the training path starts: the loop, and the batched loop beside it.
TRAINING_ENTRIES = ("rt_lib.training.train", "rt_lib.training.batched")
#: Modules of the runtime layer that a run's numbers cannot depend on (where things are kept and
#: how they are described): their edits keep every stored run.
NOT_ON_PATH = ("rt_lib.runtime.store", "rt_lib.runtime.manifest", "rt_lib.runtime.fingerprint")
#: Settings of TrainConfig that do not change what a run computes (where it is kept, how shown).
_WHERE = _BOOKKEEPING


# -- the code on the training path ----------------------------------------------------------
@cache
def training_sources(entries: tuple[str, ...] = TRAINING_ENTRIES,
                     root: Path = RT_LIB) -> tuple[str, ...]:
    """The rt_lib source files (relative to ``root``, the rt_lib folder) that ``entries``
    import, followed through their imports within :data:`TRAINING_LAYERS`: the code a run's
    numbers depend on (:func:`rt_lib.runtime.sources.import_closure`)."""
    return import_closure(entries, TRAINING_LAYERS, root, exclude=NOT_ON_PATH)


def _modules_of(*objects: Any) -> tuple[str, ...]:
    return tuple(sorted({type(o).__module__ for o in objects if o is not None}))


def code_digest(entries: tuple[str, ...], root: Path = RT_LIB) -> str:
    """sha256 of the sources :func:`training_sources` finds, their paths and their bytes."""
    return _code_digest(tuple(sorted(set(entries))), root)


@cache
def _code_digest(entries: tuple[str, ...], root: Path) -> str:
    return sources_digest(training_sources(entries, root), root)


# -- what the run is made of -------------------------------------------------------------------
def _tensor_digest(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous()
    raw = t.view(torch.uint8) if t.dtype != torch.bool and t.numel() else t.to(torch.uint8)
    return f"{t.dtype}{tuple(t.shape)}:" + hashlib.sha256(raw.numpy().tobytes()).hexdigest()


def identity(obj: Any, depth: int = 0) -> Any:
    """A JSON-able description of ``obj`` that changes whenever what it holds does: tensors and
    models by the sha256 of their bytes, objects by their class and public attributes (private
    ones, ``_name``, are caches made from the public ones), the rest by ``repr``."""
    if depth > 8:
        return repr(obj)
    if isinstance(obj, torch.Tensor):
        return _tensor_digest(obj)
    if isinstance(obj, nn.Module):
        return {"class": f"{type(obj).__module__}.{type(obj).__qualname__}",
                "cfg": repr(getattr(obj, "cfg", None)),
                "state": {k: _tensor_digest(v) for k, v in obj.state_dict().items()},
                "trains": [n for n, p in obj.named_parameters() if p.requires_grad]}
    if isinstance(obj, (str, int, float, bool, type(None))):
        return obj
    if isinstance(obj, dict):
        return {str(k): identity(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [identity(v, depth + 1) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted(repr(v) for v in obj)
    if hasattr(obj, "__dict__") and not callable(obj) or isinstance(obj, Task):
        fields = {k: identity(v, depth + 1) for k, v in vars(obj).items() if not k.startswith("_")}
        return {"class": f"{type(obj).__module__}.{type(obj).__qualname__}", **fields}
    return repr(obj)


def hook_settings(grad_hook: Any) -> Any:
    """The settings of a grad hook (its public attributes, e.g. grokfast's alpha, lamb, init)."""
    if grad_hook is None:
        return None
    own = {k: repr(v) for k, v in vars(grad_hook).items() if not k.startswith("_")
           and not isinstance(v, (dict, torch.Tensor))} if hasattr(grad_hook, "__dict__") else {}
    return {"class": f"{type(grad_hook).__module__}.{type(grad_hook).__qualname__}", **own}


@cache
def _kernels() -> dict[str, str]:
    from rt_lib.runtime.fingerprint import kernel_hashes

    return kernel_hashes()


def platform_parts(cfg: TrainConfig) -> dict[str, Any]:
    device = resolve_device(cfg.device)
    return {"torch": torch.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "device": str(device),
            "cuda": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
            "threads": cfg.threads if cfg.threads is not None else env_threads(),
            "kernels": _kernels() if device.type == "cpu" else None}


def run_parts(model: nn.Module, task: Task, cfg: TrainConfig, grad_hook: Any = None,
              extra: Any = None) -> dict[str, Any]:
    """Everything :func:`run_key` hashes, as a readable mapping (tests and ``--cache`` show it)."""
    settings = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in _WHERE}
    settings["snapshots"] = bool(cfg.snapshot_steps)
    entries = TRAINING_ENTRIES + _modules_of(model, task, grad_hook, getattr(task, "inner", None))
    return {"version": 1, "train": settings, "hook": hook_settings(grad_hook),
            "model": identity(model), "task": identity(task), "extra": extra,
            "code": code_digest(tuple(sorted(set(entries)))), "platform": platform_parts(cfg)}


def run_key(model: nn.Module, task: Task, cfg: TrainConfig, grad_hook: Any = None,
            extra: Any = None) -> str:
    return run_store.digest(run_parts(model, task, cfg, grad_hook, extra))


# -- training through the store -------------------------------------------------------------
def _finished_here(cfg: TrainConfig) -> bool:
    """Whether ``cfg.checkpoint_path`` holds this very run, finished (train() would load it)."""
    if not cfg.resume or cfg.checkpoint_path is None or not Path(cfg.checkpoint_path).exists():
        return False
    try:
        state = load_torch(cfg.checkpoint_path)
    except CorruptFileError:
        return False
    return bool(state.get("finished")) and _same_run(state["config"], cfg)


def _files(cfg: TrainConfig) -> dict[str, Path]:
    """The files a finished run wrote: its checkpoint and its snapshots, each with its sha256."""
    ckpt = Path(cfg.checkpoint_path)
    out = {"checkpoint.pt": ckpt, "checkpoint.pt.sha256": Path(f"{ckpt}.sha256")}
    for step in cfg.snapshot_steps:
        for name in (f"step_{step}.pt", f"step_{step}.pt.sha256"):
            path = Path(cfg.snapshot_dir) / name
            if path.exists():
                out[f"snapshots/{name}"] = path
    return out


def _placer(cfg: TrainConfig) -> Callable[[str], Path]:
    ckpt = Path(cfg.checkpoint_path)

    def place(name: str) -> Path:
        if name.startswith("checkpoint.pt"):
            return ckpt.with_name(ckpt.name + name.removeprefix("checkpoint.pt"))
        if name.startswith("snapshots/") and cfg.snapshot_dir is not None:
            return Path(cfg.snapshot_dir) / name.removeprefix("snapshots/")
        raise ValueError(f"unexpected file {name!r}")
    return place


def train_stored(model: nn.Module, task: Task, cfg: TrainConfig,
                 grad_hook: Callable[[nn.Module, int], None] | None = None,
                 desc: str | None = None, extra: Any = None) -> TrainResult:
    """:func:`~rt_lib.training.train.train`, through the run store: the run is loaded where
    the store holds its key, else trained and stored (see the module docstring).  ``extra``:
    further settings the caller wants in the key.  With the store off (``RT_CACHE=off``), or a
    run cut short by its early stop never reaching a final checkpoint, this is ``train``."""
    store = run_store.current()
    if store is None:
        return train(model, task, cfg, grad_hook=grad_hook, desc=desc)
    key = run_key(model, task, cfg, grad_hook, extra)
    label = desc or task.name
    with store.lock(key), tempfile.TemporaryDirectory(prefix="rt-run-") as tmp:
        own = cfg if cfg.checkpoint_path is not None else dataclasses.replace(
            cfg, checkpoint_path=str(Path(tmp) / "last.pt"), checkpoint_every=None)
        if _finished_here(own):  # e.g. a results folder of the notebooks read: kept as it is
            result = train(model, task, own, grad_hook=grad_hook, desc=desc)
            # loaded, not trained: the notebook's re-record keeps its cold time (schedule.py)
            store.log(run_store.FOUND, key, label)
        elif store.fetch(key, _placer(own), label):
            result = train(model, task, dataclasses.replace(own, resume=True),
                           grad_hook=grad_hook, desc=desc)
            result.config = cfg
            return result
        else:
            result = train(model, task, own, grad_hook=grad_hook, desc=desc)
        store.put(key, _files(own), meta={"desc": label, "steps": result.steps_done,
                                           "seconds": round(result.wall_time_s, 3)}, label=label)
        result.config = cfg
        return result


def stored_sources() -> dict[str, tuple[str, ...]]:
    """{task module: the sources the key of a run on it covers}: ``python -m
    rt_lib.training.stored`` lists them (docs/reliability.md, the run store)."""
    tasks = sorted(f"rt_lib.tasks.{p.stem}" for p in (RT_LIB / "tasks").glob("*.py")
                   if p.stem != "__init__")
    return {m: training_sources(tuple(sorted({*TRAINING_ENTRIES, m, "rt_lib.model.transformer",
                                               "rt_lib.training.grokfast"}))) for m in tasks}


def main(argv: Iterable[str] | None = None) -> int:
    """Each task module with the sources a run's key covers on it."""
    for module, files in stored_sources().items():
        print(f"{module}: {len(files)} files: {', '.join(files)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
