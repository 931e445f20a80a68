"""Schedules: what happens, step by step, as plain data.

A schedule is a list of steps the simulator executes in order, then (by default) a drain. It
never depends on anything the processor does, so one schedule always produces the same
history; it round-trips through JSON (``Schedule.to_json`` / ``Schedule.from_json``) so a
failure can be saved, printed and replayed without Hypothesis.

Every step is valid in every state: a step that does not apply (``Run`` with no live
instance, ``Crash`` of nothing, a partition number beyond the topology's) is folded onto
something that exists or does nothing. That is what lets Hypothesis delete any step while
shrinking and still have a runnable schedule.

The fault vocabulary (``docs/engine.md`` tells the story of each):

* ``Produce(partition, count, ack)``: the input producer writes ``count`` records; with
  ``ack=False`` it crashes before its commit, so the records are lost and never acknowledged.
* ``Run(calls)``: the active instance makes up to ``calls`` calls into the world (every call is
  a fault point), or fewer if it blocks waiting for input.
* ``Crash(machine, keep)``: the active instance dies between two calls. A process crash keeps
  every write that reached the stores; a machine crash also loses the unsynced writes of each
  store except the first ``keep`` of them.
* ``Restart()``: a fresh instance starts from durable state only (if none is active).
* ``Duplicate()``: the source delivers the active instance's last record again.
* ``LoseAck()``: the active instance's next sink write is applied but its acknowledgement is
  lost, so the client retries it: the write is applied twice.
* ``Reorder(pick)``: the active instance's next nondeterministic choice (which asynchronous
  task completes, which partition delivers next) takes option ``pick`` (modulo the options).
* ``Tick()``: the active instance's periodic work (timers) fires now; without it, it is delayed.
* ``Takeover()``: the active instance loses ownership but keeps running as a zombie; its log
  writers are fenced and a new instance becomes active.
* ``RunZombie(calls)``: the oldest zombie makes up to ``calls`` calls.
* ``Truncate(partition, upto)``: retention truncates the input log below position ``upto``,
  but never past the partition's stored offset (retention honours the committed position).
* ``Resend(partition, count)``: the input's upstream producer lost the acknowledgement of the
  last ``count`` records it appended to the partition and, being at-least-once, appends them
  again under the same record ids (new positions, same keys and values). Only a topology
  with ``upstream_resends=True`` has such an upstream; elsewhere the step does nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Final

from harness._json import parse_json
from harness._shown import shown
from harness.errors import ConfigError

__all__ = [
    "SCHEDULE_VERSION",
    "Crash",
    "Duplicate",
    "LoseAck",
    "Produce",
    "Reorder",
    "Resend",
    "Restart",
    "Run",
    "RunZombie",
    "STEP_TYPES",
    "Schedule",
    "Step",
    "Takeover",
    "Tick",
    "Truncate",
    "compact",
    "json_form",
    "read_form",
]

SCHEDULE_VERSION: Final = 1


@dataclass(frozen=True, slots=True)
class Produce:
    partition: int = 0
    count: int = 1
    ack: bool = True
    op: ClassVar[str] = "produce"


@dataclass(frozen=True, slots=True)
class Run:
    calls: int = 1
    op: ClassVar[str] = "run"


@dataclass(frozen=True, slots=True)
class Crash:
    machine: bool = False
    keep: int = 0
    op: ClassVar[str] = "crash"


@dataclass(frozen=True, slots=True)
class Restart:
    op: ClassVar[str] = "restart"


@dataclass(frozen=True, slots=True)
class Duplicate:
    op: ClassVar[str] = "duplicate"


@dataclass(frozen=True, slots=True)
class LoseAck:
    op: ClassVar[str] = "lose-ack"


@dataclass(frozen=True, slots=True)
class Reorder:
    pick: int = 1
    op: ClassVar[str] = "reorder"


@dataclass(frozen=True, slots=True)
class Tick:
    op: ClassVar[str] = "tick"


@dataclass(frozen=True, slots=True)
class Takeover:
    op: ClassVar[str] = "takeover"


@dataclass(frozen=True, slots=True)
class RunZombie:
    calls: int = 1
    op: ClassVar[str] = "run-zombie"


@dataclass(frozen=True, slots=True)
class Truncate:
    partition: int = 0
    upto: int = 1
    op: ClassVar[str] = "truncate"


@dataclass(frozen=True, slots=True)
class Resend:
    partition: int = 0
    count: int = 1
    op: ClassVar[str] = "resend"


Step = (
    Produce
    | Run
    | Crash
    | Restart
    | Duplicate
    | LoseAck
    | Reorder
    | Tick
    | Takeover
    | RunZombie
    | Truncate
    | Resend
)
STEP_TYPES: Final[Mapping[str, type[Step]]] = {
    cls.op: cls
    for cls in (
        Produce,
        Run,
        Crash,
        Restart,
        Duplicate,
        LoseAck,
        Reorder,
        Tick,
        Takeover,
        RunZombie,
        Truncate,
        Resend,
    )
}

_STEP_CLASSES: Final[frozenset[type]] = frozenset(STEP_TYPES.values())

_LIMITS: Final[Mapping[str, tuple[int, int]]] = {
    "partition": (0, 1_000),
    "count": (0, 100_000),
    "calls": (0, 1_000_000),
    "keep": (0, 1_000_000),
    "pick": (0, 1_000_000),
    "upto": (0, 10_000_000),
}


def step_to_json(step: Step) -> dict[str, Any]:
    """``{"op": ..., field: value, ...}`` with every field, in declaration order."""
    data: dict[str, Any] = {"op": step.op}
    for f in fields(step):
        data[f.name] = getattr(step, f.name)
    return data


def step_from_json(data: object, where: str = "step") -> Step:
    """Build a step from its JSON form, or raise ConfigError naming the bad value."""
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{where} must be a JSON object such as {{'op': 'run'}}, got {shown(data)}"
        )
    op = data.get("op")
    cls = STEP_TYPES.get(op) if isinstance(op, str) else None
    if cls is None:
        raise ConfigError(
            f"{where} has unknown op {shown(op)}; known ops: {', '.join(sorted(STEP_TYPES))}"
        )
    names = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(names) - {"op"})
    if unknown:
        raise ConfigError(
            f"{where} ({op}) has unknown field(s) {unknown}; {op} takes {sorted(names) or 'none'}"
        )
    kwargs: dict[str, Any] = {}
    for name in names:
        if name not in data:
            continue
        value = data[name]
        if name == "ack" or name == "machine":
            if type(value) is not bool:
                raise ConfigError(
                    f"{where} ({op}) field {shown(name)} must be true or false, got {shown(value)}"
                )
        else:
            low, high = _LIMITS[name]
            if type(value) is not int or not low <= value <= high:
                raise ConfigError(
                    f"{where} ({op}) field {shown(name)} must be an integer in [{low}, {high}], "
                    f"got {shown(value)}"
                )
        kwargs[name] = value
    return cls(**kwargs)


def json_form(version: int, drain: bool, steps: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The JSON form of a schedule (this module's or a stream schedule): its version, drain
    and steps, in that order."""
    return {"version": version, "drain": drain, "steps": list(steps)}


def compact(form: Mapping[str, Any]) -> str:
    """Compact one-line JSON of a schedule's :func:`json_form`, identical for equal ones."""
    return json.dumps(form, separators=(",", ":"))


def read_form(data: object, *, what: str, version: int) -> tuple[Sequence[object], bool]:
    """The steps (still JSON) and the drain of a schedule's JSON form (a dict, or text), once
    its version, fields, steps and drain are checked; ConfigError names what is wrong
    (``what``: ``"schedule"``, ``"stream schedule"``)."""
    if isinstance(data, str | bytes):
        data = parse_json(data, what=what, fix="pass the JSON printed by a failing run")
    if not isinstance(data, Mapping):
        raise ConfigError(f"a {what} is a JSON object with 'steps', got {shown(data)}")
    found = data.get("version", version)
    if type(found) is not int or found != version:
        raise ConfigError(
            f"{what} version {shown(found)} is not supported; this harness reads version "
            f"{version} (upgrade stream-harness to replay newer schedules)"
        )
    unknown = sorted(set(data) - {"version", "drain", "steps"})
    if unknown:
        raise ConfigError(f"{what} has unknown field(s) {unknown}; known: drain, steps, version")
    steps = data.get("steps", [])
    if not isinstance(steps, Sequence) or isinstance(steps, str | bytes):
        raise ConfigError(f"{what} 'steps' must be a list, got {shown(steps)}")
    drain = data.get("drain", True)
    if type(drain) is not bool:
        raise ConfigError(f"{what} 'drain' must be true or false, got {shown(drain)}")
    return steps, drain


@dataclass(frozen=True, slots=True)
class Schedule:
    """Steps to execute in order, then a fault-free drain unless ``drain`` is False."""

    steps: tuple[Step, ...] = ()
    drain: bool = True
    version: int = SCHEDULE_VERSION

    def __post_init__(self) -> None:
        steps: object = self.steps
        if not isinstance(steps, tuple):  # a list is accepted and frozen
            object.__setattr__(self, "steps", tuple(steps))  # type: ignore[arg-type]
        if type(self.drain) is not bool:
            raise ConfigError(f"schedule drain must be True or False, got {shown(self.drain)}")
        if type(self.version) is not int or self.version != SCHEDULE_VERSION:
            raise ConfigError(
                f"schedule version {shown(self.version)} is not supported; this harness reads "
                f"version {SCHEDULE_VERSION} (upgrade stream-harness to replay newer schedules)"
            )
        for i, step in enumerate(self.steps):
            if type(step) not in _STEP_CLASSES:
                raise ConfigError(
                    f"schedule step {i} is {shown(step)}, not a step; use Produce, Run, Crash, ... "
                    "from harness.faults"
                )

    def __len__(self) -> int:
        return len(self.steps)

    def to_json(self) -> dict[str, Any]:
        return json_form(self.version, self.drain, map(step_to_json, self.steps))

    def dumps(self) -> str:
        """Compact one-line JSON, identical for equal schedules."""
        return compact(self.to_json())

    @classmethod
    def from_json(cls, data: object) -> Schedule:
        """Build a schedule from its JSON form (a dict, or text)."""
        steps, drain = read_form(data, what="schedule", version=SCHEDULE_VERSION)
        return cls(
            steps=tuple(step_from_json(s, f"step {i}") for i, s in enumerate(steps)),
            drain=drain,
        )

    @classmethod
    def loads(cls, text: str | bytes) -> Schedule:
        return cls.from_json(text)

    def describe(self, stops: Mapping[Any, str] | None = None) -> str:
        """One step per line, numbered, for humans. ``stops`` (a history's
        ``meta.extra["stops"]``: step index -> where that run step stopped) ends a run
        step's line with the call it stopped before, where the faults after it land."""
        stops = stops if isinstance(stops, Mapping) else {}
        lines = []
        for i, step in enumerate(self.steps):
            args = ", ".join(f"{f.name}={getattr(step, f.name)!r}" for f in fields(step))
            stop = stops.get(str(i))
            where = f"  # {stop}" if isinstance(stop, str) else ""
            lines.append(f"{i:3d}. {type(step).__name__}({args}){where}")
        lines.append("     drain" if self.drain else "     (no drain)")
        return "\n".join(lines)
