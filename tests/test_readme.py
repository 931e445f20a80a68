"""The Python examples in README.md run as printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
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
    if "harness_explore" in BLOCKS[index]:
        _run_pytest_example(BLOCKS[index], tmp_path)
        return
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


def _run_pytest_example(block: str, tmp_path: Path) -> None:
    """The README's pytest example fails as it says, and passes once fixed as it says."""
    test_file = tmp_path / "test_processor.py"
    test_file.write_text(block, encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", test_file.name]
    env = {**os.environ, "HARNESS_PROFILE": "dev"}
    env.pop("PYTEST_XDIST_WORKER", None)
    failing = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert failing.returncode == 1, failing.stdout + failing.stderr
    for line in (
        "at-least-once does NOT hold for test_processor:forward",
        "lost x1: records [r0]",
        "shrunk schedule (3 steps",
        "replay: python -m harness replay .harness/failures/forward-",
        "replay in pytest: pytest test_processor.py::test_forward_delivers_at_least_once",
    ):
        assert line in failing.stdout, (line, failing.stdout)
    put = '        ctx.offsets.put("in-0", record.next)\n'
    fixed = block.replace(put, "").replace("        out.commit()\n", "        out.commit()\n" + put)
    assert fixed != block
    test_file.write_text(fixed, encoding="utf-8")
    passing = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, env=env)
    assert passing.returncode == 0, passing.stdout + passing.stderr
