"""Notebook parameters (one base class) and the experiments' registry (claims: test_claims.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from rt_lib.experiment import folder_name, slug
from rt_lib.pipeline import plan as planning
from rt_lib.pipeline import runner
from rt_lib.pipeline.registry import registry
from rt_lib.runtime.params import Params, parameters_cell


@dataclass(frozen=True)
class Toy(Params):
    lr: float = 1e-3
    steps: int = 10
    widths: tuple[int, ...] = (16,)
    batch_size: int | None = None
    bf16: bool = False
    name: str = "a"
    extra: dict = field(default_factory=dict)
    named: dict[str, float] = field(default_factory=dict)

    def check(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")


@pytest.mark.parametrize("name, value, message", [
    ("lr", "abc", "lr must be a number, got 'abc'"),
    ("steps", 2.5, "steps must be an integer, got 2.5"),
    ("steps", True, "steps must be an integer, got True"),  # a bool is not a count
    ("widths", [16, "x"], "widths[1] must be an integer, got 'x'"),
    ("widths", 16, "widths must be a list of integers, got 16"),
    ("batch_size", "all", "batch_size must be an integer or None, got 'all'"),
    ("bf16", "yes", "bf16 must be true or false, got 'yes'"),
    ("name", 3, "name must be a string, got 3"),
    ("extra", [1], "extra must be a mapping, got [1]"),
    ("named", [1], "named must be a mapping with strings as keys, got [1]"),
    ("named", {1: 0.5}, "named's key must be a string, got 1"),
    ("named", {"lr": "x"}, "named['lr'] must be a number, got 'x'"),
])
def test_a_value_of_the_wrong_type_is_refused_naming_the_parameter(name, value, message):
    with pytest.raises(TypeError) as info:
        Toy(**{name: value})
    assert str(info.value) == message


def test_values_are_coerced_once_and_the_subclass_check_runs():
    toy = Toy(lr=1, widths=[8, 16], batch_size=None, named={"lr": 1})
    assert toy.lr == 1.0 and isinstance(toy.lr, float) and toy.widths == (8, 16)
    assert toy.named == {"lr": 1.0} and isinstance(toy.named["lr"], float)
    with pytest.raises(ValueError, match="steps must be >= 1"):
        Toy(steps=0)


def test_from_namespace_takes_the_fields_found_and_changes_from_lists_what_differs():
    toy = Toy.from_namespace({"lr": 0.5, "widths": [32], "unrelated": 1, "__name__": "x"})
    assert toy == Toy(lr=0.5, widths=(32,))
    assert toy.changes_from(Toy()) == {"lr": 0.5, "widths": (32,)}
    from rt_lib.experiments.modular_addition import ModularAdditionParams

    # threads change no number (one thread per notebook is a speed choice): not a change
    assert ModularAdditionParams(threads=2).changes_from(ModularAdditionParams()) == {}


def test_folder_names_read_as_the_changes_and_long_ones_as_a_hash():
    assert folder_name("01_x", {}) == "01_x"
    assert folder_name("01_x", {"p": 4, "widths": (64, 128)}) == "01_x+p=4,widths=[64,128]"
    long = slug({"space": {"lr": [1e-3, 3e-4], "dropout": [0.0, 0.1, 0.2]}, "x": "a/b"})
    assert long.startswith("h") and len(long) == 11
    assert long == slug({"x": "a/b", "space": {"dropout": [0.0, 0.1, 0.2], "lr": [1e-3, 3e-4]}})


def _parameters_cell(path):
    return runner.default_parameters(path)


@pytest.mark.parametrize("name", sorted(runner.available_notebooks()))
def test_every_declared_parameter_reaches_the_notebooks_parameters(name):
    """A name in the parameters cell that the experiment's Params lacks would be accepted by
    papermill and silently ignored; and the notebook must build its Params from the whole cell
    (one call), not pick its arguments one by one."""
    path = runner.available_notebooks()[name]
    experiment = registry()[name]
    cell = _parameters_cell(path)
    assert set(cell) <= set(experiment.params.names()), sorted(set(cell) - set(experiment.params.names()))
    # papermill must see every one too (it skips a line it cannot parse, e.g. " = " in a comment,
    # and would then refuse to inject that parameter)
    assert runner.notebook_parameters(path) == set(cell)
    code = [("".join(c["source"])) for c in json.loads(path.read_text())["cells"]
            if c["cell_type"] == "code"]
    assert "EXPERIMENT.start(globals())" in code[1]
    assert experiment.params.__name__ + "(" not in "".join(code[1:])


@pytest.mark.parametrize("name", sorted(runner.available_notebooks()))
def test_a_notebooks_defaults_are_its_experiments_cpu_profile(name, monkeypatch, tmp_path):
    """The committed parameters cell and the Params defaults agree, so a run of the committed
    notebook is the profile's own (its own folder, claims asserted)."""
    monkeypatch.setenv("RT_TINYSTORIES", str(tmp_path))  # 08 checks that its data path exists
    path = runner.available_notebooks()[name]
    experiment = registry()[name]
    built = experiment.params.from_namespace(_parameters_cell(path))
    assert built.changes_from(experiment.params()) == {}


def test_the_registry_holds_one_experiment_per_notebook_and_what_it_reads():
    books = runner.available_notebooks()
    assert set(registry()) == set(books)
    reads = planning.needs()
    assert reads["07_table1"] == {"01_modular_addition", "02_needle_in_a_haystack",
                                  "03_decimal_addition", "04_parentheses"}
    assert reads["13_miiii_neurons"] == {"11_miiii_training"}
    assert all(name > other for name, read in reads.items() for other in read)  # run after


@pytest.mark.parametrize("name", sorted(runner.available_notebooks()))
def test_a_notebooks_parameters_cell_is_written_from_its_params_class(name):
    """One place for a notebook's defaults: its Params class.  The committed parameters cell is
    exactly what scripts/parameters_cells.py writes from it (run that script after changing a
    default or its comment)."""
    cell = next("".join(c["source"]) for c in
                json.loads(runner.available_notebooks()[name].read_text())["cells"]
                if "parameters" in c.get("metadata", {}).get("tags", []))
    assert cell == registry()[name].parameters_cell()


def test_the_cell_shows_each_default_and_comment_of_the_class_and_runs_to_them():
    @dataclass(frozen=True)
    class Base(Params):
        shared: int = 1  # the base's comment
        hidden: int = 2  # not in the cell
        lr: float = 1e-3

    @dataclass(frozen=True)
    class Leaf(Base):
        CELL_OMITS: ClassVar[frozenset[str]] = frozenset({"hidden"})
        own: tuple[str, ...] = ("a", "b")  # the leaf's own field comes first
        lr: float = 5e-4  # the leaf's comment replaces the base's (none)
        big: int = 65536
        items: tuple[int, ...] = field(default=(3,))

    cell = parameters_cell(Leaf, "here.py")
    body = [line for line in cell.splitlines() if not line.startswith("#")]
    assert [line.split(" =")[0] for line in body] == ["own", "big", "items", "shared", "lr"]
    assert 'own = ["a", "b"]' in cell and "# the leaf's own field comes first" in cell
    assert "lr = 5e-4" in cell and "# the leaf's comment replaces the base's (none)" in cell
    assert "big = 65_536" in cell and "# the base's comment" in cell and "hidden" not in cell
    namespace: dict = {}
    exec(cell, namespace)  # the cell builds exactly the class defaults
    assert Leaf.from_namespace(namespace) == Leaf()


def test_a_grid_notebooks_recipe_has_one_home_its_own_parameters():
    """TrainConfig and GridParams hold no recipe value: each grid notebook's class sets its
    widths, steps, batch, lr, warm-up and evaluations (its CPU profile), the one value that
    runs; a class that forgot one fails to build, naming it."""
    from dataclasses import MISSING, fields

    from rt_lib.experiments.common import GridParams
    from rt_lib.training.train import TrainConfig

    recipe = ("widths", "steps", "batch_size", "lr", "warmup_steps", "eval_every")
    base = {f.name: f for f in fields(GridParams)}
    assert all(base[n].default is MISSING and base[n].default_factory is MISSING for n in recipe)
    train = {f.name: f for f in fields(TrainConfig)}
    assert all(train[n].default is MISSING for n in ("steps", "batch_size", "lr", "weight_decay",
                                                     "warmup_steps"))
    grids = [e.params for e in registry().values() if issubclass(e.params, GridParams)]
    assert len(grids) >= 7
    for cls in grids:
        own = {f.name: f for f in fields(cls)}
        assert all(own[n].default is not MISSING or own[n].default_factory is not MISSING
                   for n in recipe), cls.__name__
    with pytest.raises(TypeError, match="'lr'"):
        dataclass(frozen=True)(type("NoRecipe", (GridParams,), {}))()
