"""Stream schedules, as data: the steps a Structured Streaming run (:mod:`harness.spark.streaming`)
executes under the harness.

A :class:`StreamSchedule` is a tuple of steps, then a fault-free drain (unless ``drain`` is
False), with a JSON round trip (:meth:`StreamSchedule.dumps`, :meth:`StreamSchedule.from_json`)
identical for equal schedules, like the simulator's schedules:

* :class:`ProduceRecords` ``(count, log)``: the producer appends ``count`` records to log
  ``log`` (modulo the logs) and commits;
* :class:`RunBatches` ``(batches)``: a query starts from the checkpoint, runs up to ``batches``
  micro-batches (``Trigger.AvailableNow``) and stops cleanly;
* :class:`CrashQuery` ``(batch, point, how)``: a query starts from the checkpoint and crashes
  in its micro-batch ``batch`` (0-based in this run) at :class:`CrashPoint` ``point``, killed
  :class:`CrashHow` ``how``;
* :class:`FailTask` ``(batch)``: a query starts from the checkpoint and runs to the end of its
  input while one task of its micro-batch ``batch`` fails once after doing its work; Spark
  retries it where its master allows task retries (unchanged jobs only);
* :class:`ResendRecords` ``(count, log)``: the input's upstream producer, at-least-once,
  appends its last ``count`` records of log ``log`` again under the same record ids (a
  legitimate resend, recorded as ``append`` events with detail ``resent``; unchanged jobs
  only).

Bad values raise :class:`~harness.errors.ConfigError` naming the step, the field and the
allowed values. :func:`harness.strategies.stream_schedules` draws schedules with Hypothesis.
This module imports neither pyspark nor Hypothesis.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final, TypeAlias, final

from harness.errors import ConfigError
from harness.faults.schedule import compact, json_form, read_form

__all__ = [
    "STREAM_SCHEDULE_VERSION",
    "STREAM_STEP_TYPES",
    "CrashHow",
    "CrashPoint",
    "CrashQuery",
    "FailTask",
    "ProduceRecords",
    "ResendRecords",
    "RunBatches",
    "StreamSchedule",
    "StreamStep",
]

STREAM_SCHEDULE_VERSION: Final = 1


class CrashPoint(str, enum.Enum):
    """Where in a micro-batch a crash lands."""

    BEFORE_WRITE = "before-write"
    """The batch is in the checkpoint's offset log; nothing of it is written."""
    AFTER_WRITE = "after-write"
    """The batch's output is written; the checkpoint has not committed the batch."""
    AFTER_COMMIT = "after-commit"
    """The checkpoint has committed the batch; the next one is not planned yet (unchanged
    jobs only, :mod:`harness.spark.streaming.job`; the built-in variants refuse it)."""


class CrashHow(str, enum.Enum):
    """How the query dies."""

    RAISE = "raise"
    """In this process: the micro-batch raises and the query terminates with the exception."""
    SIGKILL = "sigkill"
    """The query runs in a child driver process, killed with SIGKILL (JVM and workers too)."""


@final
@dataclass(frozen=True, slots=True)
class ProduceRecords:
    """The producer appends ``count`` records to log number ``log`` (modulo the logs)."""

    count: int = 1
    log: int = 0
    op: ClassVar[str] = "produce"


@final
@dataclass(frozen=True, slots=True)
class RunBatches:
    """A query starts from the checkpoint, runs up to ``batches`` micro-batches, stops."""

    batches: int = 1
    op: ClassVar[str] = "run"


@final
@dataclass(frozen=True, slots=True)
class CrashQuery:
    """A query starts from the checkpoint and crashes in its micro-batch ``batch``."""

    batch: int = 0
    point: CrashPoint = CrashPoint.AFTER_WRITE
    how: CrashHow = CrashHow.RAISE
    op: ClassVar[str] = "crash"


@final
@dataclass(frozen=True, slots=True)
class FailTask:
    """A query starts from the checkpoint and runs to the end of the input it can see; one
    task of its micro-batch ``batch`` (or of its last batch, when it has fewer) raises once
    after doing its work, and Spark retries it where its master allows (``local[N,M]``)."""

    batch: int = 0
    op: ClassVar[str] = "fail-task"


@final
@dataclass(frozen=True, slots=True)
class ResendRecords:
    """The upstream producer appends its last ``count`` records of log ``log`` again."""

    count: int = 1
    log: int = 0
    op: ClassVar[str] = "resend"


StreamStep: TypeAlias = ProduceRecords | RunBatches | CrashQuery | FailTask | ResendRecords
STREAM_STEP_TYPES: Final[Mapping[str, type[StreamStep]]] = {
    cls.op: cls for cls in (ProduceRecords, RunBatches, CrashQuery, FailTask, ResendRecords)
}
_STEP_TYPES: Final = STREAM_STEP_TYPES
_LIMITS: Final[Mapping[str, tuple[int, int]]] = {
    "count": (0, 1_000_000),
    "log": (0, 1_000),
    "batches": (1, 10_000),
    "batch": (0, 10_000),
}
_ENUMS: Final[Mapping[str, type[enum.Enum]]] = {"point": CrashPoint, "how": CrashHow}


def _step_to_json(step: StreamStep) -> dict[str, Any]:
    data: dict[str, Any] = {"op": step.op}
    for f in fields(step):
        value = getattr(step, f.name)
        data[f.name] = value.value if isinstance(value, enum.Enum) else value
    return data


def _step_from_json(data: object, where: str) -> StreamStep:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where} must be a JSON object such as {{'op': 'run'}}, got {data!r}")
    op = data.get("op")
    cls = _STEP_TYPES.get(op) if isinstance(op, str) else None
    if cls is None:
        raise ConfigError(f"{where} has unknown op {op!r}; known ops: {', '.join(_STEP_TYPES)}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names - {"op"})
    if unknown:
        raise ConfigError(
            f"{where} ({op}) has unknown field(s) {unknown}; it takes {sorted(names)}"
        )
    kwargs: dict[str, Any] = {}
    for name in names:
        if name not in data:
            continue
        value = data[name]
        if name in _ENUMS:
            try:
                kwargs[name] = _ENUMS[name](value)
            except ValueError:
                choices = ", ".join(str(m.value) for m in _ENUMS[name])
                raise ConfigError(
                    f"{where} ({op}) field {name!r} must be one of {choices}, got {value!r}"
                ) from None
        else:
            kwargs[name] = value
    return cls(**kwargs)


def _check_step(step: object, where: str) -> None:
    if type(step) not in _STEP_TYPES.values():
        raise ConfigError(
            f"{where} is {step!r}, not a stream step; use ProduceRecords, RunBatches, "
            "CrashQuery, FailTask or ResendRecords from harness.faults.streams"
        )
    for f in fields(step):  # type: ignore[arg-type]
        value = getattr(step, f.name)
        if f.name in _ENUMS:
            if not isinstance(value, _ENUMS[f.name]):
                raise ConfigError(
                    f"{where} field {f.name!r} must be a {_ENUMS[f.name].__name__}, got {value!r}"
                )
            continue
        low, high = _LIMITS[f.name]
        if type(value) is not int or not low <= value <= high:
            raise ConfigError(
                f"{where} field {f.name!r} must be an integer in [{low}, {high}], got {value!r}"
            )


@final
@dataclass(frozen=True, slots=True)
class StreamSchedule:
    """Steps to execute in order, then a fault-free drain unless ``drain`` is False."""

    steps: tuple[StreamStep, ...] = ()
    drain: bool = True
    version: int = STREAM_SCHEDULE_VERSION

    def __post_init__(self) -> None:
        steps: object = self.steps
        if not isinstance(steps, tuple):
            object.__setattr__(self, "steps", tuple(steps))  # type: ignore[arg-type]
        if type(self.drain) is not bool:
            raise ConfigError(f"stream schedule drain must be True or False, got {self.drain!r}")
        if self.version != STREAM_SCHEDULE_VERSION:
            raise ConfigError(
                f"stream schedule version {self.version!r} is not supported; this harness reads "
                f"version {STREAM_SCHEDULE_VERSION}"
            )
        for i, step in enumerate(self.steps):
            _check_step(step, f"stream schedule step {i}")

    def __len__(self) -> int:
        return len(self.steps)

    def to_json(self) -> dict[str, Any]:
        return json_form(self.version, self.drain, map(_step_to_json, self.steps))

    def dumps(self) -> str:
        """Compact one-line JSON, identical for equal schedules."""
        return compact(self.to_json())

    @classmethod
    def from_json(cls, data: object) -> StreamSchedule:
        """Build a schedule from its JSON form (a dict, or text); bad input raises ConfigError."""
        steps, drain = read_form(data, what="stream schedule", version=STREAM_SCHEDULE_VERSION)
        return cls(
            steps=tuple(_step_from_json(s, f"step {i}") for i, s in enumerate(steps)),
            drain=drain,
        )

    def describe(self, stops: Mapping[Any, str] | None = None) -> str:
        """One step per line, numbered, for humans (``stops``, where a simulated run's steps
        left its instance, has no meaning for a streaming schedule and is ignored)."""
        lines = []
        for i, step in enumerate(self.steps):
            args = ", ".join(
                f"{f.name}={getattr(step, f.name).value}"
                if isinstance(getattr(step, f.name), enum.Enum)
                else f"{f.name}={getattr(step, f.name)!r}"
                for f in fields(step)
            )
            lines.append(f"{i:3d}. {type(step).__name__}({args})")
        lines.append("     drain" if self.drain else "     (no drain)")
        return "\n".join(lines)

    @property
    def kills(self) -> int:
        """How many steps SIGKILL a child driver process."""
        return sum(isinstance(s, CrashQuery) and s.how is CrashHow.SIGKILL for s in self.steps)
