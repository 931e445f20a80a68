"""The Spark checker against the local checker on the anomalies of issue 31: the log's own
(``inconsistent-offsets``, ``log-duplicate``, ``nonmonotonic-send``), readers that go back
(``nonmonotonic-poll``), sends without an answer (``indeterminate``), producers' retries
(``retried``) and rebalance events (judged by neither checker).

Runs with the log's own forms are judged on the driver by the local rules (small ones; a
larger one is UNKNOWN with a reason); backward reads are found by Spark's partition pass.

Run only these when touching them (Spark is heavy):
``pytest tests/test_spark_log_anomalies.py -p no:cacheprovider``.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("pyspark", reason="the Spark checker needs pyspark")

import test_jepsen_histories as translated
from test_spark_checker import check_both, spark, write_runs

from harness.check import AnomalyKind, Guarantee, Status, check
from harness.history import EventKind, History, read_history
from harness.spark.check.generate import Plan, generate_history

__all__ = ["spark"]  # the Spark checker tests' session fixture, shared


def translated_histories(monkeypatch: pytest.MonkeyPatch) -> list[History]:
    """Every history the translated peer tests check (each test run once, its checks
    recorded)."""
    seen: list[History] = []

    def recording(history: History, guarantee: Guarantee) -> Any:
        if all(history is not other for other in seen):
            seen.append(history)
        return check(history, guarantee)

    monkeypatch.setattr(translated, "check", recording)
    for name, test in sorted(vars(translated).items()):
        if name.startswith("test_") and inspect.isfunction(test):
            arguments = inspect.signature(test).parameters
            if arguments:
                for guarantee in Guarantee:
                    test(guarantee)
            else:
                test()
    return seen


@pytest.mark.slow
def test_the_translated_peer_histories_and_drawn_ones_are_judged_alike(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from test_spark_checker import drawn

    from harness.strategies.histories import histories

    runs = translated_histories(monkeypatch)
    assert len(runs) >= 15
    runs += drawn(histories(), 40)
    # rebalance events (schema 4) are carried through both checkers and judged by neither
    assert any(e.kind is EventKind.REBALANCE for h in runs for e in h.events)
    stored = write_runs(tmp_path, runs)
    found = {a.kind for h in stored.values() for a in check(h, Guarantee.EXACTLY_ONCE).anomalies}
    new = {
        AnomalyKind.INCONSISTENT_OFFSETS,
        AnomalyKind.LOG_DUPLICATE,
        AnomalyKind.NONMONOTONIC_POLL,
        AnomalyKind.NONMONOTONIC_SEND,
    }
    assert new <= found
    check_both(tmp_path, stored, spark)


@pytest.mark.slow
def test_backward_reads_are_found_by_the_partition_pass_with_exact_counts(
    spark: Any, tmp_path: Path
) -> None:
    """A large generated run with rewound readers (no form the driver judges): Spark's own
    passes find each ``nonmonotonic-poll``, with the local checker's witnesses."""
    from harness.spark import analyze_parquet

    generated = generate_history(
        tmp_path / "run_id=rewound" / "history.parquet",
        records=3000,
        partitions=3,
        keys=5,
        plan=Plan(rewound=3, skipped=1, lost=1),
        run_id="rewound",
    )
    history = read_history(generated.path)
    analysis = analyze_parquet(tmp_path, spark=spark)
    for guarantee in Guarantee:
        verdict = analysis.verdicts(guarantee).verdicts["rewound"]
        assert verdict == check(history, guarantee)
        status, failing, tolerated = generated.expected(guarantee)
        assert verdict.status is status
        assert {a.kind.value: a.count for a in verdict.anomalies} == failing
        assert {a.kind.value: a.count for a in verdict.tolerated} == tolerated


@pytest.mark.slow
def test_a_run_too_large_for_the_driver_is_unknown_saying_to_check_it_locally(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the driver's limit below the runs' size, a run with an indeterminate send and
    one with a read where its record was never appended are UNKNOWN (never VALID, never a
    guess), with the reason naming the local checker."""
    import harness.spark.check.checker as checker
    from harness.spark import analyze_parquet

    monkeypatch.setattr(checker, "LOCAL_RUN_LIMIT", 3)
    log = translated.Log()
    log.send("a", "x", 0, "info")
    log.poll(1, "x", (0, "a"))
    moved = translated.Log()
    moved.send("a", "x", 0)
    moved.poll(1, "x", (2, "a"))
    write_runs(tmp_path, [log.history(), moved.history()])
    analysis = analyze_parquet(tmp_path, spark=spark)
    for guarantee in Guarantee:
        for verdict in analysis.verdicts(guarantee).verdicts.values():
            assert verdict.status is Status.UNKNOWN, verdict.summary()
            assert "check it with the local checker" in verdict.reasons[0]
