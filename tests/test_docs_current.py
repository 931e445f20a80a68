"""The docs say what the code does: the marker's documented signature is the registered one,
README's core dependencies are pyproject's, and docs/pytest.md names the run budget and the
report files the plugin writes."""

from __future__ import annotations

import re
from pathlib import Path

from harness.pytest_plugin import MARKER_SIGNATURE

ROOT = Path(__file__).resolve().parent.parent


def test_the_documented_marker_signature_is_the_registered_one() -> None:
    docs = (ROOT / "docs" / "pytest.md").read_text(encoding="utf-8")
    assert f"@pytest.mark.{MARKER_SIGNATURE}" in docs
    for argument in re.findall(r"(\w+)=None", MARKER_SIGNATURE):
        assert f"`{argument}`" in docs, argument


def test_readme_lists_every_core_dependency() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (listed,) = re.findall(r"^dependencies = \[(.*?)^\]", pyproject, flags=re.M | re.S)
    names = re.findall(r'^\s*"([\w-]+)', listed, flags=re.M)  # (tomllib is Python 3.11+)
    assert "hypothesis" in names
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    (core,) = re.findall(r"\*\*Core\*\* dependencies: ([^.]*)\.", readme)
    assert sorted(re.findall(r"`([\w-]+)`", core)) == sorted(names)


def test_the_pytest_docs_promise_nothing_already_done() -> None:
    docs = (ROOT / "docs" / "pytest.md").read_text(encoding="utf-8")
    assert "will be written here too" not in docs and "until `harness.report`" not in docs
    assert ".report.html" in docs  # the plugin writes the rendered reports (_write_report)
    assert "not by a timer" not in docs  # the run budget's clock stops a run that hangs
