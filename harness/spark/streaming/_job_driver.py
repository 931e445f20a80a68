"""The child driver of an unchanged job's SIGKILL step: ``python -m
harness.spark.streaming._job_driver SPEC.json``.

It starts its own JVM, runs the job's code once under
:func:`harness.spark.streaming._interpose.interposed` and reports on the run's FIFO (the gate's
``signal``): ``started`` once the query started, ``fired <point> <batch> <rows>`` at the crash
point (written by the gate, which then blocks until the parent's SIGKILL), ``done`` when the
job ended, ``error <message>`` when it failed. Imports pyspark.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.spark.streaming._faultgate import Gate
from harness.spark.streaming._interpose import JobRun, interposed, run_app
from harness.spark.streaming.runner import describe

__all__ = ["main"]


def _say(path: str, line: str) -> None:
    with open(path, "w", encoding="utf-8") as fifo:
        fifo.write(line.replace("\n", " ") + "\n")


def main(argv: Sequence[str]) -> int:
    """Run the spec in ``argv[1]`` and report on its FIFO."""
    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    run = JobRun.from_json(spec["run"])
    gate = Gate.load(run.gate)
    assert gate is not None and gate.signal is not None, "a child driver needs a gate with a FIFO"
    signal = gate.signal
    try:
        from harness.spark.streaming.job import job_session
        from harness.spark.streaming.kafka_source import register_kafka

        spark = job_session()
        register_kafka(spark)
        session = spark
        with interposed(run, session, on_started=lambda: _say(signal, "started")):
            run_app(spec["app"], spec["argv"])
            for query in session.streams.active:
                query.awaitTermination()
    except BaseException as exc:
        _say(signal, f"error {describe(exc)}")
        return 1
    _say(signal, "done")
    return 0


if __name__ == "__main__":
    from harness.spark.streaming import _job_driver

    sys.exit(_job_driver.main(sys.argv))
