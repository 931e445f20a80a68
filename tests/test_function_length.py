"""No function of the project is longer than 80 lines outside the tests.

Read with :mod:`ast`, never imported: every function and method (nested ones included) of
each ``.py`` file under ``harness/``, ``scenarios/``, ``bench/`` and ``examples/``, and of
``toxfile.py``, spans at most :data:`MAX_LINES` lines from its ``def`` (decorators aside) to
its last line.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("harness", "scenarios", "bench", "examples")
MAX_LINES = 80


def long_functions(path: Path, relative: str) -> list[str]:
    """``"<relative> <name> (<n> lines)"`` for each function of ``path`` over the limit."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_LINES:
                found.append(f"{relative} {node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines() -> None:
    paths = [ROOT / "toxfile.py"]
    for folder in FOLDERS:
        paths.extend(sorted((ROOT / folder).rglob("*.py")))
    assert len(paths) > 100, "the tree was not found"
    found = []
    for path in paths:
        if path.is_file():
            found.extend(long_functions(path, path.relative_to(ROOT).as_posix()))
    assert found == []


def test_the_rule_measures_from_def_to_the_last_line(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES - 1))
    path = tmp_path / "m.py"
    path.write_text(f"@decorated\ndef fits():\n{body}\n\ndef too_long():\n{body}    x = 0\n")
    assert long_functions(path, "m.py") == [f"m.py too_long ({MAX_LINES + 1} lines)"]
