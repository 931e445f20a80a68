"""The layers hold: no module imports from a layer above its own.

Data flows one way (DESIGN.md): schedule -> simulator -> history -> checker -> verdict ->
report, driven by the engine, used by the catalogue and the scenarios, reached through the
front doors. Each layer below may only import from layers strictly beneath it (or from its
own package); two packages on the same layer do not import each other (the simulator and the
checker never talk). Imports are read with :mod:`ast`, never executed, and every import
counts: module level, inside functions and under ``TYPE_CHECKING`` alike.

Layers are given by module prefix, so modules other work adds inside a known package are
placed without a change here; a new top-level package of ``harness`` lands among the engine's
parts (:data:`DEFAULT_RANK`) until it is listed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("harness.errors",)),
    ("helpers", ("harness._shown", "harness._json", "harness._lazy", "harness._wal")),
    (
        "utilities",
        (
            "harness._closing",
            "harness._leveldb",
            "harness._budget",
            "harness._progress",
            "harness._output",
            "harness._usage",
        ),
    ),
    ("storage and values", ("harness.log", "harness.history", "harness.faults")),
    ("settings", ("harness.search.profiles", "harness.settings")),
    ("offset stores", ("harness.offsets",)),
    ("simulator | checker", ("harness.sim", "harness.check")),
    ("strategies | reports", ("harness.strategies", "harness.report")),
    ("catalogue", ("harness.catalogue",)),
    ("engine parts", ("harness.search",)),
    ("engine", ("harness.engine",)),
    (
        "public surface, Spark, Kafka doubles",
        ("harness.demo", "harness.spark", "harness.kafka", "harness"),
    ),
    ("scenarios", ("scenarios", "harness.scenarios")),
    ("front doors", ("harness.cli", "harness.pytest_plugin", "harness.__main__")),
)
"""Lowest first. ``harness`` alone is the package's ``__init__`` (the public surface)."""

SIDEWAYS = frozenset(
    {"settings", "engine parts", "public surface, Spark, Kafka doubles", "front doors"}
)
"""Layers whose packages may import each other (the settings value builds on the profiles;
``__main__`` runs the CLI; the public surface re-exports its homes' names; the engine's parts
serve each other). On every other layer the packages are independent."""

DEFAULT_RANK = [name for name, _ in LAYERS].index("engine parts")
"""Where an unlisted ``harness.X`` package goes: among the engine's parts, just below the
engine (what the engine, the catalogue and the front doors may use, and nothing beneath may).
List a new package where it belongs once it lands."""

KNOWN: frozenset[tuple[str, str]] = frozenset({("scenarios", "harness.cli")})
"""Edges that break the layers today and are being removed (issue 17: the scenarios drop
their ``__main__`` guards, the one import that runs back up to the CLI). Delete an entry once
its edge is gone; never add one."""


def _placement() -> list[tuple[str, int, str]]:
    found = [
        (prefix, rank, name) for rank, (name, prefixes) in enumerate(LAYERS) for prefix in prefixes
    ]
    return sorted(found, key=lambda item: -len(item[0]))


PLACEMENT = _placement()


def layer_of(module: str) -> tuple[int, str, str]:
    """``(rank, layer name, package prefix)`` of ``module``; the longest prefix wins."""
    for prefix, rank, name in PLACEMENT:
        if prefix == "harness":
            if module == "harness":
                return rank, name, prefix
            continue
        if module == prefix or module.startswith(prefix + "."):
            return rank, name, prefix
    if module.startswith("harness."):
        package = ".".join(module.split(".")[:2])
        return DEFAULT_RANK, "unlisted", package
    raise AssertionError(f"{module} is outside the project")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(source: str, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """Every module ``source`` imports, with its line, relative imports resolved;
    ``from pkg import name`` is ``pkg.name`` when that is a module of the tree, else ``pkg``."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[: len(base) - node.level + 1]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield (sub if _in_tree(sub) else target), node.lineno


def _project(name: str) -> bool:
    return name == "harness" or name.startswith(("harness.", "scenarios"))


def _in_tree(name: str) -> bool:
    path = ROOT / Path(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def back_edges(module: str, source: str, is_package: bool) -> list[str]:
    """The imports in ``source`` (of ``module``) that reach a layer above, or sideways into
    another package of its own layer."""
    rank, name, prefix = layer_of(module)
    problems = []
    seen = set()
    for target, line in imports(source, module, is_package):
        if not _project(target):
            continue
        other_rank, other_name, other_prefix = layer_of(target)
        if other_prefix == prefix or (prefix.split(".")[0], other_prefix) in KNOWN:
            continue
        if (line, other_prefix) in seen:
            continue
        seen.add((line, other_prefix))
        if other_rank > rank or (other_rank == rank and LAYERS[rank][0] not in SIDEWAYS):
            problems.append(
                f"{module}:{line} imports {target}: {name} ({prefix}) must not import from "
                f"{other_name} ({other_prefix})"
            )
    return problems


def _sources() -> list[Path]:
    return sorted([*ROOT.glob("harness/**/*.py"), *ROOT.glob("scenarios/**/*.py")])


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    problems = []
    for path in _sources():
        module = module_name(path)
        problems += back_edges(module, path.read_text(encoding="utf-8"), path.stem == "__init__")
    assert problems == []


def test_every_package_of_the_tree_is_placed_on_a_layer() -> None:
    packages = {".".join(module_name(p).split(".")[:2]) for p in ROOT.glob("harness/*")}
    unlisted = sorted(p for p in packages if layer_of(p)[1] == "unlisted")
    assert unlisted == [] or all(layer_of(p)[0] == DEFAULT_RANK for p in unlisted)
    assert layer_of("harness.sim.simulator")[1] == layer_of("harness.check.local")[1]
    assert layer_of("harness")[0] < layer_of("scenarios.alpakka_batches")[0]


@pytest.mark.parametrize(
    ("module", "source", "offender"),
    [
        ("harness.sim.world", "from harness.check import check", "harness.check"),
        ("harness.check.local", "import harness.report.text", "harness.report.text"),
        ("harness.report.write", "from harness.engine import Failure", "harness.engine"),
        (
            "harness.report.write",
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import engine",
            "harness.engine",
        ),
        (
            "harness.log.reader",
            "def f():\n    from harness.sim import context",
            "harness.sim.context",
        ),
        ("harness.offsets.memory", "from ..sim import simulator", "harness.sim.simulator"),
        ("harness.engine.explorer", "from harness.kafka import consumer", "harness.kafka"),
        ("harness.engine.explorer", "import harness.spark.checker", "harness.spark.checker"),
        (
            "harness.catalogue.subject",
            "from harness.pytest_plugin import Explorer",
            "harness.pytest_plugin",
        ),
        # the catalogue is data the engine searches: it never runs a search itself
        (
            "harness.catalogue.pitfalls",
            "from harness.engine import explore",
            "harness.engine",
        ),
        (
            "harness.search.drawn",
            "from harness.engine.results import Failure",
            "harness.engine.results",
        ),
        ("scenarios.alpakka_batches", "from harness.cli import main", None),
        ("harness.search.systematic", "from harness import cli", "harness.cli"),
        # a package not listed yet counts as an engine part
        ("harness.sim.world", "from harness.newpart import x", "harness.newpart"),
        ("harness.newpart.x", "from harness.engine import explore", "harness.engine"),
        ("harness.engine.explorer", "from harness.newpart import x", None),
        ("harness.search.systematic", "from harness.newpart.y import x", None),
    ],
)
def test_a_back_edge_is_caught(module: str, source: str, offender: str | None) -> None:
    found = back_edges(module, source, is_package=False)
    if offender is None:  # allowed: a known edge being removed (see KNOWN), or downwards
        assert found == []
    else:
        assert len(found) == 1 and f" imports {offender}: " in found[0], found


def test_imports_downwards_and_within_a_package_are_allowed() -> None:
    source = (
        "from harness.check import check\nfrom harness.report.subject import Reported\n"
        "from . import schedules\nimport harness.errors\n"
    )
    assert (
        back_edges(
            "harness.engine.explorer", source.replace("from . import schedules\n", ""), False
        )
        == []
    )
    assert back_edges("harness.strategies.other", "from . import schedules", False) == []
    assert back_edges("harness.sim.world", "from harness.log.namespace import x", False) == []
