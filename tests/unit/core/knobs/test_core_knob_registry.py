"""Adding a knob is one module plus a table row: the registry, the table and the modules agree,
and the modules that rank, plan and diagnose name no knob of their own."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest
from tests.unit.core.builders import H100, command_line

from latency_tuner.api.spec import Knobs
from latency_tuner.core import candidates, diagnosis, planner
from latency_tuner.core import knobs as knob_package
from latency_tuner.core.config_view import view
from latency_tuner.core.evidence import Bottleneck
from latency_tuner.core.knobs import CATALOG, Knob, KnobName
from latency_tuner.core.knobs.base import FixKnob
from latency_tuner.core.knobs.table import AHEAD, FIXES, TABLE, Fix

# The package's shared parts; every other module is one knob.
NOT_KNOBS = {"base", "registry", "table"}


def knob_modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.iter_modules(knob_package.__path__)
        if info.name not in NOT_KNOBS
    )


def test_every_knob_name_has_exactly_one_registered_knob() -> None:
    assert list(CATALOG) == [k.name for k in CATALOG.values()]
    assert set(CATALOG) == set(KnobName)


def test_every_knob_the_spec_lets_a_user_allow_has_a_module() -> None:
    spec_names = {field.alias or name for name, field in Knobs.model_fields.items()}
    assert spec_names <= {name.value for name in CATALOG}


@pytest.mark.parametrize("module_name", knob_modules())
def test_every_knob_module_implements_the_protocol_and_is_registered(module_name: str) -> None:
    module = importlib.import_module(f"latency_tuner.core.knobs.{module_name}")
    knob = getattr(module, "KNOB", None)
    assert isinstance(knob, Knob), f"{module_name} has no KNOB implementing the Knob protocol"
    assert CATALOG[knob.name] is knob, f"{module_name}'s KNOB is missing from the registry"
    assert not inspect.isabstract(type(knob))
    assert knob.flag
    assert knob.what
    assert module.__doc__
    assert module.__doc__.strip().endswith("Pure.")


def test_each_registered_knob_lives_in_its_own_module() -> None:
    homes = [type(knob).__module__ for knob in CATALOG.values()]
    assert len(set(homes)) == len(homes)
    assert sorted(home.rsplit(".", 1)[1] for home in homes) == knob_modules()


def test_every_table_row_names_registered_knobs_and_every_bottleneck_has_a_row() -> None:
    assert set(TABLE) == set(Bottleneck)
    entries = [e for row in TABLE.values() for e in row] + [a.entry for a in AHEAD]
    assert all(e.knob in CATALOG for e in entries)
    assert all(e.direction in (-1, 0, 1) for e in entries)
    assert all(fix.knob in CATALOG for fix in FIXES)


def test_every_knob_is_pulled_by_some_row_or_fixes_some_finding() -> None:
    pulled = {e.knob for row in TABLE.values() for e in row} | {a.entry.knob for a in AHEAD}
    assert pulled | {fix.knob for fix in FIXES} == set(CATALOG)


@pytest.mark.parametrize(
    ("fix", "flags"),
    [(FIXES[0], ("--cpu-offload-gb", "8")), (FIXES[1], ("--enforce-eager",))],
    ids=["cpu-offload", "enforce-eager"],
)
def test_each_fix_knob_detects_its_own_finding(fix: Fix, flags: tuple[str, ...]) -> None:
    knob = CATALOG[fix.knob]
    assert knob.detect(view(command_line(), H100)) is None
    detected = knob.detect(view(command_line(*flags), H100))
    assert detected is not None
    assert detected.finding is fix.finding


def test_every_knob_that_undoes_a_deployment_problem_has_its_fix_row() -> None:
    fix_knobs = {name for name, knob in CATALOG.items() if isinstance(knob, FixKnob)}
    assert fix_knobs == {fix.knob for fix in FIXES}


@pytest.mark.parametrize("module", [candidates, planner, diagnosis], ids=lambda m: m.__name__)
def test_ranking_planning_and_diagnosis_name_no_knob(module: ModuleType) -> None:
    source = Path(inspect.getfile(module)).read_text()
    named = [
        node.attr
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "KnobName"
    ]
    assert named == [], f"knob-specific code belongs in the knob's module: {named}"
