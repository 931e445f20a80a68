"""An unchanged PySpark job under crash schedules: time to the first counterexample, and
schedules per minute, against the built-in streaming runner in the same run.

    python bench/bench_spark_job.py [--schedules 6] [--sigkill 1]

1. **Time to the first counterexample** for tests/spark_jobs/fb_append.py (a tutorial-style
   ``foreachBatch`` appending each batch to SQLite, not idempotent) under exactly-once,
   searched as ``python -m harness spark-job`` searches (the planned crashes first), from a
   process whose JVM has not started (the cold figure: what a CLI user waits) and again on
   the warm JVM.
2. **Schedules per minute** of tests/spark_jobs/fb_idempotent.py (it holds, so every
   schedule runs): ``--schedules`` planned in-process crashes (one query start and the drain
   each), and ``--sigkill`` planned SIGKILLs of a child driver (a JVM each).
3. **Baseline**: the same in-process schedules (but the after-commit ones) on the built-in
   ``foreach-batch-idempotent`` variant (the harness's own query, no job code, no
   interposition), searched through the same engine loop
   (``harness.spark.streaming.variantsearch.explore_variant``), on the same JVM. The
   ratio says what running the user's code unchanged costs (the job runs those same
   schedules again for it).

Prints the figures, the ratio and ``uptime`` before and after (the machine is shared).
Figures, not assertions.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.check import Guarantee  # noqa: E402
from harness.faults.streams import CrashHow  # noqa: E402
from harness.spark.streaming.job import SparkJob, quiet_session  # noqa: E402
from harness.spark.streaming.jobsearch import explore_job, planned_schedules  # noqa: E402

JOBS = ROOT / "tests" / "spark_jobs"


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _job(name: str) -> SparkJob:
    return SparkJob(
        str(JOBS / name),
        inputs=("events",),
        sinks=("sqlite:/tmp/events.db:events",),
        id_column="id",
        max_offsets_per_trigger=2,
    )


def _first_counterexample(work: Path, label: str) -> float:
    started = time.monotonic()
    quiet_session()  # as the CLI starts it: local[2,2], the JVM's logging off
    found = explore_job(_job("fb_append.py"), Guarantee.EXACTLY_ONCE, workdir=work / label)
    seconds = time.monotonic() - started
    assert found.verdict is not None, "the non-idempotent job must fail exactly-once"
    print(
        f"first counterexample ({label}): {seconds:.1f}s after {found.schedules} schedule(s): "
        f"{found.verdict.summary().splitlines()[1].strip()[:90]}"
    )
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", type=int, default=6)
    parser.add_argument("--sigkill", type=int, default=1)
    args = parser.parse_args()
    print(f"load before: {_uptime()}")
    work = Path(tempfile.mkdtemp(prefix="bench-spark-job-"))
    _first_counterexample(work, "cold JVM")
    _first_counterexample(work, "warm JVM")

    plan = planned_schedules(batches=2, records=4, hows=(CrashHow.RAISE,))[: args.schedules]
    started = time.monotonic()
    explore_job(
        _job("fb_idempotent.py"),
        Guarantee.EXACTLY_ONCE,
        workdir=work / "job",
        plan=plan,
        max_schedules=len(plan),
    )
    job_rate = len(plan) / (time.monotonic() - started) * 60
    print(
        f"unchanged job, in-process crashes: {job_rate:.1f} schedules/min ({len(plan)} schedules)"
    )

    kills = planned_schedules(batches=1, records=4, hows=(CrashHow.SIGKILL,), tasks=False)
    kills = kills[: args.sigkill]
    if kills:
        started = time.monotonic()
        explore_job(
            _job("fb_idempotent.py"),
            Guarantee.EXACTLY_ONCE,
            workdir=work / "kill",
            plan=kills,
            max_schedules=len(kills),
        )
        kill_rate = len(kills) / (time.monotonic() - started) * 60
        print(f"unchanged job, SIGKILL of the driver: {kill_rate:.1f} schedules/min ({len(kills)})")

    from harness.spark.streaming import StreamConfig, Variant
    from harness.spark.streaming.variantsearch import explore_variant

    config = StreamConfig(logs=("in0",), max_records_per_batch=2)
    builtin = [
        s for s in plan if all(getattr(step, "point", None) != "after-commit" for step in s.steps)
    ]
    started = time.monotonic()
    explore_variant(  # through the engine's loop, as the job's search
        Variant.FOREACH_BATCH_IDEMPOTENT,
        workdir=work / "builtin",
        config=config,
        plan=builtin,
        max_examples=len(builtin),
    )
    base_rate = len(builtin) / (time.monotonic() - started) * 60
    print(
        f"baseline, built-in variant: {base_rate:.1f} schedules/min ({len(builtin)} schedules, "
        "after-commit ones left out: the variants have no such point)"
    )
    started = time.monotonic()
    explore_job(
        _job("fb_idempotent.py"),
        Guarantee.EXACTLY_ONCE,
        workdir=work / "same",
        plan=builtin,
        max_schedules=len(builtin),
    )
    same_rate = len(builtin) / (time.monotonic() - started) * 60
    print(f"unchanged job, the baseline's schedules: {same_rate:.1f} schedules/min")
    print(f"ratio unchanged job / built-in (same schedules): {same_rate / base_rate:.2f}")
    print(f"load after: {_uptime()}")


if __name__ == "__main__":
    main()
