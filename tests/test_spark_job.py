"""Unchanged PySpark jobs (tests/spark_jobs/, written as Spark's examples and tutorials write
them) under crash schedules, on a real SparkSession: each gets the verdict its code deserves.

Spark runs are slow on a shared 2-core machine, so each job runs a few planned schedules
(the crash windows its verdict depends on, plus the others where cheap) and one SIGKILL of a
child driver overall. Every test can fail: the broken jobs must be caught, the correct ones
must hold under the same crashes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):  # in CI a missing pyspark must fail, not skip
    pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

from harness.check import AnomalyKind, Guarantee, Status, check
from harness.errors import ConfigError
from harness.faults.streams import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    ProduceRecords,
    ResendRecords,
    RunBatches,
    StreamSchedule,
)
from harness.spark.streaming.job import SparkJob, run_job
from harness.spark.streaming.jobsearch import JobReplay, explore_job, planned_schedules

pytestmark = pytest.mark.slow

JOBS = Path(__file__).parent / "spark_jobs"
EO, ALO = Guarantee.EXACTLY_ONCE, Guarantee.AT_LEAST_ONCE


@pytest.fixture(scope="module")
def spark(harness_spark: SparkSession) -> SparkSession:
    return harness_spark


def _crash(point: CrashPoint, batch: int = 0, how: CrashHow = CrashHow.RAISE) -> StreamSchedule:
    return StreamSchedule(
        steps=(ProduceRecords(4), CrashQuery(batch, point, how), ProduceRecords(2))
    )


def _kinds(history: object, guarantee: Guarantee) -> set[AnomalyKind]:
    return {a.kind for a in check(history, guarantee).anomalies}  # type: ignore[arg-type]


def _raise_plan(points: tuple[CrashPoint, ...] = tuple(CrashPoint)) -> list[StreamSchedule]:
    return planned_schedules(batches=2, records=4, hows=(CrashHow.RAISE,), points=points)


APPEND = SparkJob(
    str(JOBS / "fb_append.py"),
    inputs=("events",),
    sinks=("sqlite:/tmp/events.db:events",),
    max_offsets_per_trigger=2,
)


def test_non_idempotent_foreach_batch_fails_exactly_once_and_replays(
    spark: SparkSession, tmp_path: Path
) -> None:
    found = explore_job(
        APPEND,
        EO,
        workdir=tmp_path / "w",
        max_schedules=3,
        spark=spark,
        failures_dir=tmp_path / "failures",
        sigkill=False,
    )
    assert found.verdict is not None and found.status is Status.INVALID
    assert AnomalyKind.DUPLICATE in {a.kind for a in found.verdict.anomalies}
    assert found.replay_file is not None and found.failure is not None
    replay = JobReplay.load(found.replay_file)
    again = run_job(APPEND, replay.schedule, workdir=tmp_path / "replay", spark=spark)
    assert check(again.history, EO).status is Status.INVALID
    assert again.history.events == found.failure.history.events  # same schedule, same history
    assert check(found.failure.history, ALO).status is Status.VALID
    from harness.report import render_text

    reported = found.reported()  # the counterexample as the reports take any run
    assert reported is not None and reported.replay_command is not None
    text = render_text(reported)
    assert "duplicate" in text and "after-write/raise x1" in text


def test_non_idempotent_foreach_batch_under_sigkill_of_the_driver(
    spark: SparkSession, tmp_path: Path
) -> None:
    result = run_job(
        APPEND, _crash(CrashPoint.AFTER_WRITE, how=CrashHow.SIGKILL), workdir=tmp_path, spark=spark
    )
    assert [c.how for c in result.crashes] == [CrashHow.SIGKILL]
    assert AnomalyKind.DUPLICATE in _kinds(result.history, EO)
    assert check(result.history, ALO).status is Status.VALID


def test_idempotent_foreach_batch_holds(spark: SparkSession, tmp_path: Path) -> None:
    job = SparkJob(
        str(JOBS / "fb_idempotent.py"),
        inputs=("events",),
        sinks=("sqlite:/tmp/events.db:events",),
        id_column="id",
        max_offsets_per_trigger=2,
    )
    explored = explore_job(
        job, EO, workdir=tmp_path, plan=_raise_plan(), max_schedules=6, spark=spark
    )
    assert explored.verdict is None, explored.verdict and explored.verdict.summary()
    assert explored.schedules == 6
    assert set(explored.fired) == {f"{p.value}/raise" for p in CrashPoint}


def test_kafka_sink_is_at_least_once(spark: SparkSession, tmp_path: Path) -> None:
    job = SparkJob(
        str(JOBS / "kafka_upper.py"),
        inputs=("events",),
        outputs=("upper",),
        max_offsets_per_trigger=2,
    )
    result = run_job(job, _crash(CrashPoint.AFTER_WRITE), workdir=tmp_path / "a", spark=spark)
    assert result.crashes and result.crashes[0].rows == 2
    assert AnomalyKind.DUPLICATE in _kinds(result.history, EO)
    assert check(result.history, ALO).status is Status.VALID
    clean = run_job(job, _crash(CrashPoint.BEFORE_WRITE), workdir=tmp_path / "b", spark=spark)
    assert check(clean.history, EO).status is Status.VALID


def test_file_sink_holds_and_a_filter_bug_is_caught(spark: SparkSession, tmp_path: Path) -> None:
    job = SparkJob(
        str(JOBS / "parquet_sink.py"),
        inputs=("events",),
        sinks=("files:/data/events-parquet",),
        max_offsets_per_trigger=2,
    )
    explored = explore_job(
        job, EO, workdir=tmp_path / "ok", plan=_raise_plan()[::2], max_schedules=3, spark=spark
    )
    assert explored.verdict is None, explored.verdict and explored.verdict.summary()
    assert explored.fired.get("after-write/raise") == 1
    buggy = SparkJob(
        job.app,
        inputs=job.inputs,
        sinks=job.sinks,
        argv=("--drop-key", "k1"),
        max_offsets_per_trigger=2,
    )
    result = run_job(buggy, _crash(CrashPoint.BEFORE_WRITE), workdir=tmp_path / "bug", spark=spark)
    assert _kinds(result.history, ALO) == {AnomalyKind.LOST}


def test_stateful_count_upserted_into_sqlite(spark: SparkSession, tmp_path: Path) -> None:
    def job(*argv: str) -> SparkJob:
        return SparkJob(
            str(JOBS / "word_count_sqlite.py"),
            inputs=("words",),
            sinks=("sqlite:/var/lib/wordcount/counts.db:counts",),
            table=("word", "n"),
            value_format="words",
            argv=argv,
            max_offsets_per_trigger=2,
        )

    by_key = run_job(job(), _crash(CrashPoint.AFTER_WRITE), workdir=tmp_path / "a", spark=spark)
    assert by_key.crashes and check(by_key.history, EO).status is Status.VALID
    increment = job("/var/lib/wordcount/counts.db", "increment")
    added = run_job(increment, _crash(CrashPoint.AFTER_WRITE), workdir=tmp_path / "b", spark=spark)
    assert _kinds(added.history, EO) == {AnomalyKind.COUNT_MISMATCH}


def test_unknown_kafka_option_is_a_usage_error(spark: SparkSession, tmp_path: Path) -> None:
    job = SparkJob(str(JOBS / "kafka_upper.py"), inputs=("events",), outputs=("upper",), argv=())
    script = tmp_path / "bad.py"
    script.write_text(
        Path(job.app).read_text().replace('"failOnDataLoss", "false"', '"groupIdPrefix", "x"')
    )
    bad = SparkJob(str(script), inputs=("events",), outputs=("upper",))
    with pytest.raises(ConfigError, match=r"groupIdPrefix.*known options are subscribe"):
        run_job(
            bad, StreamSchedule(steps=(ProduceRecords(1),)), workdir=tmp_path / "w", spark=spark
        )


def test_a_second_query_is_refused_in_one_line_naming_both_queries(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A job that starts a console query and a Kafka one (then ``awaitAnyTermination``) is
    refused, even where the job would catch the error: one line naming both queries and
    what is supported; the door exits 2 with it and saves no replay file."""
    from harness.cli import main
    from harness.spark.streaming._interpose import SecondQuery

    two = SparkJob(
        str(JOBS / "two_queries.py"), inputs=("events",), outputs=("upper",), sinks=("console",)
    )
    one = StreamSchedule(steps=(ProduceRecords(2),))
    with pytest.raises(SecondQuery) as refused:
        run_job(two, one, workdir=tmp_path / "w", spark=spark)
    message = str(refused.value)
    assert "\n" not in message
    assert "query 'upper' (kafka sink, topic 'upper'), after the query (console sink):" in message
    assert "one streaming query per job" in message and "one foreachBatch" in message
    caught = tmp_path / "caught.py"  # a job that swallows the error and goes on
    caught.write_text(
        Path(two.app)
        .read_text()
        .replace("upper_cased = (", "try:\n  upper_cased = (")
        .replace("spark.streams.awaitAnyTermination()", "except Exception:\n  pass\n")
    )
    with pytest.raises(SecondQuery):
        run_job(
            SparkJob(str(caught), inputs=("events",), outputs=("upper",)),
            one,
            workdir=tmp_path / "c",
            spark=spark,
        )
    door = [
        *("spark-job", two.app, "--guarantee", "exactly-once", "--input", "events"),
        *("--output", "upper", "--max-examples", "1", "--no-sigkill"),
        *("--workdir", str(tmp_path / "door"), "--failures-dir", str(tmp_path / "failures")),
    ]
    assert main(door) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the job starts a second streaming query, query 'upper'")
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "failures").exists()


def test_pytest_fixture_fails_a_test_with_the_counterexample(harness_spark_job: Any) -> None:
    """The fixture fails the test as ``harness_explore`` does (the engine's
    ``CounterexampleFound``), its replay file in the failures directory every door uses."""
    pattern = r"(?s)duplicate.*replay: python -m harness replay \S*\.harness/failures/spark-job-fb"
    with pytest.raises(AssertionError, match=pattern):
        harness_spark_job(
            APPEND.app,
            guarantee="exactly-once",
            inputs=("events",),
            sinks=("sqlite:/tmp/events.db:events",),
            max_offsets_per_trigger=2,
            max_schedules=1,
            sigkill=False,
        )


def test_pytest_harness_replay_runs_a_job_s_file_in_the_test_of_that_job(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A job's replay file given to ``pytest --harness-replay`` runs once, in the test whose
    ``harness_spark_job`` call explores that job (a fresh pytest process: its own JVM), and
    fails it with the replay's verdict and the commands that run it again."""
    import subprocess
    import sys

    failures = tmp_path / "failures"
    found = explore_job(
        APPEND, EO, workdir=tmp_path / "w", max_schedules=1, spark=spark,
        failures_dir=failures, sigkill=False,
    )  # fmt: skip
    assert found.replay_file is not None
    (tmp_path / "test_events.py").write_text(
        "def test_events_job(harness_spark_job):\n"
        f"    harness_spark_job({APPEND.app!r}, guarantee='exactly-once', inputs=('events',),\n"
        "        sinks=('sqlite:/tmp/events.db:events',), max_offsets_per_trigger=2)\n",
        encoding="utf-8",
    )
    replay = ["--harness-replay", str(found.replay_file)]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", *replay],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        check=False,
    )
    out = done.stdout
    assert done.returncode == 1 and "1 failed" in out, out[-3000:] + done.stderr[-2000:]
    shown = found.replay_file.relative_to(tmp_path)  # below where pytest ran: relative
    assert f"INVALID, replaying {shown}" in out and "duplicate" in out
    assert f"replay in pytest: pytest test_events.py::test_events_job {replay[0]} {shown}" in out
    assert "failed on replaying its file" in out  # no search: one run of the file's schedule


def test_after_commit_crash_loses_rows_buffered_in_the_driver(
    spark: SparkSession, tmp_path: Path
) -> None:
    def job(app: str) -> SparkJob:
        return SparkJob(
            str(JOBS / app),
            inputs=("events",),
            sinks=("sqlite:/srv/events.db:events",),
            id_column="id",
            max_offsets_per_trigger=2,
        )

    buffered = run_job(
        job("fb_buffered.py"), _crash(CrashPoint.AFTER_COMMIT), workdir=tmp_path / "a", spark=spark
    )
    assert [c.point for c in buffered.crashes] == [CrashPoint.AFTER_COMMIT]
    assert _kinds(buffered.history, ALO) == {AnomalyKind.LOST}
    clean = run_job(
        job("fb_buffered.py"),
        StreamSchedule(steps=(ProduceRecords(4),)),
        workdir=tmp_path / "b",
        spark=spark,
    )
    assert check(clean.history, EO).status is Status.VALID  # it flushes when the query ends


def test_console_word_count_needs_its_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    def job(*checkpoint: str) -> SparkJob:
        return SparkJob(
            str(JOBS / "console_wordcount.py"),
            inputs=("words",),
            sinks=("console",),
            table=("word", "count"),
            value_format="words",
            argv=("localhost:9092", "words", *checkpoint),
            max_offsets_per_trigger=2,
        )

    kept = run_job(
        job("/tmp/wc-checkpoint"),
        _crash(CrashPoint.AFTER_WRITE),
        workdir=tmp_path / "a",
        spark=spark,
    )
    assert kept.crashes and check(kept.history, EO).status is Status.VALID
    none = run_job(job(), _crash(CrashPoint.AFTER_WRITE), workdir=tmp_path / "b", spark=spark)
    assert _kinds(none.history, EO) == {AnomalyKind.COUNT_MISMATCH}


def test_foreach_batch_writing_parquet(spark: SparkSession, tmp_path: Path) -> None:
    def job(mode: str) -> SparkJob:
        return SparkJob(
            str(JOBS / "fb_parquet.py"),
            inputs=("events",),
            sinks=("files:/data/lake/events",),
            id_column="id",
            argv=(mode,),
        )

    appended = run_job(
        job("append"), _crash(CrashPoint.AFTER_WRITE), workdir=tmp_path / "a", spark=spark
    )
    assert AnomalyKind.DUPLICATE in _kinds(appended.history, EO)
    by_batch = run_job(
        job("by-batch"), _crash(CrashPoint.AFTER_WRITE), workdir=tmp_path / "b", spark=spark
    )
    assert by_batch.crashes and check(by_batch.history, EO).status is Status.VALID


def test_a_drawn_counterexample_is_made_smaller(spark: SparkSession, tmp_path: Path) -> None:
    from harness.spark.streaming.jobsearch import _shrink

    drawn = StreamSchedule(
        steps=(
            ProduceRecords(3),
            RunBatches(1),
            ProduceRecords(2),
            CrashQuery(1, CrashPoint.AFTER_WRITE),
            ProduceRecords(2),
        )
    )
    first = run_job(APPEND, drawn, workdir=tmp_path / "drawn", spark=spark)
    verdict = check(first.history, EO)
    assert AnomalyKind.DUPLICATE in {a.kind for a in verdict.anomalies}
    smaller, still, runs = _shrink(APPEND, first, verdict, tmp_path / "shrink", spark, 3)
    assert runs <= 3
    assert len(smaller.schedule.steps) < len(drawn.steps)
    assert AnomalyKind.DUPLICATE in {a.kind for a in still.anomalies}


def test_a_counterexample_replays_and_reports_through_the_common_doors(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The door's failure names `replay FILE` and `report FILE`; both run the saved job
    again (the file holds it) and the report renders it like any other run."""
    import json

    from harness.cli import main
    from harness.report import REPORT_SCHEMA

    failures = tmp_path / "failures"
    door = [
        *("spark-job", str(JOBS / "fb_append.py"), "--guarantee", "exactly-once"),
        *("--input", "events", "--sink", "sqlite:/tmp/events.db:events"),
        *("--max-offsets-per-trigger", "2", "--max-schedules", "1", "--no-sigkill"),
        *("--workdir", str(tmp_path / "w"), "--failures-dir", str(failures)),
    ]
    assert main(door) == 1
    printed = capsys.readouterr().out
    (saved,) = failures.iterdir()
    assert f"replay: python -m harness replay {saved}\n" in printed
    assert f"report: python -m harness report {saved} --out " in printed
    assert main(["replay", str(saved), "--json"]) == 1
    replayed = json.loads(capsys.readouterr().out)
    assert {a["kind"] for a in replayed["verdict"]["anomalies"]} == {"duplicate"}
    assert replayed["schedule"] == JobReplay.load(saved).schedule.to_json()
    out = tmp_path / "report"
    assert main(["report", str(saved), "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "INVALID: exactly-once does NOT hold for" in text and "CrashQuery(" in text
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "duplicate" in html and "CrashQuery(batch=0, point=after-write" in html
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["schedule"] == replayed["schedule"]
    assert report["replay_command"] == f"python -m harness replay {saved}"
    assert set(report) == set(REPORT_SCHEMA["required"])
    import harness  # the Python API runs the job's file too, on this session

    history, verdict = harness.replay(saved)
    assert verdict.to_json() == replayed["verdict"]
    assert history.meta.extra["schedule"] == replayed["schedule"]


UPSERT = SparkJob(
    str(JOBS / "fb_upsert.py"),
    inputs=("events",),
    sinks=("sqlite:/tmp/events.db:events",),
    id_column="id",
    max_offsets_per_trigger=2,
    upstream_resends=True,
)


def test_an_upstream_resend_is_the_upstream_s_and_only_dedup_by_id_holds(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A resend is recorded as the upstream's (``append`` detail ``resent``): the history
    is judged, not refused; appending by batch lets the resent events through twice
    (exactly-once fails, at-least-once holds); upserting by the event's id holds."""
    schedule = StreamSchedule(
        steps=(ProduceRecords(4), CrashQuery(0, CrashPoint.AFTER_WRITE), ResendRecords(2))
    )
    appended = run_job(APPEND, schedule, workdir=tmp_path / "append", spark=spark)
    assert appended.resends == 2
    resent = [e for e in appended.history.events if e.detail == "resent"]
    assert [e.record_id for e in resent] == ["r2", "r3"]
    assert check(appended.history, ALO).status is Status.VALID
    assert _kinds(appended.history, EO) == {AnomalyKind.DUPLICATE}
    upserted = run_job(UPSERT, schedule, workdir=tmp_path / "upsert", spark=spark)
    assert upserted.resends == 2 and upserted.crashes
    assert check(upserted.history, EO).status is Status.VALID


_RETRYING_RUN = """
import json, sys
from harness.check import Guarantee, check
from harness.faults.streams import FailTask, ProduceRecords, StreamSchedule
from harness.spark.streaming.job import SparkJob, job_session, run_job
spark = job_session()
schedule = StreamSchedule(steps=(ProduceRecords(4), FailTask(1), ProduceRecords(2)))
out = {"master": spark.sparkContext.master}
for name, sinks, outputs in (("kafka_upper.py", (), ("upper",)),
                             ("fb_upsert.py", ("sqlite:/tmp/events.db:events",), ()),
                             ("parquet_sink.py", ("files:/data/events-parquet",), ()),
                             ("fb_parquet.py", ("files:/data/lake/events",), ())):
    job = SparkJob(sys.argv[1] + "/" + name, inputs=("events",), sinks=sinks, outputs=outputs,
                   max_offsets_per_trigger=2, id_column="id" if sinks else None)
    result = run_job(job, schedule, workdir=sys.argv[2] + "/" + name, spark=spark)
    out[name] = {
        "failed": [dict(f) for f in result.task_failures],
        "errors": list(result.errors),
        **{g.value: [a.kind.value for a in check(result.history, g).anomalies] for g in Guarantee},
        "status": check(result.history, Guarantee.AT_LEAST_ONCE).status.value,
    }
print(json.dumps(out))
"""


def test_a_failed_task_is_retried_and_a_kafka_sink_writes_its_rows_again(tmp_path: Path) -> None:
    """On the door's own master (``local[2,2]``: a fresh process, its own JVM), a task of
    batch 1 fails once after its work and Spark retries it. The Kafka sink's task had
    appended its rows, so they are there twice (Spark's Kafka sink is at-least-once); the
    upsert's read task is simply read again, and the job holds. Where the job's own write
    runs in the task that reads the source (a Parquet file sink's task, a ``foreachBatch``'s
    ``df.write.parquet`` append: one stage, no shuffle), the failure lands in the job's own
    task, mid-write, once the partition is read: Spark's commit protocols drop the failed
    attempt's file (the file sink's is not in its ``_spark_metadata`` log, the batch
    write's is never moved out of ``_temporary``), and both hold."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _RETRYING_RUN, str(JOBS), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["master"] == "local[2,2]"
    kafka, upsert = found["kafka_upper.py"], found["fb_upsert.py"]
    assert kafka["failed"] == [
        {"step": 1, "process": 1, "batch": 1, "at": "write", "retried": True}
    ]
    assert kafka["errors"] == [] and kafka["status"] == "valid"
    assert kafka["exactly-once"] == ["duplicate"]
    assert upsert["failed"] == [
        {"step": 1, "process": 1, "batch": 1, "at": "read", "retried": True}
    ]
    assert upsert["errors"] == [] and upsert["exactly-once"] == []
    for name in ("parquet_sink.py", "fb_parquet.py"):  # the job's own write task failed
        assert found[name]["failed"] == [
            {"step": 1, "process": 1, "batch": 1, "at": "read", "retried": True}
        ], found[name]
        assert found[name]["errors"] == [] and found[name]["exactly-once"] == [], found[name]


def test_a_stream_written_to_a_table_is_observed_and_holds(
    spark: SparkSession, tmp_path: Path
) -> None:
    """``toTable`` writes the table's file sink in the schedule's directory; observed as
    ``table:NAME``, it holds exactly-once through a crash after its write."""
    job = SparkJob(
        str(JOBS / "table_sink.py"),
        inputs=("events",),
        sinks=("table:analytics.events",),
        argv=("analytics.events",),
        id_column="id",
        max_offsets_per_trigger=2,
    )
    result = run_job(job, _crash(CrashPoint.AFTER_WRITE), workdir=tmp_path, spark=spark)
    assert result.crashes and not result.errors, result.errors
    observed = [e for e in result.history.events if e.kind.value == "observe"]
    assert sorted(str(e.record_id) for e in observed) == [f"r{n}" for n in range(6)]
    assert check(result.history, EO).status is Status.VALID
    warehouse = tmp_path / "world" / "cwd" / "spark-warehouse" / "analytics.db" / "events"
    assert (warehouse / "_spark_metadata").is_dir()
