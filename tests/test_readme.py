"""The Python examples in README.md run as printed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.log.storage.memory import forget_memory_namespaces
from harness.offsets import LevelDBOffsetStore

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    scope: dict[str, object] = {"__name__": "readme_example", "MyStore": LevelDBOffsetStore}
    exec(compile(BLOCKS[index], f"README.md example {index}", "exec"), scope)
    # A block that defines tests (the conformance recipe) is run the way pytest would.
    for name, value in list(scope.items()):
        if name.startswith("test_") and callable(value):
            marks = getattr(value, "pytestmark", [])
            (check_values,) = [m.args[1] for m in marks if m.name == "parametrize"]
            for number, check in enumerate(check_values):
                value(check, tmp_path / f"store-{number}")
    forget_memory_namespaces("demo")
