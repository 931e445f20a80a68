"""The Spark checker against the local checker on the histories issue 28 added: a commit past
a partition's end (kept where it points) and an entity table (a ``last-write`` sink).

Run only these when touching them (Spark is heavy):
``pytest tests/test_spark_parity_round3.py -p no:cacheprovider``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("pyspark", reason="the Spark checker needs pyspark")

from test_positions import IDLE_SECOND, TWO, mirror_offsets, own_offsets
from test_spark_checker import check_both, write_runs

import harness
from harness import Produce, Run, Schedule
from harness.check import AnomalyKind, Guarantee, Status, check


@pytest.fixture(scope="module")
def spark(harness_spark: Any) -> Any:
    harness_spark.conf.set("spark.sql.shuffle.partitions", "2")
    return harness_spark


@pytest.mark.slow
def test_a_commit_past_a_partitions_end_is_judged_alike(spark: Any, tmp_path: Path) -> None:
    shorter = Schedule([Produce(partition=1, count=1), Produce(partition=0, count=3), Run(40)])
    runs = [
        harness.simulate(processor, schedule, topology=TWO)
        for processor in (mirror_offsets, own_offsets)
        for schedule in (IDLE_SECOND, shorter)
    ]
    stored = write_runs(tmp_path, runs)
    ahead = [
        AnomalyKind.OFFSET_AHEAD in {a.kind for a in check(h, Guarantee.AT_LEAST_ONCE).anomalies}
        for h in stored.values()
    ]
    assert ahead == [True, True, False, False]
    check_both(tmp_path, stored, spark)


@pytest.mark.slow
def test_entity_tables_are_judged_alike(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Runs with an entity table are judged on the driver by the local checker's rules (as
    resends are), so the verdicts are equal; above the limit they are UNKNOWN, never VALID."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as fixed_seed
    from test_entity import rows_history

    from harness.strategies.histories import histories

    runs = [
        rows_history([("k1", 2), ("k2", 1)]),  # valid
        rows_history([("k1", 0), ("k2", 1)]),  # stale
        rows_history([("k1", 2)]),  # lost
        rows_history([("k1", 2), ("k3", 1)]),  # lost and unexpected
    ]

    @fixed_seed(28)
    @settings(max_examples=60, database=None, suppress_health_check=list(HealthCheck))
    @given(histories(entity=True))
    def collect(history: Any) -> None:
        runs.append(history)

    collect()
    stored = write_runs(tmp_path, runs)
    kinds = [{a.kind for a in check(h, Guarantee.AT_LEAST_ONCE).anomalies} for h in stored.values()]
    assert kinds[:4] == [
        set(),
        {AnomalyKind.STALE},
        {AnomalyKind.LOST},
        {AnomalyKind.LOST, AnomalyKind.UNEXPECTED},
    ]
    check_both(tmp_path, stored, spark)

    from harness.spark import analyze_parquet
    from harness.spark.check import checker

    monkeypatch.setattr(checker, "LOCAL_RUN_LIMIT", 3)
    verdicts = analyze_parquet(tmp_path, spark=spark).verdicts(Guarantee.EXACTLY_ONCE).verdicts
    for run_id in list(stored)[:4]:
        got = verdicts[run_id]
        assert got.status is Status.UNKNOWN and not got.anomalies, got
        assert "entity table sink(s) 'rows': the Spark checker judges" in got.reasons[0]
        assert "--engine local" in got.reasons[0]


@pytest.mark.slow
def test_skips_count_acknowledged_records_not_offsets_alike(spark: Any, tmp_path: Path) -> None:
    """Issue 31: offsets with gaps (Kafka's markers, aborted records). A read across a gap
    that holds no acknowledged record is no skip on either checker; a jump over one is,
    with the same count and witnesses; a resume past the fetched offset behind the reading
    frontier (issue 28's held-out false alarm) is no skip either; Kafka runs over a
    transactional input agree too."""
    from test_check import Builder, _gapped
    from test_kafka_gaps import WITNESS, app

    def jumped(*, across: bool) -> Any:
        b = _gapped(("r1", "r2", "r3"), aborted=("x1",))
        b.ingest("r1", "r2")
        b.append("x1")
        b.ingest("r3")
        outputs = b.process("r1", *(["r3"] if across else ["r2", "r3"]))
        if across:
            outputs += b.process("r2", process=2)
        b.fetch(3, process=3)  # a resume at a marker, then a read after the gaps
        b.read("r3", process=3)
        return b.finish(*outputs)

    plain = Builder()
    plain.ingest("r1", "r2", "r3")
    resumed = Builder()  # past the fetched offset, behind the reading frontier: no skip
    resumed.ingest("r1", "r2", "r3")
    done = resumed.process("r1", "r2", process=2)
    resumed.commit(1, process=2)
    resumed.fetch(1)
    runs = [
        jumped(across=False),
        jumped(across=True),
        plain.finish(*plain.process("r1", "r3"), *plain.process("r2", process=2)),
        resumed.finish(*done, *resumed.process("r3")),
    ]
    for function in ("correct", "contiguous_count"):
        kafka = app(function)
        runs.append(harness.simulate(kafka, WITNESS, topology=kafka.topology))
    stored = write_runs(tmp_path, runs)
    skips = [
        sum(
            a.count
            for a in check(h, Guarantee.EXACTLY_ONCE).anomalies
            if a.kind is AnomalyKind.SKIP
        )
        for h in stored.values()
    ]
    assert skips == [0, 1, 1, 0, 0, 0]
    check_both(tmp_path, stored, spark)
