"""The wheel holds every package of the tree, and the scenarios only under ``harness``.

``pyproject.toml`` lists the packages (so that the repository's ``scenarios/`` folder can
install as ``harness.scenarios``); this test fails when a package is added to the tree and
not to that list, or listed and gone, before a wheel without it could ship.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _config() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        setuptools: dict[str, object] = tomllib.load(file)["tool"]["setuptools"]
    return setuptools


def _packages_in(folder: Path, name: str) -> set[str]:
    """``name`` and every folder below ``folder`` that holds Python modules, as packages."""
    found = {name}
    for path in folder.rglob("*.py"):
        parent = path.parent.relative_to(folder)
        if "__pycache__" not in parent.parts:
            found.add(".".join((name, *parent.parts)) if parent.parts else name)
    return found


def test_the_listed_packages_are_the_tree() -> None:
    config = _config()
    listed = set(config["packages"])  # type: ignore[call-overload]
    in_tree = _packages_in(ROOT / "harness", "harness") | _packages_in(
        ROOT / "scenarios", "harness.scenarios"
    )
    assert sorted(in_tree - listed) == [], "add these to [tool.setuptools] packages"
    assert sorted(listed - in_tree) == [], "these are listed but gone"


def test_the_scenarios_install_under_harness_only() -> None:
    config = _config()
    assert config["package-dir"] == {"harness.scenarios": "scenarios"}
    assert not any(p == "scenarios" or p.startswith("scenarios.") for p in config["packages"])  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "module", ["harness.scenarios.alpakka_batches", "harness.scenarios.kafka_clients"]
)
def test_the_scenarios_import_under_harness(module: str) -> None:
    __import__(module)
    assert module in sys.modules
