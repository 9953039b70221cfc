"""Which of rt_lib's source files a piece of code depends on, read from the imports alone.

Two records name the code that made them by its bytes: a stored training run
(rt_lib/training/stored.py: the model, task and loop it trained with) and a kept evidence run
(rt_lib/site/evidence.py: the claim checks that judged it).  Both follow the imports of some
entry modules through the layers that can change their result, without importing anything:
:func:`import_closure` finds those files, :func:`sources_digest` hashes them.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

RT_LIB = Path(__file__).resolve().parents[1]


def module_file(module: str, root: Path = RT_LIB) -> Path | None:
    """The file of ``rt_lib.a.b`` under ``root`` (the rt_lib folder): ``a/b.py`` or
    ``a/b/__init__.py``; None where neither exists (a name imported from a module)."""
    rel = Path(*module.split(".")[1:])
    for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imports_of(path: Path, root: Path = RT_LIB) -> set[str]:
    """Every module ``path`` imports, inside functions too; relative imports resolved against its
    package, and ``from a import b`` counted as importing ``a`` and ``a.b``."""
    package = ".".join(("rt_lib", *path.relative_to(root).parent.parts))
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(x for x in (base, node.module or "") if x)
            found |= {module} | {f"{module}.{a.name}" for a in node.names}
    return found


def import_closure(entries: Iterable[str], layers: Iterable[str], root: Path = RT_LIB,
                   exclude: Iterable[str] = ()) -> tuple[str, ...]:
    """The source files (relative to ``root``) of ``entries`` and of what they import, followed
    through the modules of rt_lib's ``layers`` (``training``, ``claims``, ...; a module of rt_lib's
    top level is a layer of its own) and their packages' ``__init__``, ``exclude``'s modules aside."""
    layers, exclude = set(layers), tuple(exclude)

    def within(module: str) -> bool:
        parts = module.split(".")
        return (len(parts) >= 2 and parts[0] == "rt_lib" and parts[1] in layers
                and not any(module == m or module.startswith(m + ".") for m in exclude))

    seen: set[Path] = set()
    todo = list(entries)
    while todo:
        module = todo.pop()
        if not within(module):
            continue
        path = module_file(module, root)
        if path is None or path in seen:
            continue
        seen.add(path)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(2, len(parts))]  # the packages' __init__
        todo += sorted(imports_of(path, root))
    return tuple(sorted(str(p.relative_to(root)) for p in seen))


def sources_digest(sources: Iterable[str], root: Path = RT_LIB) -> str:
    """sha256 of the files ``sources`` (relative to ``root``): each one's path and bytes, in order."""
    h = hashlib.sha256()
    for rel in sources:
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes() + b"\0")
    return h.hexdigest()


__all__ = ["RT_LIB", "import_closure", "imports_of", "module_file", "sources_digest"]
