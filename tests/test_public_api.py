"""The public surface stays small and honest, and importing it stays light."""

from __future__ import annotations

import subprocess
import sys

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
