"""The layers of rt_lib, bottom up, each a folder: the runtime (io, context, seeding, params,
fingerprint, manifest), then the model, the tasks, training and the jobs that run it; analysis and
plots beside them; the claims (the ledger, verdicts, the portable comparison); the declaration of
an experiment.  That core imports nothing from the site, the experiments or the pipeline; the site
(its pages and the evidence; nor the figures or analyses) and the experiments import nothing from each other
or from the pipeline; the pipeline (the command line of ./run_all.sh) sits on top.  The core reads
as a library, usable without ./run_all.sh, and the pipeline can change without touching what a
model computes or what an experiment runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rt_lib

ROOT = Path(rt_lib.__file__).parent
UPPER = ("rt_lib.pipeline", "rt_lib.experiments", "rt_lib.site")


#: Each folder of the core and the parts of rt_lib it may import: a layer sees only those below it.
BELOW: dict[str, set[str]] = {
    "runtime": set(),
    "claims": {"runtime"},
    "model": {"primes"},
    "tasks": {"primes", "model", "runtime"},
    "training": {"model", "tasks", "runtime"},
    "jobs": {"training", "runtime"},
    "analysis": {"model", "tasks", "runtime"},
    "plots": {"analysis", "model", "tasks", "runtime"},
}


def core_modules() -> list[Path]:
    upper = {up.split(".")[1] for up in UPPER}
    return sorted(p for p in ROOT.rglob("*.py") if p.relative_to(ROOT).parts[0] not in upper)


def layers_imported(path: Path, source: str | None = None) -> set[str]:
    """The top-level parts of rt_lib (a folder or a module) that ``path`` imports, its own aside."""
    own = path.relative_to(ROOT).parts[0].removesuffix(".py")
    parts = {module.split(".")[1] for _, module in imported(path, source)
             if module.startswith("rt_lib.") and module.count(".") >= 1}
    return parts - {own}


def imported(path: Path, source: str | None = None) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path`` (or ``source``, as if it were that file),
    inside functions too; relative imports are resolved against the file's package (``from .base
    import Task`` in rt_lib/tasks/ is rt_lib.tasks.base), and ``from a import b`` counts as
    importing ``a`` and ``a.b``."""
    package = ".".join(("rt_lib", *path.relative_to(ROOT).parent.parts))
    text = source if source is not None else path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(x for x in (base, node.module or "") if x)
            found.append((node.lineno, module))
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
    return found


def upward(path: Path, source: str | None = None, upper: tuple[str, ...] = UPPER) -> list[str]:
    return [f"{path.relative_to(ROOT.parent)}:{line} imports {module}"
            for line, module in imported(path, source)
            if any(module == up or module.startswith(up + ".") for up in upper)]


def test_the_core_imports_nothing_from_the_pipeline_or_the_experiments():
    modules = core_modules()
    assert {"transformer.py", "train.py", "activations.py", "figures.py", "io.py", "base.py",
            "experiment.py", "executor.py", "resume.py"} <= {p.name for p in modules}
    assert not [line for path in modules for line in upward(path)]


def test_the_core_is_foldered_by_layer():
    # what stays at rt_lib's top: the declaration of an experiment and a helper of model and tasks
    assert {p.name for p in ROOT.glob("*.py")} == {"__init__.py", "experiment.py", "primes.py"}
    assert set(BELOW) | {"experiments", "pipeline", "site"} == {
        p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}


def test_the_tests_mirror_the_folders():
    # tests/<folder>/ tests rt_lib/<folder>/; what spans the project (these rules) stays at the top
    tests = ROOT.parent / "tests"
    mirrored = {p.name for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py"))}
    assert mirrored == set(BELOW) | {"experiments", "pipeline", "site"}


@pytest.mark.parametrize("layer", sorted(BELOW))
def test_each_layer_imports_only_the_layers_below_it(layer):
    wrong = {f"{path.relative_to(ROOT.parent)} imports {part}"
             for path in sorted((ROOT / layer).rglob("*.py"))
             for part in layers_imported(path) - BELOW[layer]}
    assert not wrong, sorted(wrong)


def test_a_layer_import_from_above_is_found():
    # the probe of a task importing training (a task above the loop that trains it) is refused
    probe = ROOT / "tasks" / "probe.py"
    assert layers_imported(probe, "from rt_lib.training.train import train\n") - BELOW["tasks"] == {"training"}
    assert layers_imported(probe, "from ..runtime import seeding\n") - BELOW["tasks"] == set()
    assert layers_imported(probe, "from .base import Task\n") == set()


def test_the_experiments_import_nothing_from_the_pipeline_or_the_site():
    modules = sorted((ROOT / "experiments").glob("*.py"))
    assert len(modules) > 15
    assert not [line for path in modules
                for line in upward(path, upper=("rt_lib.pipeline", "rt_lib.site"))]


def test_the_site_imports_nothing_from_the_pipeline_the_experiments_the_figures_or_analyses():
    # what the site shows is drawn by the notebooks (their figures and kernel-free explorers,
    # rt_lib/plots/); the site renders pages and keeps evidence
    modules = sorted((ROOT / "site").glob("*.py"))
    assert {"pages.py", "evidence.py"} <= {p.name for p in modules}
    assert not [line for path in modules
                for line in upward(path, upper=("rt_lib.pipeline", "rt_lib.experiments",
                                                "rt_lib.plots", "rt_lib.analysis"))]


@pytest.mark.parametrize("source", [
    "from rt_lib.pipeline.registry import Experiment\n",
    "def f():\n    from rt_lib.pipeline import runner\n",  # a lazy import counts too
    "import rt_lib.experiments.miiii_training\n",
    "from rt_lib import pipeline\n",
    "from .site.pages import SITE\n",
    "from rt_lib.site import evidence\n",
])
def test_an_upward_import_is_found(source):
    assert upward(ROOT / "probe.py", source), source


@pytest.mark.parametrize("source", [
    "from rt_lib.model import build_model\n",
    "from .base import Task\n",
    "import rt_lib.pipelines_of_another_kind\n",  # a name that only starts alike
])
def test_a_core_import_is_not(source):
    assert not upward(ROOT / "tasks" / "probe.py", source), source


def test_a_relative_import_is_resolved_against_the_files_package():
    assert (1, "rt_lib.tasks.base") in imported(ROOT / "tasks" / "probe.py", "from .base import Task\n")
    assert (1, "rt_lib.model") in imported(ROOT / "tasks" / "probe.py", "from ..model import x\n")


def test_each_experiment_module_is_named_after_its_notebook():
    # docs/development.md: rt_lib/experiments/<notebook name without its number>.py, so that a
    # reader finds notebook 11's code in miiii_training.py without a search
    import importlib
    import pkgutil

    import rt_lib.experiments as package

    named = {}
    for info in pkgutil.iter_modules(package.__path__):
        experiment = getattr(importlib.import_module(f"{package.__name__}.{info.name}"),
                             "EXPERIMENT", None)
        if experiment is not None:
            named[info.name] = experiment.name
    assert len(named) == len(list((ROOT.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")))
    wrong = {module: notebook for module, notebook in named.items()
             if notebook.split("_", 1)[1] != module}
    assert not wrong, f"modules not named after their notebook: {wrong}"


def test_no_module_name_is_both_a_task_and_an_experiment():
    tasks = {p.stem for p in (ROOT / "tasks").glob("*.py")} - {"__init__"}
    experiments = {p.stem for p in (ROOT / "experiments").glob("*.py")} - {"__init__"}
    assert not tasks & experiments


def notebook_modules() -> set[str]:
    """The experiment modules that are a notebook's (they declare its EXPERIMENT), by stem."""
    return {p.stem for p in (ROOT / "experiments").glob("*.py")
            if "\nEXPERIMENT = " in p.read_text(encoding="utf-8")}


def notebook_imports(path: Path, source: str | None = None) -> set[str]:
    """The other notebooks' modules that the experiment module ``path`` imports."""
    mods = notebook_modules()
    return {module.split(".")[2] for _, module in imported(path, source)
            if module.startswith("rt_lib.experiments.") and module.split(".")[2] in mods} - {path.stem}


def test_no_experiment_module_imports_another_notebooks_module():
    assert {"miiii_training", "miiii_embeddings", "random_miiii"} <= notebook_modules()
    assert "miiii_common" not in notebook_modules()
    # 06 and 09, which build on 01-05's and 08's settings, ask for those notebooks' experiments
    # by name (rt_lib.experiments.common.experiment_of)
    found = {p.stem: notebook_imports(p) for p in sorted((ROOT / "experiments").glob("*.py"))}
    assert {stem: mods for stem, mods in found.items() if mods} == {}


def test_a_notebook_experiment_is_found_by_its_name_and_an_unknown_one_refused():
    from rt_lib.experiments.common import experiment_of
    from rt_lib.experiments.needle_in_a_haystack import EXPERIMENT, NeedleParams

    assert experiment_of("02_needle_in_a_haystack") is EXPERIMENT
    assert experiment_of("02_needle_in_a_haystack").params is NeedleParams
    for wrong in ("02_needle", "03_needle_in_a_haystack", "needle_in_a_haystack", "02_common",
                  "02_../tasks"):
        with pytest.raises(ValueError, match="no experiment"):
            experiment_of(wrong)


def test_a_notebook_module_importing_another_is_found():
    probe = ROOT / "experiments" / "miiii_neurons.py"
    assert notebook_imports(probe, "from rt_lib.experiments.miiii_training import run\n") == {"miiii_training"}
    assert notebook_imports(probe, "from rt_lib.experiments import miiii_training\n") == {"miiii_training"}
    assert notebook_imports(probe, "from rt_lib.experiments.miiii_common import run\n") == set()


def import_graph(sources: dict[str, str] | None = None) -> dict[str, set[str]]:
    """{module: the rt_lib modules it imports (lazily too)} over every module of rt_lib, or over
    ``sources`` ({module name: its source}) instead."""
    files = {".".join(("rt_lib", *p.relative_to(ROOT).with_suffix("").parts)).removesuffix(".__init__"): p
             for p in ROOT.rglob("*.py")}
    texts = sources if sources is not None else {m: p.read_text(encoding="utf-8") for m, p in files.items()}
    probe = ROOT / "probe.py"
    return {m: {d for _, d in imported(files.get(m, probe), text) if d in texts and d != m}
            for m, text in texts.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: each strongly connected set of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for dep in sorted(graph[node]):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            part = []
            while True:
                top = stack.pop()
                part.append(top)
                if top == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other_even_lazily():
    # e.g. claims/ledger.py and claims/portable.py did (a lazy import each way): the ledger's
    # tolerances are read by the portable comparison, which the ledger does not need
    assert len(import_graph()) > 70
    assert cycles(import_graph()) == []


def test_an_import_cycle_is_found():
    sources = {"rt_lib.a": "from rt_lib.b import x\n", "rt_lib.b": "def f():\n    import rt_lib.a\n",
               "rt_lib.c": "import rt_lib.a\n"}
    assert cycles(import_graph(sources)) == [["rt_lib.a", "rt_lib.b"]]
