"""Every module of the project opens with a docstring that says what it promises.

Read with :mod:`ast`, never imported: each ``.py`` file under ``harness/``, ``scenarios/``,
``bench/``, ``examples/`` and ``tests/`` (and ``toxfile.py``) needs a module docstring of at
least :data:`MIN_WORDS` words, with no placeholder in it. Whether the words are true is the
reviewer's part; that they are there, and not a stub, is this test's.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("harness", "scenarios", "bench", "examples", "tests")
MIN_WORDS = 5
"""Fewer words cannot say what a module promises (``"Helpers."``, ``"The CLI."``)."""
PLACEHOLDER = re.compile(r"\b(TODO|FIXME|XXX|TBD)\b|^\s*(docstring|module)\.?\s*$", re.I)


def modules() -> list[Path]:
    """The project's Python files, in a stable order."""
    found = [ROOT / "toxfile.py"]
    for folder in FOLDERS:
        found.extend(sorted((ROOT / folder).rglob("*.py")))
    return [path for path in found if path.is_file()]


def problem(path: Path) -> str | None:
    """What is wrong with ``path``'s module docstring, or None."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
    if doc is None:
        return "has no module docstring"
    if len(doc.split()) < MIN_WORDS:
        return f"has a module docstring of fewer than {MIN_WORDS} words: {doc!r}"
    if PLACEHOLDER.search(doc):
        return f"has a placeholder module docstring: {doc[:60]!r}"
    return None


def test_every_module_says_what_it_promises() -> None:
    paths = modules()
    assert len(paths) > 100, "the tree was not found"
    wrong = [f"{path.relative_to(ROOT)} {found}" for path in paths if (found := problem(path))]
    assert wrong == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\n", "has no module docstring"),
        ('"""Helpers."""\n', "has a module docstring of fewer than 5 words: 'Helpers.'"),
        ('"""TODO: say what this module does here."""\n', "has a placeholder module docstring"),
        ('x = 1\n"""Not a docstring, it follows code."""\n', "has no module docstring"),
        ('"""Ordered offsets per partition, stored in LevelDB."""\n', None),
    ],
)
def test_the_rule_refuses_missing_short_and_stub_docstrings(
    tmp_path: Path, source: str, expected: str | None
) -> None:
    path = tmp_path / "module.py"
    path.write_text(source, encoding="utf-8")
    found = problem(path)
    if expected is None:
        assert found is None
    else:
        assert found is not None and found.startswith(expected)
