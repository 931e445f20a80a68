"""Where the Spark checker's time goes: every Spark action it runs, timed, with its caller.

    python bench/profile_spark.py HISTORY.parquet [--repeat 2] [--frames] [--stages] [--cpu]

Starts a ``local[2]`` session (8 shuffle partitions, 8g heap, as ``bench_spark.py``), checks
a small generated history untimed (JVM start and JIT), then checks ``HISTORY`` (e.g. the file
``bench_spark.py --keep`` leaves in its ``--dir``) and prints, per action (``collect``,
``localCheckpoint``, ...), the wall seconds, the driver JVM's CPU seconds (user + system from
``/proc``: less sensitive than wall time to other work on a shared machine) and the checker
functions that ran it. The check's line also gives the seconds the JVM's JIT compilers spent
in it (its compilation bean: on a 2-core machine they take CPU from the tasks, and a first
check at a size pays most of them) and the py4j calls the driver made (each column built in
Python is a few). ``--frames`` also computes each occurrence frame of the ranking query
on its own first (a no-op write), to split that query's time by anomaly kind (each line
names the kinds the frame found: none for a frame with no rows); the frames are then
computed twice, so the total is inflated. ``--stages`` also prints every Spark stage of the
check from Spark's event log: when it started (seconds into the check), its tasks, wall
seconds, task seconds (summed over tasks) and the shuffle records it wrote and read, which
splits an action into its map and reduce sides. ``--cpu`` also records each check with the
JVM's flight recorder (``jcmd`` and ``jfr`` of the JDK that runs Spark, its ``profile``
settings: a stack sample of every running thread each 10 to 20 ms) and prints where the
executor threads' samples fall (:data:`CPU_PARTS`: the Parquet reader, the aggregations'
hash-map lookups and buffer updates, the shuffle's checksum, ...), the split of the work no
stage line shows.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.check import Guarantee
from harness.spark.check.generate import Plan, generate_history


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").split(")")[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(cls: Any, name: str, pid: int, log: list[str]) -> None:
    original = getattr(cls, name)

    def action(self: Any, *args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), _cpu(pid)
        try:
            return original(self, *args, **kwargs)
        finally:
            frames = [
                f for f in traceback.extract_stack()[:-1] if "harness/spark/check" in f.filename
            ]
            where = " < ".join(
                f"{Path(f.filename).name}:{f.lineno}:{f.name}" for f in frames[-3:][::-1]
            )
            log.append(
                f"  {time.perf_counter() - start:6.2f} s {_cpu(pid) - cpu:6.2f} cpu-s "
                f"{name:15s} {where}"
            )

    setattr(cls, name, action)


def _count_calls() -> list[int]:
    """A one-item list that counts every py4j call from now on (the driver's chatter)."""
    from py4j.clientserver import JavaClient

    count = [0]
    original = JavaClient.send_command

    def send_command(self: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(self, *args, **kwargs)

    JavaClient.send_command = send_command  # type: ignore[method-assign]
    return count


def _split_frames(pid: int, log: list[str]) -> None:
    from harness.spark.check import checker

    original = checker._Checker._collected

    def collected(self: Any, q: Any, frames: Any, valid: Any, facts: Any) -> Any:
        for number, frame in enumerate(frames):
            start, cpu = time.perf_counter(), _cpu(pid)
            frame.write.format("noop").mode("overwrite").save()
            line = (
                f"  frame {number}: {time.perf_counter() - start:6.2f} s "
                f"{_cpu(pid) - cpu:6.2f} cpu-s"
            )
            kinds = sorted({row[0] for row in frame.select("kind").distinct().collect()})
            del log[-1]  # the query naming the kinds is not the frame's cost
            log.append(f"{line} {kinds}")
        return original(self, q, frames, valid, facts)

    checker._Checker._collected = collected  # type: ignore[method-assign]


def _stages(events: Path, since_ms: float) -> list[str]:
    """One line per Spark stage completed after ``since_ms`` (epoch milliseconds), in start
    order, from the uncompressed event logs under ``events``."""
    found = []
    for log in sorted(events.rglob("*")):
        if not log.is_file():
            continue
        with log.open(encoding="utf-8") as lines:
            for line in lines:
                if '"SparkListenerStageCompleted"' not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:  # a line Spark is still writing
                    continue
                if event.get("Event") != "SparkListenerStageCompleted":
                    continue
                info = event["Stage Info"]
                start = info.get("Submission Time", 0)
                if start < since_ms:
                    continue
                values = {a["Name"]: a.get("Value") for a in info.get("Accumulables", [])}

                task_ms, rows_out, rows_in = (
                    int(values.get(f"internal.metrics.{name}") or 0)
                    for name in (
                        "executorRunTime",
                        "shuffle.write.recordsWritten",
                        "shuffle.read.recordsRead",
                    )
                )
                found.append(
                    (
                        start,
                        f"  stage {info['Stage ID']:4d} at {(start - since_ms) / 1000:6.1f} s: "
                        f"{info['Number of Tasks']:3d} tasks "
                        f"{(info['Completion Time'] - start) / 1000:6.2f} s "
                        f"{task_ms / 1000:7.2f} task-s "
                        f"shuffle rows out {rows_out:>10,} "
                        f"in {rows_in:>10,}  "
                        f"{info['Stage Name'].split(' at ')[0]}",
                    )
                )
    return [line for _, line in sorted(found)]


CPU_PARTS: tuple[tuple[str, str], ...] = (
    ("shuffle checksum", "RowBasedChecksum"),
    ("hash-map lookup", "BytesToBytesMap.lookup"),
    ("hash-map lookup", "getAggregationBufferFromUnsafeRow"),
    ("parquet reader", "parquet"),
    ("shuffle write", "ShuffleWriter.write"),
    ("shuffle read", "ShuffleReader"),
    ("shuffle read", "UnsafeRowSerializer"),
    ("kept rows", "MemoryStore"),
    ("kept rows", "BlockManager"),
    ("explode (generate)", "generate_doConsume"),
    ("projection", "project_doConsume"),
    ("aggregate updates", "hashAgg_doAggregate_"),
    ("aggregate output", "doAggregateWithKeysOutput"),
    ("aggregation, other", "hashAgg"),
    ("generated stage, other", "processNext"),
)
"""``(part, text)``: an executor sample counts for the first part whose text is in one of its
frames' ``class.method``, looked for from the sampled frame outward (so a lookup inside an
aggregation counts as the lookup); a sample with none counts as ``other``."""


def _jdk_tool(name: str) -> str:
    """The JDK's ``name`` (``jcmd``, ``jfr``): beside ``$JAVA_HOME/bin/java``, else on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home, "bin", name) if home else None
    path = str(found) if found and found.is_file() else shutil.which(name)
    if path is None:
        raise SystemExit(f"--cpu needs the JDK's {name} (set JAVA_HOME to a JDK, not a JRE)")
    return path


@contextlib.contextmanager
def _recorded(pid: int, into: Path) -> Iterator[None]:
    """Record the JVM ``pid`` with its flight recorder into ``into`` during the block."""
    jcmd = _jdk_tool("jcmd")
    start = ["JFR.start", "name=profile", "settings=profile", f"filename={into}"]
    subprocess.run([jcmd, str(pid), *start], check=True, capture_output=True)
    try:
        yield
    finally:
        stop = [jcmd, str(pid), "JFR.stop", "name=profile"]
        subprocess.run(stop, check=True, capture_output=True)


def _cpu_shares(recording: Path) -> list[str]:
    """One line per :data:`CPU_PARTS` part: its share of the executor threads' samples."""
    printed = subprocess.run(
        [_jdk_tool("jfr"), "print", "--json", "--events", "jdk.ExecutionSample", str(recording)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    parts: collections.Counter[str] = collections.Counter()
    others: collections.Counter[str] = collections.Counter()
    for event in json.loads(printed)["recording"]["events"]:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or ""
        if not thread.startswith("Executor task") or not values.get("stackTrace"):
            continue
        frames = [
            f"{f['method']['type']['name']}.{f['method']['name']}"
            for f in values["stackTrace"]["frames"]
        ]
        part = _part(frames)
        parts[part] += 1
        if part == "other" and frames:
            others[frames[0].rsplit("/", 1)[-1]] += 1
    total = sum(parts.values()) or 1
    lines = [f"  executor CPU samples: {total:,}"]
    lines += [f"  {count / total:6.1%} {part}" for part, count in parts.most_common()]
    lines += [
        f"         other: {count / total:5.1%} in {leaf}" for leaf, count in others.most_common(5)
    ]
    return lines


def _part(frames: list[str]) -> str:
    for frame in frames:
        for part, text in CPU_PARTS:
            if text in frame:
                return part
    return "other"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--frames", action="store_true")
    parser.add_argument("--stages", action="store_true")
    parser.add_argument("--cpu", action="store_true", help="executor CPU by part (JFR)")
    args = parser.parse_args(argv)
    from pyspark.sql.classic.dataframe import DataFrame

    from harness.spark import check_parquet, spark_session

    events = Path(tempfile.mkdtemp(prefix="harness-profile-events-"))
    conf = (
        {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",
        }
        if args.stages
        else {}
    )
    spark = spark_session("local[2]", shuffle_partitions=8, driver_memory="8g", conf=conf)
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    log: list[str] = []
    for name in ("collect", "localCheckpoint", "toLocalIterator", "count", "take", "first"):
        _timed(DataFrame, name, pid, log)
    if args.frames:
        _split_frames(pid, log)
    with tempfile.TemporaryDirectory() as scratch:
        warm = Path(scratch) / "warmup.parquet"
        generate_history(warm, records=40_000, plan=Plan(lost=3, duplicated=3))
        check_parquet(warm, Guarantee.EXACTLY_ONCE, spark=spark)
    print("load average at start (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    jit = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getCompilationMXBean()  # type: ignore[union-attr]
    calls = _count_calls()
    for _ in range(args.repeat):
        log.clear()
        since = time.time() * 1000
        compiled, called = jit.getTotalCompilationTime(), calls[0]
        recording = Path(events, f"check-{since:.0f}.jfr")
        with _recorded(pid, recording) if args.cpu else contextlib.nullcontext():
            start, cpu = time.perf_counter(), _cpu(pid)
            result = check_parquet(args.history, Guarantee.EXACTLY_ONCE, spark=spark)
            elapsed = time.perf_counter() - start
        print(
            f"check: {elapsed:.1f} s, driver JVM {_cpu(pid) - cpu:.1f} cpu-s (JIT compiling "
            f"{(jit.getTotalCompilationTime() - compiled) / 1000:.1f} s), {calls[0] - called:,} "
            f"py4j calls, {result.jobs} Spark jobs, status {result.status.value}"
        )
        print("\n".join(log))
        if args.stages:
            # the event log is written by Spark's listener bus, after the jobs end
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(60_000)
            print("\n".join(_stages(events, since)))
        if args.cpu:
            print("\n".join(_cpu_shares(recording)))
    print("load average at end (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    spark.stop()  # before its event log goes
    shutil.rmtree(events, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
