"""A live progress line for a Spark check, drawn from Spark's status tracker (internal).

:func:`watched` runs a daemon thread for the duration of a check that polls, twice a
second, the running stages (their tasks done of all) from ``SparkContext.statusTracker()``
and the rows the check's stages have read so far (the status store's input records, summed
over its stages), and hands them to a :class:`~harness.report.live.LiveProgress` whose unit
is the history's rows, so its ETA follows the scan. The line is drawn only where
``LiveProgress`` draws (a terminal's stderr, not in CI, not piped).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any, Final

__all__ = ["watched"]

_POLL_SECONDS: Final = 0.5


def _stages(spark: Any) -> list[Any]:
    """Every stage the status store knows (``v1.StageData``), without task details (its
    Scala method's default arguments given: py4j sees none)."""
    context = spark.sparkContext
    store = context._jsc.sc().statusStore()
    no_quantiles = context._gateway.new_array(context._jvm.double, 0)
    stages = store.stageList(None, False, False, no_quantiles, None)
    return [stages.apply(i) for i in range(stages.size())]


def _rows_read(spark: Any, seen: set[int]) -> int:
    """Input records of the stages started since the watch began (ids not in ``seen``)."""
    return sum(
        int(stage.inputRecords()) for stage in _stages(spark) if int(stage.stageId()) not in seen
    )


def _line(spark: Any, seen: set[int]) -> tuple[int, str]:
    tracker = spark.sparkContext.statusTracker()
    parts = []
    for stage_id in sorted(tracker.getActiveStageIds()):
        info = tracker.getStageInfo(stage_id)
        if info is not None:
            parts.append(f"stage {stage_id} {info.numCompletedTasks}/{info.numTasks} tasks")
    rows = _rows_read(spark, seen)
    stages = ", ".join(parts) if parts else "planning"
    return rows, f"{stages}; {rows:,} rows read"


@contextlib.contextmanager
def watched(spark: Any, live: Any, rows: int) -> Iterator[None]:
    """Show the check's progress on ``live`` (a ``LiveProgress`` whose total is ``rows``,
    the history's rows) while the block runs. Nothing runs when ``live`` draws nothing."""
    if not live.enabled:
        yield
        return
    try:
        seen = {int(stage.stageId()) for stage in _stages(spark)}
    except Exception:  # no status store to read: no line
        yield
        return
    live.step(completed=0, detail="planning")
    stop = threading.Event()

    def poll() -> None:
        while not stop.wait(_POLL_SECONDS):
            try:
                read, detail = _line(spark, seen)
            except Exception:  # the JVM is busy or gone: the check itself will say
                continue
            live.step(completed=min(read, rows), detail=detail)

    thread = threading.Thread(target=poll, name="spark-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)
