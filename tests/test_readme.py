"""The Python examples in README.md run as printed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import types
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


SHELL_BLOCKS = re.findall(r"```sh\n(.*?)```", README.read_text(), flags=re.DOTALL)
ROOT = README.parent


def test_ci_runs_the_readmes_second_command_as_written() -> None:
    second = SHELL_BLOCKS[1].strip()
    assert second.endswith(".venv/bin/tox")
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci_lines[-1] == second
    # no environment prepared by .ci/run alone: the README command must behave the same
    assert not any(line.startswith("export ") for line in ci_lines)


def test_the_readme_says_what_the_long_command_costs_and_gives_the_fast_path() -> None:
    text = README.read_text(encoding="utf-8")
    start = text.index(SHELL_BLOCKS[1])
    beside = text[start : start + 1500]
    for said in ("50 minutes", "450 MB", "fails", "a few minutes", ".venv/bin/tox -e py\n"):
        assert said in beside, said


def test_tox_fails_on_a_missing_interpreter_instead_of_skipping_it() -> None:
    import configparser

    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini", encoding="utf-8")
    assert tox["tox"]["skip_missing_interpreters"] == "false"
    assert "PYENV_VERSION" in tox["testenv"]["passenv"].split()


def test_toxfile_adds_the_newest_pyenv_version_of_each_matrix_minor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # tox's own environments have no tox: give toxfile.py a stand-in for its one tox import
    plugin = types.ModuleType("tox.plugin")
    plugin.impl = lambda hook: hook  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tox", types.ModuleType("tox"))
    monkeypatch.setitem(sys.modules, "tox.plugin", plugin)
    monkeypatch.delitem(sys.modules, "toxfile", raising=False)
    monkeypatch.syspath_prepend(str(ROOT))
    import toxfile

    installed = ["2.7.18", "3.9.18", "3.10.2", "3.10.13", "3.11.7", "3.12.1", "3.13.0", "3.13-dev"]
    assert toxfile.pyenv_versions(["3.11.7"], installed) == [
        "3.11.7",
        "3.10.13",
        "3.12.1",
        "3.13.0",
    ]
    # what is active stays first (pyenv's python3 is still the user's); a missing minor stays
    # missing, for tox to fail on
    assert toxfile.pyenv_versions(["system"], ["3.12.1"]) == ["system", "3.12.1"]


def test_the_package_metadata_names_its_license_and_classifiers() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '\nlicense = "Apache-2.0"\n' in pyproject
    assert '\nlicense-files = ["LICENSE"]\n' in pyproject
    license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    minors = set(re.findall(r'"Programming Language :: Python :: (3\.\d+)"', pyproject))
    assert minors == {"3.10", "3.11", "3.12", "3.13"}
