"""The spark-job door without a JVM: Kafka option validation, path redirection, the crash
gate's rules, sink specs, the plan's coverage, replay files and the command's usage errors.

The runs themselves (a real SparkSession, real SIGKILLs) are in tests/test_spark_job.py.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # in CI a missing pyspark fails the run
    pytest.importorskip("pyspark")

from harness.check.verdict import Guarantee
from harness.errors import ConfigError
from harness.faults.streams import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    FailTask,
    ProduceRecords,
    ResendRecords,
    StreamSchedule,
)
from harness.log.dlsn import DLSN
from harness.spark.streaming._faultgate import Gate
from harness.spark.streaming._interpose_paths import redirect
from harness.spark.streaming._kafkalog import decode_message, encode_message, kafka_log
from harness.spark.streaming.job import JobSink, SparkJob, row_ids
from harness.spark.streaming.jobsearch import JobReplay, draw_schedule, planned_schedules
from harness.spark.streaming.kafka_source import kafka_sink_options, kafka_source_options
from harness.spark.streaming.runner import InjectedCrash

JOBS = Path(__file__).parent / "spark_jobs"


def _source(options: dict[str, str], partitions: dict[str, int] | None = None) -> dict[str, str]:
    return kafka_source_options(
        {"kafka.bootstrap.servers": "b:9092", **options},
        uri="distributedlog-leveldb:///nowhere",
        partitions=partitions or {"events": 2, "clicks": 1},
        pinned=lambda log: DLSN.INITIAL,
    )


def test_kafka_source_options_map_topics_to_logs() -> None:
    assert _source({"subscribe": "events"})["logs"] == "kafka.events.0,kafka.events.1"
    assert _source({"subscribePattern": "c.*"})["logs"] == "kafka.clicks.0"
    assert _source({"assign": '{"events": [1]}'})["logs"] == "kafka.events.1"
    limited = _source(
        {"subscribe": "clicks", "maxOffsetsPerTrigger": "5", "failOnDataLoss": "false"}
    )
    assert limited["maxRecordsPerBatch"] == "5"
    starting = json.loads(
        _source({"subscribe": "clicks", "startingOffsets": "earliest"})["startingOffsets"]
    )
    assert starting == {"kafka.clicks.0": DLSN.INITIAL.to_json()}


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"subscribe": "events", "groupIdPrefix": "x"}, ["groupIdPrefix", "subscribePattern"]),
        ({"subscribe": "orders"}, ["orders", "--input"]),
        ({}, ["exactly one of"]),
        ({"subscribe": "events", "assign": '{"events":[0]}'}, ["exactly one of"]),
        ({"subscribe": "events", "maxOffsetsPerTrigger": "0"}, ["maxOffsetsPerTrigger"]),
        ({"subscribe": "events", "startingOffsets": "{bad"}, ["startingOffsets", "{bad"]),
    ],
)
def test_kafka_source_refuses_bad_options_naming_them(
    options: dict[str, str], words: list[str]
) -> None:
    with pytest.raises(ConfigError) as caught:
        _source(options)
    for word in words:
        assert word in str(caught.value)


def test_kafka_source_needs_bootstrap_servers_as_spark_does() -> None:
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers"):
        kafka_source_options(
            {"subscribe": "events"}, uri="u", partitions={"events": 1}, pinned=None
        )


def test_kafka_sink_options() -> None:
    kafka_sink_options({"topic": "out", "kafka.bootstrap.servers": "b"}, outputs=("out",))
    with pytest.raises(ConfigError, match="'elsewhere'"):
        kafka_sink_options({"topic": "elsewhere"}, outputs=("out",))
    with pytest.raises(ConfigError, match="known options are topic"):
        kafka_sink_options({"topic": "out", "acks": "all"}, outputs=("out",))


def test_messages_round_trip() -> None:
    for key, value in [(None, b"v"), (b"k", None), (b"", b""), (b"k\x00", b"\xff" * 300)]:
        assert decode_message(encode_message(key, value)) == (key, value)
    assert kafka_log("a.b", 3) == "kafka.a.b.3"


def test_redirect_keeps_a_schedule_s_paths_apart() -> None:
    root = "/runs/s1/world"
    assert redirect(root, "/tmp/chk") == "/runs/s1/world/fs/tmp/chk"
    assert redirect(root, "file:///tmp/chk") == "/runs/s1/world/fs/tmp/chk"
    assert redirect(root, "out/parquet") == "/runs/s1/world/cwd/out/parquet"
    assert redirect(root, "/runs/s1/world/fs/x") == "/runs/s1/world/fs/x"
    assert redirect(root, "s3a://bucket/x") == "s3a://bucket/x"
    assert redirect(root, ["/a", "b"]) == ["/runs/s1/world/fs/a", "/runs/s1/world/cwd/b"]


def test_gate_fires_at_its_batch_or_the_run_s_last(tmp_path: Path) -> None:
    gate = Gate(directory=str(tmp_path / "g"), point=CrashPoint.BEFORE_WRITE.value, batch=2)
    gate.save()
    gate.before_write(0)
    gate.note_planned(1, last=True)
    with pytest.raises(InjectedCrash):
        gate.before_write(1)  # the run has two batches: the last one takes the crash
    assert gate.fired() == {"point": "before-write", "batch": 1, "rows": None}


def test_gate_counts_writes_across_processes_in_files(tmp_path: Path) -> None:
    gate = Gate(directory=str(tmp_path / "g"), point=CrashPoint.AFTER_WRITE.value, batch=1)
    gate.save()
    gate.after_write(3)
    loaded = Gate.load(gate.directory)
    assert loaded is not None
    with pytest.raises(InjectedCrash):
        loaded.after_write(4)
    assert loaded.fired() == {"point": "after-write", "batch": 1, "rows": 4}
    quiet = Gate(directory=str(tmp_path / "q"))
    quiet.save()
    quiet.after_write(1)
    quiet.before_write(0)
    quiet.after_commit(0)
    assert quiet.fired() is None


def test_plan_covers_every_point_of_every_batch_once() -> None:
    plan = planned_schedules(batches=2, records=4, logs=2, tasks=False)
    crashes = [s.steps[-2] for s in plan]
    assert all(isinstance(c, CrashQuery) for c in crashes)
    assert {(c.batch, c.point, c.how) for c in crashes if isinstance(c, CrashQuery)} == {
        (b, p, h) for b in range(2) for p in CrashPoint for h in CrashHow
    }
    assert len(plan) == 12
    assert [s.steps[:2] for s in plan[:1]] == [(ProduceRecords(2, 0), ProduceRecords(2, 1))]
    assert plan[0].steps[2] == CrashQuery(0, CrashPoint.AFTER_WRITE, CrashHow.RAISE)


def test_plan_fails_a_task_of_each_batch_and_resends_only_for_a_resending_upstream() -> None:
    def ops(plan: list[StreamSchedule]) -> list[str]:
        return [s.steps[-2].op for s in plan]

    plan = planned_schedules(batches=2, records=4)
    assert len(plan) == 14
    # the in-process faults first (raise crashes, then task failures), the SIGKILLs last
    assert ops(plan) == ["crash"] * 6 + ["fail-task"] * 2 + ["crash"] * 6
    assert [s.steps[1] for s in plan[6:8]] == [FailTask(0), FailTask(1)]
    assert all(s.steps[1].how is CrashHow.SIGKILL for s in plan[8:])  # type: ignore[union-attr]
    resending = planned_schedules(batches=2, records=4, logs=2, resends=True)
    assert len(resending) == 16
    assert resending[8].steps == (
        ProduceRecords(2, 0),
        ProduceRecords(2, 1),
        ResendRecords(2, 0),
        ResendRecords(2, 1),
        ProduceRecords(2),
    )
    assert resending[9].steps[-2:] == (CrashQuery(0, CrashPoint.AFTER_WRITE), ResendRecords(2, 0))
    only_raise = planned_schedules(hows=(CrashHow.RAISE,), resends=True)
    assert ops(only_raise)[6:] == ["fail-task", "fail-task", "resend", "crash"]


def test_new_steps_round_trip_and_the_built_in_variants_refuse_them(tmp_path: Path) -> None:
    from harness.spark.streaming import Variant, run_stream

    schedule = StreamSchedule(steps=(ProduceRecords(3), FailTask(1), ResendRecords(2, 1)))
    assert StreamSchedule.from_json(schedule.dumps()) == schedule
    assert len(schedule) == 3
    assert "FailTask(batch=1)" in schedule.describe()
    for step in (FailTask(), ResendRecords()):
        with pytest.raises(ConfigError, match="unchanged jobs"):
            run_stream(Variant.PARQUET, StreamSchedule(steps=(step,)), workdir=tmp_path)
    with pytest.raises(ConfigError, match="'count' must be an integer"):
        StreamSchedule(steps=(ResendRecords(count=-1),))


def test_a_task_fails_once_after_its_work_at_the_gate_s_batch(tmp_path: Path) -> None:
    from harness.spark.streaming._faultgate import InjectedTaskFailure

    gate = Gate(directory=str(tmp_path), task=1, task_at="write")
    gate.save()
    gate.task_done("read", 1)  # not where this gate fails a task
    gate.note_reading(0)
    gate.task_done("write", None)  # batch 0: not the gate's
    gate.note_reading(1)
    with pytest.raises(InjectedTaskFailure, match=r"task failure \(write\) in batch 1"):
        gate.task_done("write", None)
    gate.task_done("write", None)  # once per run: the retried attempt goes on
    assert gate.task_failed() == {"batch": 1, "at": "write"}
    fewer = Gate(directory=str(tmp_path / "short"), task=3)
    fewer.save()
    fewer.note_planned(1, last=True)  # the run has two batches: its last one's task fails
    with pytest.raises(InjectedCrash):
        fewer.task_done("read", 1)


def test_drawn_schedules_are_seeded_and_kill_at_most_once() -> None:
    first = [draw_schedule(random.Random(7)).dumps() for _ in range(3)]
    assert len(set(first)) == 1
    for seed in range(50):
        schedule = draw_schedule(random.Random(seed), logs=2)
        assert schedule.kills <= 1


def test_sinks_and_jobs_are_checked() -> None:
    assert JobSink.parse("sqlite:/var/db/x.db:counts") == JobSink(
        "sqlite", "/var/db/x.db", "counts"
    )
    assert JobSink.parse("kafka:out").name == "out"
    for bad in ("sqlite:/x.db", "s3:bucket", "files:", "sqlite:/x.db:drop table"):
        with pytest.raises(ConfigError):
            JobSink.parse(bad)
    with pytest.raises(
        ConfigError, match=r"; a json file sink, as any Spark file sink, is files:out$"
    ):
        JobSink.parse("json:out")  # a format named where the kind goes: the kind is said
    with pytest.raises(ConfigError, match="sink to observe"):
        SparkJob(str(JOBS / "fb_append.py"), inputs=("events",))
    with pytest.raises(ConfigError, match="value_format"):
        SparkJob(str(JOBS / "fb_append.py"), inputs=("e",), outputs=("o",), value_format="xml")


def test_a_table_s_path_is_spark_s_warehouse_path() -> None:
    from harness.spark.streaming._interpose_paths import table_path

    assert table_path("events") == "spark-warehouse/events"
    assert table_path("analytics.events") == "spark-warehouse/analytics.db/events"
    assert table_path("spark_catalog.`db`.t") == "spark-warehouse/db.db/t"
    for bad in ("", "a/b", "..", "a.b.c.d"):
        with pytest.raises(ConfigError, match="table name"):
            table_path(bad)
    assert JobSink.parse("table:db.events") == JobSink("table", "db.events")


def test_default_row_lineage() -> None:
    assert row_ids({"id": "r7", "note": "R7 and r12"}, None) == ["r7", "r12"]
    assert row_ids({"value": b'{"id":"r3"}'}, None) == ["r3"]
    assert row_ids({"word": "k1", "n": 3}, None) == []
    assert row_ids({"record": "x", "other": "r1"}, "record") == ["x"]


def test_replay_file_round_trip(tmp_path: Path) -> None:
    schedule = StreamSchedule(steps=(ProduceRecords(3), CrashQuery(1, CrashPoint.AFTER_COMMIT)))
    path = JobReplay("job.py", Guarantee.EXACTLY_ONCE, schedule, "INVALID").save(tmp_path)
    assert JobReplay.load(path).schedule == schedule
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match="not a spark-job replay file"):
        JobReplay.load(path)


def test_a_replay_file_holds_the_job_so_the_common_doors_can_run_it(tmp_path: Path) -> None:
    job = SparkJob(
        str(JOBS / "fb_append.py"),
        inputs=("events",),
        sinks=("sqlite:/tmp/e.db:events", "console"),
        argv=("/tmp/e.db",),
        table=("key", "n"),
        lineage=row_ids,
        upstream_resends=True,
    )
    data = job.to_json()
    assert data is not None and data["lineage"] == "harness.spark.streaming.job:row_ids"
    assert SparkJob.from_json(json.loads(json.dumps(data))) == job
    assert (
        SparkJob(job.app, inputs=("e",), outputs=("o",), lineage=lambda row: None).to_json() is None
    )
    schedule = StreamSchedule(steps=(ProduceRecords(3), FailTask(0)))
    path = JobReplay(job.app, Guarantee.EXACTLY_ONCE, schedule, "INVALID", data, 7).save(tmp_path)
    found = JobReplay.recognise(str(path))
    assert found is not None and found.spark_job() == job and found.seed == 7
    assert JobReplay.recognise(path.read_text(encoding="utf-8")) == found  # inline JSON
    engine_file = tmp_path / "engine.json"
    engine_file.write_text('{"harness_replay": 1}', encoding="utf-8")
    assert JobReplay.recognise(str(engine_file)) is None
    assert JobReplay.recognise(str(tmp_path / "missing.json")) is None
    older = {**json.loads(path.read_text(encoding="utf-8")), "harness_spark_job_replay": 1}
    del older["job"]
    with pytest.raises(ConfigError, match="does not hold the job"):
        JobReplay.from_json(older).spark_job()
    with pytest.raises(ConfigError, match="unknown key"):
        SparkJob.from_json({**data, "surprise": 1})


def test_builtin_variants_refuse_after_commit(tmp_path: Path) -> None:
    from harness.spark.streaming import Variant, run_stream

    schedule = StreamSchedule(steps=(CrashQuery(0, CrashPoint.AFTER_COMMIT),))
    with pytest.raises(ConfigError, match="after-commit"):
        run_stream(Variant.PARQUET, schedule, workdir=tmp_path)


def test_command_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.spark_job import main

    code = main(
        [
            str(JOBS / "fb_append.py"),
            "--guarantee",
            "exactly-once",
            "--input",
            "e",
            "--sink",
            "sqlite:/x.db:t",
            "--table",
            "nocolon",
        ]
    )
    assert code == 2
    assert "KEY_COLUMN:COUNT_COLUMN" in capsys.readouterr().err
    assert main(["job.py", "--guarantee", "exactly-once", "--input", "e"]) == 2
    assert "sink to observe" in capsys.readouterr().err


def test_command_refuses_a_lineage_it_cannot_load(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.spark_job import main

    args = [str(JOBS / "fb_append.py"), "--guarantee", "exactly-once", "--input", "e"]
    assert main([*args, "--sink", "sqlite:/x.db:t", "--lineage", "no_such_module:f"]) == 2
    assert "cannot load lineage function 'no_such_module:f'" in capsys.readouterr().err


def test_shrink_candidates_are_one_step_simpler() -> None:
    from harness.spark.streaming.jobsearch import _smaller

    schedule = StreamSchedule(
        steps=(ProduceRecords(3), CrashQuery(2, CrashPoint.AFTER_WRITE, CrashHow.SIGKILL))
    )
    candidates = {c.dumps() for c in _smaller(schedule)}
    expected = [
        (CrashQuery(2, CrashPoint.AFTER_WRITE, CrashHow.SIGKILL),),
        (ProduceRecords(3),),
        (ProduceRecords(1), CrashQuery(2, CrashPoint.AFTER_WRITE, CrashHow.SIGKILL)),
        (ProduceRecords(3), CrashQuery(2, CrashPoint.AFTER_WRITE)),
        (ProduceRecords(3), CrashQuery(0, CrashPoint.AFTER_WRITE, CrashHow.SIGKILL)),
    ]
    assert candidates == {StreamSchedule(steps=s).dumps() for s in expected}
