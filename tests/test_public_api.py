"""The public surface stays small and honest, and importing it stays light."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import harness
import harness.errors
import harness.log
import harness.offsets


def test_every_name_in_all_exists_and_is_listed_once() -> None:
    for module in (harness, harness.log, harness.offsets, harness.errors):
        names = module.__all__
        assert len(names) == len(set(names)), module.__name__
        missing = [name for name in names if not hasattr(module, name)]
        assert missing == [], f"{module.__name__}.__all__ lists missing names {missing}"


def test_the_top_level_reexports_every_error() -> None:
    assert set(harness.errors.__all__) <= set(harness.__all__)


def test_public_classes_are_documented() -> None:
    undocumented = [
        name
        for name in harness.__all__
        if isinstance(getattr(harness, name), type) and not getattr(harness, name).__doc__
    ]
    assert undocumented == []


def test_importing_harness_loads_neither_pyspark_nor_plyvel() -> None:
    code = (
        "import sys, harness, harness.log, harness.offsets, harness.cli; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyspark', 'plyvel', 'py4j', 'pyarrow')); print(heavy)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def _listed_names() -> dict[str, set[str]]:
    """Every public module of ``harness`` (no ``_`` in its path) by the names its
    ``__all__`` lists, read with :mod:`ast` (nothing imported: Spark's modules need pyspark)."""
    root = Path(harness.__file__).parent
    listed: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = ["harness", *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        if any(part.startswith("_") for part in parts[1:]) or parts[1:2] == ["scenarios"]:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(
                isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
            ):
                for name in ast.literal_eval(node.value):
                    listed.setdefault(name, set()).add(".".join(parts))
    return listed


def test_every_public_name_has_one_home_and_the_top_level_all_is_derived_from_them() -> None:
    """A public name is listed in the ``__all__`` of one package (and of the module inside it
    that defines it), never re-exported from a second place: ``harness.X`` is its home, and
    the top level's ``__all__`` is exactly the homes' names (``_LAZY``) and the errors."""
    homes = {name: module for module, names in harness._LAZY.items() for name in names}
    homes.update(dict.fromkeys(harness.errors.__all__, "harness.errors"))
    assert sorted(harness.__all__) == sorted([*homes, "__version__"])
    listed = _listed_names()
    strays = {
        name: sorted(
            module
            for module in listed.get(name, ())
            if module != "harness" and not (module + ".").startswith(home + ".")
        )
        for name, home in homes.items()
    }
    assert {name: where for name, where in strays.items() if where} == {}
    unlisted = sorted(name for name, home in homes.items() if home not in listed.get(name, ()))
    assert unlisted == [], "each home lists its names in its own __all__"
    for name, home in homes.items():
        assert getattr(importlib.import_module(home), name) is getattr(harness, name), name
