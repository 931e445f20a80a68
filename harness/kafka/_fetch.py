"""What both consumer doubles share: an assignment of cursors and the fetch of the next
record (position resolution, ``auto.offset.reset``, end-of-partition, the schedule's choice
among ready partitions)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from harness.kafka._broker import Cursor, InputRecord, Runtime

__all__ = [
    "BEGINNING",
    "END",
    "Event",
    "Fetched",
    "Fetcher",
    "Refused",
    "commit_changed",
    "deserialized",
]

_CLOSING: Final = frozenset({"close", "stop"})
"""The ``assign`` calls of a consumer closing: its assignment ends with the process."""

BEGINNING, END = -2, -1
"""Logical offsets (librdkafka's ``OFFSET_BEGINNING`` / ``OFFSET_END``); any other negative
offset means "the committed offset"."""


class Event(enum.Enum):
    EOF = "eof"
    RESET_ERROR = "reset-error"


@dataclass(frozen=True, slots=True)
class Fetched:
    """Not a record: the end of a partition, or no valid position and reset policy error."""

    event: Event
    cursor: Cursor
    position: int | None


class Refused(enum.Enum):
    """Why the group coordinator refuses a member's offset commit (Kafka's error names)."""

    UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
    """The member was removed from the group: its process was taken over (a zombie whose
    session expired while it was paused)."""
    ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
    """Another member joined since this one did, and it has not rejoined yet."""


class Fetcher:
    """The assigned partitions of one consumer and their positions (instance memory), and
    its group membership: a consumer that subscribed is a member of its group's generation
    (``subscribe()``; one that ``assign()``-ed partitions is none, and the coordinator takes
    its commits as a standalone consumer's)."""

    def __init__(self, rt: Runtime, group: str | None, reset: str, eof: bool) -> None:
        self.rt = rt
        self.group = group
        self.reset = reset
        self.eof = eof
        self.cursors: dict[tuple[str, int], Cursor] = {}
        self.generation: int | None = None
        """The group generation this consumer joined (None: not a member)."""
        self.had_assignment = False
        """Whether the consumer was assigned partitions before (its first assignment is
        not recorded as a change)."""

    # -- group membership (KIP-447's generation check on commits) ------------------------

    def join(self) -> None:
        """A subscription's assignment: the consumer joins its group, a new generation."""
        if self.group:
            self.generation = self.rt.broker.join(self.group)

    def leave(self) -> None:
        self.generation = None

    def rejoin(self) -> None:
        """A member's poll: after another member joined, it rejoins the current generation
        (as a live member's heartbeat would make it); a zombie, which believes it still owns
        its partitions, does not."""
        if self.generation is not None and self.group and not self.rt.inst.fenced:
            self.generation = self.rt.broker.generations[self.group]

    def refused(self) -> Refused | None:
        """Why the coordinator refuses this consumer's commit now (None: it accepts it)."""
        if self.generation is None or not self.group:
            return None
        if self.rt.inst.fenced:
            return Refused.UNKNOWN_MEMBER_ID
        if self.generation != self.rt.broker.generations[self.group]:
            return Refused.ILLEGAL_GENERATION
        return None

    def owns(self, name: str) -> bool:
        return any(c.name == name for c in self.cursors.values())

    def assign(self, assignment: Iterable[tuple[str, int, int]], call: str) -> None:
        """Replace the assignment with ``(topic, partition, offset)`` triples. Once the
        consumer has had an assignment, each change is recorded (``rebalance`` events),
        unless the consumer is closing (``call`` ``close``/``stop``)."""
        rt = self.rt
        for cursor in self.cursors.values():
            rt.broker.close_reader(rt, cursor)
        before = [cursor.name for cursor in self.cursors.values()]
        self.cursors = {}
        triples = [(t, p, o, rt.broker.name(t, p, call)) for t, p, o in assignment]
        after = [name for *_, name in triples]
        if self.had_assignment and call not in _CLOSING:
            rt.broker.world.record.rebalance(rt.process, before, after)
        self.had_assignment = self.had_assignment or bool(after)
        for topic, partition, offset, name in triples:
            cursor = Cursor(name, topic, partition)
            self.seek(cursor, offset)
            self.cursors[(topic, partition)] = cursor

    def seek(self, cursor: Cursor, offset: int) -> None:
        rt = self.rt
        rt.broker.close_reader(rt, cursor)
        low, high = rt.broker.watermarks(cursor.name)
        if offset == BEGINNING:
            cursor.position = low
        elif offset == END:
            cursor.position = high
        elif offset >= 0:
            cursor.position = offset
        else:
            cursor.position = None
        cursor.paused = False
        cursor.eof_at = -1
        if cursor.position is not None:  # the application's own seek back, if it is one
            rt.broker.world.record.rewind(rt.process, cursor.name, cursor.position)

    def _resolve(self, cursor: Cursor) -> Fetched | None:
        rt = self.rt
        low, high = rt.broker.watermarks(cursor.name)
        if cursor.position is None and self.group:
            cursor.position = rt.broker.committed(rt, self.group, cursor.name)
        pos = cursor.position
        if pos is not None and low <= pos <= high:
            return None
        if self.reset == "error":
            cursor.paused = True  # until the application seeks
            return Fetched(Event.RESET_ERROR, cursor, pos)
        first = cursor.name not in rt.broker.reset_once
        rt.broker.reset_once.add(cursor.name)
        if self.reset == "earliest" or (first and not rt.broker.wiring.backlog_owed):
            cursor.position = low
        else:
            cursor.position = high
        return None

    def next(self) -> InputRecord | Fetched | None:
        """The next record of a ready partition (the schedule picks which), an event, or
        None when nothing is ready."""
        rt = self.rt
        broker = rt.broker
        ready = []
        for cursor in self.cursors.values():
            if cursor.paused:
                continue
            low, high = broker.watermarks(cursor.name)
            pos = cursor.position
            if pos is None or not low <= pos <= high:
                event = self._resolve(cursor)
                if event is not None:
                    return event
                pos = cursor.position
            assert pos is not None
            if pos < broker.readable(cursor.name) or (self.eof and cursor.eof_at != pos):
                ready.append(cursor)
        if not ready:
            return None
        cursor = ready[rt.choose(len(ready))]
        record = broker.read(rt, cursor)
        if record is None:
            cursor.eof_at = cursor.position if cursor.position is not None else -1
            return Fetched(Event.EOF, cursor, cursor.position)
        cursor.position = record.offset + 1
        return record

    def positions(self) -> dict[str, int]:
        return {c.name: c.position for c in self.cursors.values() if c.position is not None}


REBALANCED: Final = (
    "Commit cannot be completed since the group has already rebalanced and assigned the "
    "partitions to another member. This means that the time between subsequent calls to "
    "poll() was longer than the configured max_poll_interval_ms, which typically implies that "
    "the poll loop is spending too much time message processing."
)
"""kafka-python's and aiokafka's ``CommitFailedError`` text."""


def commit_changed(
    fetch: Fetcher,
    offsets: dict[str, int],
    committed: dict[str, int],
    refused: type[Exception] | None,
) -> None:
    """Commit the offsets that differ from the ones this consumer last committed
    (``committed``, updated), as kafka-python and aiokafka skip unchanged positions. When the
    group coordinator refuses the consumer's commit nothing is committed, and ``refused``
    (their ``CommitFailedError``) is raised; None: only logged, as for an automatic commit."""
    due = {n: o for n, o in offsets.items() if committed.get(n) != o}
    if not due:
        return
    if fetch.refused() is not None:
        if refused is not None:
            raise refused(REBALANCED)
        return
    assert fetch.group is not None
    fetch.rt.broker.commit_offsets(fetch.rt, fetch.group, due, "commit")
    committed.update(due)


def deserialized(
    record: InputRecord,
    key_de: Callable[[bytes], Any] | None,
    value_de: Callable[[bytes], Any] | None,
) -> tuple[Any, Any]:
    """The record's key and value through the consumer's deserializers (None stays None)."""
    key = record.key if key_de is None or record.key is None else key_de(record.key)
    value = record.value if value_de is None or record.value is None else value_de(record.value)
    return key, value
