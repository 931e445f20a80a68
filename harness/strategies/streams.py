"""Hypothesis strategies for Structured Streaming schedules (:mod:`harness.spark.streaming`).

:func:`stream_schedules` draws :class:`~harness.faults.streams.StreamSchedule` values: a
produce step, a crash, then produce / run / crash steps. Drawing a schedule imports neither
pyspark nor a JVM; running one does (:func:`harness.spark.streaming.run_stream`).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from harness.errors import ConfigError
from harness.faults.streams import (
    CrashHow,
    CrashPoint,
    CrashQuery,
    ProduceRecords,
    RunBatches,
    StreamSchedule,
    StreamStep,
)

__all__ = ["stream_schedules"]


def stream_schedules(
    *,
    logs: int = 2,
    max_steps: int = 4,
    max_count: int = 12,
    max_batch: int = 2,
    sigkill: bool = False,
) -> st.SearchStrategy[StreamSchedule]:
    """Schedules of up to ``max_steps`` steps: a :class:`ProduceRecords` (1 to ``max_count``
    records into one of ``logs`` logs), a :class:`CrashQuery` (at batch 0 to ``max_batch``),
    then produce / run / crash steps. Crashes are ``RAISE`` unless ``sigkill`` (then at most
    one ``SIGKILL``: each costs a child JVM). Shrinking removes steps and lowers counts."""
    for name, value, low in (
        ("logs", logs, 1),
        ("max_steps", max_steps, 2),
        ("max_count", max_count, 1),
        ("max_batch", max_batch, 0),
    ):
        if type(value) is not int or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    hows = [CrashHow.RAISE, CrashHow.SIGKILL] if sigkill else [CrashHow.RAISE]
    produce = st.builds(
        ProduceRecords,
        count=st.integers(1, max_count),
        log=st.integers(0, logs - 1),
    )
    run = st.builds(RunBatches, batches=st.integers(1, 3))
    crash = st.builds(
        CrashQuery,
        batch=st.integers(0, max_batch),
        point=st.sampled_from([CrashPoint.BEFORE_WRITE, CrashPoint.AFTER_WRITE]),
        how=st.sampled_from(hows),
    )
    rest = st.lists(st.one_of(crash, produce, run), min_size=0, max_size=max_steps - 2)

    def assemble(parts: tuple[ProduceRecords, CrashQuery, Sequence[StreamStep]]) -> StreamSchedule:
        first, crash_step, more = parts
        steps: list[StreamStep] = [first, crash_step, *more]
        kills = [
            i
            for i, s in enumerate(steps)
            if isinstance(s, CrashQuery) and s.how is CrashHow.SIGKILL
        ]
        for i in kills[1:]:
            step = steps[i]
            assert isinstance(step, CrashQuery)
            steps[i] = CrashQuery(batch=step.batch, point=step.point, how=CrashHow.RAISE)
        return StreamSchedule(steps=tuple(steps))

    return st.tuples(produce, crash, rest).map(assemble)
