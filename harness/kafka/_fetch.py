"""What both consumer doubles share: an assignment of cursors and the fetch of the next
record (position resolution, ``auto.offset.reset``, end-of-partition, the schedule's choice
among ready partitions)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from harness.kafka._broker import Cursor, InputRecord, Runtime

__all__ = ["BEGINNING", "END", "Event", "Fetched", "Fetcher"]

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


class Fetcher:
    """The assigned partitions of one consumer and their positions (instance memory)."""

    def __init__(self, rt: Runtime, group: str | None, reset: str, eof: bool) -> None:
        self.rt = rt
        self.group = group
        self.reset = reset
        self.eof = eof
        self.cursors: dict[tuple[str, int], Cursor] = {}

    def owns(self, name: str) -> bool:
        return any(c.name == name for c in self.cursors.values())

    def assign(self, assignment: Iterable[tuple[str, int, int]], call: str) -> None:
        """Replace the assignment with ``(topic, partition, offset)`` triples."""
        rt = self.rt
        for cursor in self.cursors.values():
            rt.broker.close_reader(rt, cursor)
        self.cursors = {}
        for topic, partition, offset in assignment:
            cursor = Cursor(rt.broker.name(topic, partition, call), topic, partition)
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
            if pos < high or (self.eof and cursor.eof_at != pos):
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
