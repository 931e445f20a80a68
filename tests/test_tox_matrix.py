"""Every Spark test file runs somewhere: the fast envs leave ``tests/test_spark_*`` out
(``--ignore-glob``), so a Spark test file that no env names explicitly would never run, in CI
or with README's second command, and nothing would say so."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_spark_test_file_is_named_by_an_env_of_the_matrix() -> None:
    tox = (ROOT / "tox.ini").read_text(encoding="utf-8")
    assert "--ignore-glob=tests/test_spark_*" in tox  # why the files must be named
    files = sorted(p.name for p in (ROOT / "tests").glob("test_spark_*.py"))
    assert files, "no Spark test file found"
    missing = [name for name in files if f"tests/{name}" not in tox]
    assert missing == [], f"Spark test files no tox env runs: {missing}"
