"""Where the Spark checker's time goes: every Spark action it runs, timed, with its caller.

    python bench/profile_spark.py HISTORY.parquet [--repeat 2] [--frames] [--stages]

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
splits an action into its map and reduce sides.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("history")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--frames", action="store_true")
    parser.add_argument("--stages", action="store_true")
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
    print("load average at end (1, 5, 15 min): {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    spark.stop()  # before its event log goes
    shutil.rmtree(events, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
