"""``check --engine``: the automatic choice between the local checker and Spark, by the
history's size and the memory the local checker would need, printed with its reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.history import write_history
from harness.spark.check.engine import LOCAL_BYTES_PER_EVENT, choose_engine
from harness.spark.check.generate import generate_history

pytest.importorskip("pyarrow")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("engine") / "h.parquet"
    generate_history(path, records=2000)
    return path


def test_a_small_history_goes_to_the_local_checker_with_its_size_as_the_reason(
    small: Path,
) -> None:
    choice = choose_engine(small, memory=8 * 2**30)
    assert choice.engine == "local"
    assert choice.reason.startswith("10,") and "events, below 4,000,000" in choice.reason
    assert "checker; it needs about " in choice.reason
    assert " MiB of memory of 8.0 GiB available" in choice.reason  # a small need is never 0.0
    assert "0.0 " not in choice.reason


def test_a_history_past_the_crossover_or_too_large_for_memory_goes_to_spark(
    small: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import harness.spark.check.engine as engine

    monkeypatch.setattr(engine, "_spark_missing", lambda: None)
    past = choose_engine(small, memory=8 * 2**30, spark_from=1000)
    assert past.engine == "spark" and "at least 1,000, where Spark overtakes" in past.reason
    tight = choose_engine(small, memory=LOCAL_BYTES_PER_EVENT * 100)
    assert tight.engine == "spark" and "too much for the local checker" in tight.reason
    monkeypatch.setattr(engine, "_spark_missing", lambda: "pyspark is not installed")
    stuck = choose_engine(small, memory=8 * 2**30, spark_from=1000)
    assert stuck.engine == "local"
    assert stuck.reason.endswith("but Spark cannot run here: pyspark is not installed")


def test_a_jsonl_history_stays_local(tmp_path: Path) -> None:
    from harness.history import read_history

    parquet = tmp_path / "h.parquet"
    generate_history(parquet, records=100)
    jsonl = tmp_path / "h.jsonl"
    write_history(read_history(parquet), jsonl)
    assert choose_engine(jsonl).engine == "local"
    assert "JSONL" in choose_engine(jsonl).reason


def test_check_prints_its_engine_and_why_and_local_or_auto_give_the_same_verdict(
    small: Path,
) -> None:
    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "harness",
                "check",
                str(small),
                "--guarantee",
                "exactly-once",
                *extra,
            ],
            capture_output=True,
            text=True,
            check=False,
        )

    auto, local = run(), run("--engine", "local")
    assert auto.returncode == local.returncode == 0
    assert auto.stderr.startswith("engine: local (10,") and auto.stderr.count("\n") == 1
    assert local.stderr == "" and auto.stdout == local.stdout
