"""The history: every event of one simulated run, in logical time.

A history is plain data. The simulator writes it, the checkers (local and Spark) read it, the
reports render it; none of them talks to another. The schema is flat (one optional column per
field) so that the same rows go to JSONL and to Parquet unchanged; ``docs/history.md``
documents it. ``SCHEMA_VERSION`` changes whenever a field or a kind changes meaning, or the
files' layout changes (version 2 added the checksums of :mod:`harness.history.integrity`;
version 3 the ``indeterminate`` kind, the ``retried`` append and the ``seek`` fetch; version
4 the ``rebalance`` kind; files of older versions read as before, none of them holds these
forms).

Identity rules the checkers rely on:

* An input record is named by ``record_id``, unique across the run. Its ``partition`` is the
  input log it was appended to and ``offset`` its 0-based position in that log. An
  at-least-once upstream can append a record id again (``detail == "resent"``): the same
  record at a second position, whose effects are still expected once in all. A producer's
  own retry that wrote a record twice (``detail == "retried"``) is the same record too, but
  a duplicate in the log (the ``log-duplicate`` anomaly).
* A record whose send ended without an answer (an ``indeterminate`` event instead of an
  ``ack``) is owed only if some reader saw it.
* An output is named by ``output_id`` (unique per run, assigned by the world at ``emit``) and
  carries the ``record_id`` and ``part`` of the input it derives from. ``(record_id, part)`` is
  the *effect*: the unit that must be seen once (exactly-once) or at least once.
* Offsets in ``read``/``commit``/``fetch``/``rollback``/``truncate`` events are positions in
  the input partition: a committed offset ``c`` claims "every record at a position below ``c``
  is done; resume at ``c``".
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, TypeVar

from harness._shown import shown
from harness._usage import did_you_mean
from harness.errors import ConfigError

__all__ = [
    "EVENT_FIELDS",
    "INT_FIELDS",
    "POISON",
    "RESENT",
    "REQUIRED_FIELDS",
    "SCHEMA_VERSION",
    "STR_FIELDS",
    "AGAIN",
    "RETRIED",
    "AppendDetail",
    "FetchDetail",
    "RebalanceDetail",
    "CrashDetail",
    "EndDetail",
    "ReadDetail",
    "Event",
    "EventKind",
    "History",
    "HistoryMeta",
    "SinkKind",
    "SinkSpec",
    "Aggregate",
    "Isolation",
]

SCHEMA_VERSION: Final = 4


class AppendDetail(str, enum.Enum):
    """The ``detail`` vocabulary of ``append`` events (null: an ordinary record)."""

    POISON = "poison"
    """The payload does not deserialize: the record is expected to have no effect (no
    output, not counted), only to be moved past."""

    RESENT = "resent"
    """The upstream producer appended this record id again (an at-least-once producer's
    resend after a lost acknowledgement): same partition, key and value, a new offset. It is
    the same record as the id's first append (poison if that one is), so its effects are
    expected once in all, whichever copy the processor takes them from."""

    RETRIED = "retried"
    """The producer's own retry wrote this record id again (its first write's
    acknowledgement was lost and the producer is not idempotent): same partition, key and
    value, a new offset. The same record as the id's first append, like ``resent``, but the
    log now holds it twice: each such append is a ``log-duplicate``."""


class FetchDetail(str, enum.Enum):
    """The ``detail`` vocabulary of ``fetch`` events (null: the stored offset was read)."""

    SEEK = "seek"
    """The application repositioned its reader of ``partition`` to ``offset`` itself (a
    Kafka ``seek`` or an ``assign`` with offsets, a reader reopened at an earlier position):
    the reads that follow are compared with it, not with the reads before it."""


class RebalanceDetail(str, enum.Enum):
    """The ``detail`` vocabulary of ``rebalance`` events: what the change did to the
    instance's assignment of ``partition``."""

    ASSIGNED = "assigned"
    """The instance was given the partition (a subscription's rebalance, an ``assign``)."""
    REVOKED = "revoked"
    """The instance gave the partition up (a rebalance, an ``unassign``, an
    ``unsubscribe``)."""


class ReadDetail(str, enum.Enum):
    """The ``detail`` vocabulary of ``read`` events (null: an ordinary delivery)."""

    REDELIVERED = "redelivered"
    """A duplicate delivery injected by the schedule."""


class CrashDetail(str, enum.Enum):
    """The ``detail`` of ``crash`` events: what the crash took with it."""

    PROCESS = "process"
    MACHINE = "machine"


class EndDetail(str, enum.Enum):
    """The ``detail`` of the ``end`` event: ``complete``, or ``incomplete: <reason>``."""

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    """Prefix of the detail of a run that did not finish (``incomplete: <reason>``)."""


POISON: Final = AppendDetail.POISON.value
"""``append`` detail of a poison record (:attr:`AppendDetail.POISON`), as a plain string."""
RESENT: Final = AppendDetail.RESENT.value
"""``append`` detail of a record id appended again (:attr:`AppendDetail.RESENT`)."""
RETRIED: Final = AppendDetail.RETRIED.value
"""``append`` detail of a producer's retry that wrote a record twice
(:attr:`AppendDetail.RETRIED`)."""
AGAIN: Final = frozenset({RESENT, RETRIED})
"""The ``append`` details of a record id appended again (same record, a second position)."""


class EventKind(str, enum.Enum):
    """What happened. The value is the name written to JSONL/Parquet."""

    APPEND = "append"
    """The producer wrote an input record (not yet acknowledged)."""
    ACK = "ack"
    """The producer's commit covering the record returned: the record is part of the truth."""
    INDETERMINATE = "indeterminate"
    """The producer's send of ``record_id`` (appended at ``partition``/``offset``) ended
    without an answer (a timeout, a crash of the producer): the record may or may not be in
    the log. It is part of the truth only if some reader saw it (a ``read`` of it, or an
    ``observe`` of one of its outputs); otherwise nothing of it is owed, and nothing of it
    is unexpected either."""
    TRUNCATE = "truncate"
    """``partition`` was truncated below ``offset`` (its first readable record now): by
    retention (``process`` null) or by instance ``process`` (``ctx.truncate``)."""
    START = "start"
    """A processor instance ``process`` started from durable state only."""
    CRASH = "crash"
    """Instance ``process`` crashed; ``detail`` is ``process`` or ``machine``."""
    ROLLBACK = "rollback"
    """A machine crash lost unsynced writes: the stored offset of ``partition`` is now
    ``offset`` (null: no offset)."""
    ZOMBIE = "zombie"
    """Instance ``process`` lost its ownership but keeps running (a new one took over)."""
    ERROR = "error"
    """Instance ``process`` died of an exception; ``detail`` is its type and message."""
    REBALANCE = "rebalance"
    """Instance ``process``'s assignment changed: ``partition`` was ``assigned`` to it or
    ``revoked`` from it (``detail``, a :class:`RebalanceDetail`). Recorded for a change of an
    assignment the instance already had, not for its first one; where the reader resumes
    is the ``fetch`` that follows (version 4)."""
    FETCH = "fetch"
    """Instance ``process`` read the stored offset of ``partition`` (null: none); ``offset``
    is where a reader opened there resumes: the stored offset, or the log's first readable
    record when a truncation has passed it (``dlsn`` is the stored DLSN). With ``detail ==
    "seek"`` the application moved its reader back to ``offset`` itself instead."""
    READ = "read"
    """The source delivered ``record_id`` at ``offset`` of ``partition`` to ``process``;
    ``detail`` is ``redelivered`` for a duplicate delivery injected by the schedule."""
    EMIT = "emit"
    """``process`` wrote output ``output_id`` (effect ``record_id``/``part`` of ``parts``)
    to ``sink``; it is visible only once the sink commits (see ``observe``)."""
    PUT = "put"
    """``process`` stored ``value`` under ``key`` in table ``sink``."""
    COMMIT = "commit"
    """``process`` stored offset ``offset`` for ``partition`` in the offset store."""
    TXN_BEGIN = "txn-begin"
    TXN_COMMIT = "txn-commit"
    TXN_ABORT = "txn-abort"
    DRAIN = "drain"
    """The schedule ended; from here the processor runs without faults until caught up."""
    OBSERVE = "observe"
    """After the drain, ``sink`` contains this output (log sinks, in sink order) or this
    ``key``/``value`` (table sinks)."""
    END = "end"
    """The run ended; ``detail`` is ``complete`` or ``incomplete: <reason>``."""


EVENT_FIELDS: Final = (
    "index",
    "kind",
    "process",
    "partition",
    "offset",
    "record_id",
    "part",
    "parts",
    "key",
    "value",
    "sink",
    "output_id",
    "txn",
    "dlsn",
    "detail",
)
"""Column order of the flat schema (JSONL keys, Parquet columns)."""

INT_FIELDS: Final = ("process", "offset", "part", "parts", "value", "output_id", "txn")
"""The optional integer fields (64-bit in Parquet), in the order validators report them."""
STR_FIELDS: Final = ("partition", "record_id", "key", "sink", "dlsn", "detail")
"""The optional string fields, reported after :data:`INT_FIELDS`. ``index`` (an int) and
``kind`` (an :class:`EventKind` value) are never null."""

_K = EventKind
REQUIRED_FIELDS: Final[Mapping[EventKind, tuple[str, ...]]] = {
    _K.APPEND: ("partition", "offset", "record_id", "key", "value"),
    _K.ACK: ("partition", "offset", "record_id"),
    _K.INDETERMINATE: ("partition", "offset", "record_id"),
    _K.TRUNCATE: ("partition", "offset"),
    _K.START: ("process",),
    _K.CRASH: ("process", "detail"),
    _K.ROLLBACK: ("partition",),
    _K.ZOMBIE: ("process",),
    _K.ERROR: ("process", "detail"),
    _K.REBALANCE: ("process", "partition", "detail"),
    _K.FETCH: ("process", "partition"),
    _K.READ: ("process", "partition", "offset", "record_id"),
    _K.EMIT: ("process", "sink", "output_id", "part", "parts"),
    _K.PUT: ("process", "sink", "key", "value"),
    _K.COMMIT: ("process", "partition", "offset"),
    _K.TXN_BEGIN: ("process", "txn"),
    _K.TXN_COMMIT: ("process", "txn"),
    _K.TXN_ABORT: ("process", "txn"),
    _K.DRAIN: (),
    _K.OBSERVE: ("sink",),
    _K.END: ("detail",),
}
"""Fields that must be non-null for each kind; every other field may be null."""


@dataclass(frozen=True, slots=True)
class Event:
    """One row of a history. Unused fields are ``None``."""

    index: int
    kind: EventKind
    process: int | None = None
    partition: str | None = None
    offset: int | None = None
    record_id: str | None = None
    part: int | None = None
    parts: int | None = None
    key: str | None = None
    value: int | None = None
    sink: str | None = None
    output_id: int | None = None
    txn: int | None = None
    dlsn: str | None = None
    detail: str | None = None

    def to_row(self) -> dict[str, Any]:
        """The event as a flat dict in :data:`EVENT_FIELDS` order (kind as its string)."""
        row = {name: getattr(self, name) for name in EVENT_FIELDS}
        row["kind"] = self.kind.value
        return row


assert tuple(f.name for f in fields(Event)) == EVENT_FIELDS


class SinkKind(str, enum.Enum):
    """How a sink's contents are observed after the drain."""

    LOG = "log"
    """An output log: every committed record is an output with an effect ``(record_id, part)``."""
    TABLE = "table"
    """A key-value table: last write wins; its final ``key -> value`` pairs are observed."""
    ENTITY = "entity"
    """An entity table: rows upserted by an entity key (the input record's key), last write
    wins, written as outputs (each carries the input record it came from); the final row of
    each key is observed, and must come from the key's last acknowledged input record."""


class Aggregate(str, enum.Enum):
    """What a table sink is expected to hold per input key, computed from acknowledged input."""

    COUNT = "count"
    SUM = "sum"


class Isolation(str, enum.Enum):
    """How the downstream reader of a log sink reads transactional outputs (Kafka's
    ``isolation.level``)."""

    READ_COMMITTED = "read_committed"
    """Outputs of a transaction are seen once it commits, never if it aborts."""
    READ_UNCOMMITTED = "read_uncommitted"
    """Outputs of a transaction are seen as soon as they are written, whatever becomes of
    the transaction (Kafka consumers' default)."""


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """A sink declared by the processor's topology, as recorded in the history's header.

    ``ordered``: for log sinks, outputs derived from one input partition must appear in
    the partition's order (first occurrences). ``aggregate``: for table sinks, the value per key
    that acknowledged input implies; ``None`` means the table is not checked. ``upsert``: for
    log sinks, the sink keeps one output per output ``key``, the last one written (a table of
    rows written with ``INSERT ... ON CONFLICT UPDATE``, a compacted topic read after
    compaction): its ``observe`` events are the surviving outputs only. ``isolation``: for
    log sinks, how its reader reads transactional outputs; with
    :attr:`Isolation.READ_UNCOMMITTED` the outputs of a transaction that aborted are seen
    too. ``upsert`` and ``isolation`` are written to the header only when they are not
    their defaults, so histories of other sinks read as before.
    """

    kind: SinkKind
    ordered: bool = False
    aggregate: Aggregate | None = None
    upsert: bool = False
    isolation: Isolation = Isolation.READ_COMMITTED

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind.value,
            "ordered": self.ordered,
            "aggregate": None if self.aggregate is None else self.aggregate.value,
        }
        if self.upsert:
            data["upsert"] = True
        if self.isolation is not Isolation.READ_COMMITTED:
            data["isolation"] = self.isolation.value
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SinkSpec:
        aggregate = data.get("aggregate")
        return cls(
            kind=_member(SinkKind, data["kind"], "sink kind"),
            ordered=bool(data.get("ordered", False)),
            aggregate=None if aggregate is None else _member(Aggregate, aggregate, "aggregate"),
            upsert=bool(data.get("upsert", False)),
            isolation=_member(
                Isolation, data.get("isolation", Isolation.READ_COMMITTED.value), "isolation"
            ),
        )


_E = TypeVar("_E", bound=enum.Enum)


def _member(enum_type: type[_E], value: object, what: str) -> _E:
    """``enum_type(value)``, or a :class:`ConfigError` naming the valid values and the one
    probably meant."""
    try:
        return enum_type(value)
    except ValueError:
        names = [str(member.value) for member in enum_type]
        raise ConfigError(
            f"unknown {what} {shown(value)}{did_you_mean(str(value), names)}; choose from "
            f"{', '.join(names)}"
        ) from None


@dataclass(frozen=True, slots=True)
class HistoryMeta:
    """The header of a history: what a checker needs besides the events.

    ``partitions``: input partition names; ``sinks``: sink name -> spec; ``run_id``: a name
    for the run (stable for a given seed and schedule); ``extra``: free-form JSON-able facts
    (processor, backend, schedule) that checkers ignore.
    """

    partitions: tuple[str, ...]
    sinks: Mapping[str, SinkSpec]
    run_id: str = "run"
    version: int = SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "run_id": self.run_id,
            "partitions": list(self.partitions),
            "sinks": {name: spec.to_json() for name, spec in sorted(self.sinks.items())},
            "extra": dict(self.extra),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HistoryMeta:
        return cls(
            partitions=tuple(data["partitions"]),
            sinks={name: SinkSpec.from_json(spec) for name, spec in data["sinks"].items()},
            run_id=str(data.get("run_id", "run")),
            version=int(data["version"]),
            extra=dict(data.get("extra") or {}),
        )


@dataclass(frozen=True, slots=True)
class History:
    """A header and the events in logical-time order (``events[i].index == i``)."""

    meta: HistoryMeta
    events: tuple[Event, ...]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def __len__(self) -> int:
        return len(self.events)
