"""Hypothesis strategies that draw histories, for testing checkers against each other.

:func:`histories` draws well-formed histories of random events: nothing promises they are
correct, and every anomaly kind can occur (lost, duplicate, unexpected (including outputs of
poison records and of undeclared parts), aborted-read, count-mismatch on both sides,
nonmonotonic, skip, offset-ahead, offset-regression, inconsistent-offsets, log-duplicate,
nonmonotonic-poll, nonmonotonic-send; stale with ``entity=True``), with incomplete and
undrained runs, redeliveries, truncation, appends that take an unacknowledged position again
or jump ahead, producers' retries (``retried``), sends whose answer never came
(``indeterminate``), sends acknowledged below earlier ones, reads that find a record where
it was not appended, rebalances (a partition revoked and assigned again before a fetch) and
histories without a log sink.
:func:`malformed_histories` breaks such a history in the
ways a Parquet file can hold (values keep their types), and :func:`empty_history` has no
events. The local and the Spark checker are held to the same verdict on all three.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from hypothesis import strategies as st

from harness.history.events import (
    INT_FIELDS,
    Aggregate,
    AppendDetail,
    EndDetail,
    Event,
    EventKind,
    History,
    HistoryMeta,
    ReadDetail,
    RebalanceDetail,
    SinkKind,
    SinkSpec,
)

__all__ = [
    "KEYS",
    "PARTITIONS",
    "HistoryBuilder",
    "empty_history",
    "histories",
    "malformed_histories",
]

KEYS: Final = ("k1", "k2", "k3")
PARTITIONS: Final = ("p", "q")

_K = EventKind
_STEPS: Final = (
    "append",
    "append",
    "ack",
    "ack",
    "read",
    "read",
    "emit",
    "emit",
    "commit",
    "fetch",
    "rollback",
    "truncate",
    "txn",
    "abort",
    "put",
    "crash",
)
_STRS: Final = ("partition", "record_id", "key", "sink", "detail")
_COMPLETE: Final = EndDetail.COMPLETE.value


class HistoryBuilder:
    """Writes a history event by event (over :data:`PARTITIONS`); records get the next
    offset of their partition unless told otherwise, outputs the next output id."""

    def __init__(self, sinks: dict[str, SinkSpec]) -> None:
        self.sinks = sinks
        self.events: list[Event] = []
        self.records: dict[str, Event] = {}
        self.outputs: dict[int, Event] = {}
        self.next_offset: dict[str, int] = {}

    def add(self, kind: EventKind, **fields: Any) -> None:
        self.events.append(Event(index=len(self.events), kind=kind, **fields))

    def append(
        self, record_id: str, partition: str, *, offset: int | None = None, **fields: Any
    ) -> None:
        offset = self.next_offset.get(partition, 0) if offset is None else offset
        self.next_offset[partition] = offset + 1
        self.add(_K.APPEND, partition=partition, offset=offset, record_id=record_id, **fields)
        self.records[record_id] = self.events[-1]

    def at(self, kind: EventKind, record_id: str, **fields: Any) -> None:
        record = self.records[record_id]
        self.add(
            kind, partition=record.partition, offset=record.offset, record_id=record_id, **fields
        )

    def emit(self, record_id: str | None, **fields: Any) -> None:
        output_id = len(self.outputs)
        self.add(_K.EMIT, record_id=record_id, output_id=output_id, **fields)
        self.outputs[output_id] = self.events[-1]

    def observe(self, output_id: int, sink: str) -> None:
        emit = self.outputs[output_id]
        self.add(
            _K.OBSERVE, sink=sink, output_id=output_id, record_id=emit.record_id, part=emit.part
        )

    def history(self) -> History:
        meta = HistoryMeta(partitions=PARTITIONS, sinks=dict(self.sinks))
        return History(meta=meta, events=tuple(self.events))


def _sinks(draw: st.DrawFn, entity: bool = False) -> dict[str, SinkSpec]:
    sinks = {
        "out": SinkSpec(SinkKind.LOG, ordered=draw(st.booleans())),
        "mirror": SinkSpec(SinkKind.LOG, ordered=draw(st.booleans())),
        "counts": SinkSpec(SinkKind.TABLE, aggregate=Aggregate.COUNT),
        "sums": SinkSpec(SinkKind.TABLE, aggregate=Aggregate.SUM),
        "plain": SinkSpec(SinkKind.TABLE),
    }
    if draw(st.integers(0, 5)) == 0:
        sinks = {name: spec for name, spec in sinks.items() if spec.kind is SinkKind.TABLE}
    if entity:
        sinks["rows"] = SinkSpec(SinkKind.ENTITY)
    return sinks


class _Drawn:
    """The state of one drawn run: what was appended, acknowledged, begun."""

    def __init__(self, draw: st.DrawFn, b: HistoryBuilder) -> None:
        self.draw, self.b = draw, b
        self.logs = [n for n, s in b.sinks.items() if s.kind is SinkKind.LOG] or ["out"]
        self.appended: list[str] = []
        self.acked: dict[str, int] = {}
        self.held: set[tuple[str, int]] = set()
        self.txns: list[int] = []
        # a quarter of the runs have a log that breaks its contract (retries, unanswered
        # sends, records read off their place): the Spark checker judges those on the
        # driver, the others by its own passes
        self.faulty_log = draw(st.integers(0, 3)) == 0

    def step(self, step: str, process: int, partition: str) -> None:
        draw, b = self.draw, self.b
        if step == "append" and self.faulty_log and self.appended and draw(st.integers(0, 7)) == 0:
            self.append_again()
        elif step == "append":
            top = self.acked.get(partition, -1)
            jump = draw(st.integers(0, 4)) == 0  # take an unacknowledged position, or jump
            b.append(
                f"r{len(self.appended)}",
                partition,
                offset=draw(st.integers(top + 1, top + 4)) if jump else None,
                key=draw(st.sampled_from(KEYS)),
                value=draw(st.integers(0, 3)),
                detail=draw(st.sampled_from([None, None, None, AppendDetail.POISON.value])),
            )
            self.appended.append(f"r{len(self.appended)}")
        elif step in ("ack", "read") and self.appended:
            self.record(step, process)
        elif step == "emit" and "rows" in b.sinks and draw(st.booleans()):
            self.entity_emit(process)
        elif step == "emit":
            parts = draw(st.integers(1, 3))
            b.emit(
                draw(st.sampled_from([None, *self.appended, *self.appended, "ghost"])),
                part=draw(st.integers(0, parts - 1)),
                parts=parts,
                sink=draw(st.sampled_from(self.logs if b.sinks.get(self.logs[0]) else ["counts"])),
                txn=draw(st.sampled_from([None, None, *self.txns])),
                process=process,
            )
        else:
            self.bookkeeping(step, process, partition)

    def append_again(self) -> None:
        """A producer's retry that wrote a record again (a log duplicate), a second record
        at an offset already acknowledged (inconsistent offsets), or a new record
        acknowledged below the partition's highest acknowledged offset (a nonmonotonic
        send)."""
        draw, b = self.draw, self.b
        how = draw(st.integers(0, 2))
        if how == 2:
            self.send_below(draw(st.sampled_from(PARTITIONS)))
            return
        if len(self.held) > 0 and how == 1:
            partition, offset = draw(st.sampled_from(sorted(self.held)))
            record_id = f"r{len(self.appended)}"
            b.append(record_id, partition, offset=offset, key=KEYS[0], value=1)
            self.appended.append(record_id)
            return
        first = b.records[draw(st.sampled_from(self.appended))]
        assert first.partition is not None and first.record_id is not None
        b.append(
            first.record_id,
            first.partition,
            key=first.key,
            value=first.value,
            detail=AppendDetail.RETRIED.value,
        )

    def send_below(self, partition: str) -> None:
        """Two sends, each acknowledged before the next: the log put the second below the
        first (a nonmonotonic send). The next appends go on after the first."""
        draw, b = self.draw, self.b
        high = max(b.next_offset.get(partition, 0), self.acked.get(partition, -1) + 1, 1)
        for offset in (high, draw(st.integers(0, high - 1))):
            record_id = f"r{len(self.appended)}"
            b.append(record_id, partition, offset=offset, key=draw(st.sampled_from(KEYS)), value=1)
            self.appended.append(record_id)
            self.acknowledge(record_id)
        b.next_offset[partition] = high + 1

    def entity_emit(self, process: int) -> None:
        """A row of the entity table ``rows``: mostly under its record's key."""
        draw, b = self.draw, self.b
        acked = sorted({e.record_id for e in b.events if e.kind is _K.ACK and e.record_id})
        record_id = draw(st.sampled_from([None, "ghost", *self.appended, *acked, *acked, *acked]))
        own = b.records[record_id].key if record_id in b.records else None
        key = own if own and draw(st.integers(0, 4)) else draw(st.sampled_from(KEYS))
        b.emit(record_id, part=0, parts=1, sink="rows", key=key, process=process)

    def entity_rows(self) -> None:
        """The entity table's final rows: per key, one of the rows written under it (the
        last, or an older one: a stale overwrite), or none."""
        draw, b = self.draw, self.b
        for key in KEYS:
            written = [o for o, e in sorted(b.outputs.items()) if e.sink == "rows" and e.key == key]
            if not written or draw(st.integers(0, 5)) == 0:
                continue
            output_id = written[-1] if draw(st.booleans()) else draw(st.sampled_from(written))
            emit = b.outputs[output_id]
            b.add(
                _K.OBSERVE,
                sink="rows",
                output_id=output_id,
                record_id=emit.record_id,
                part=0,
                key=key,
            )

    def acknowledge(self, record_id: str) -> None:
        record = self.b.records[record_id]
        assert record.partition is not None and record.offset is not None
        self.b.at(_K.ACK, record_id)
        top = self.acked.get(record.partition, -1)
        self.acked[record.partition] = max(top, record.offset)
        self.held.add((record.partition, record.offset))

    def record(self, step: str, process: int) -> None:
        record_id = self.draw(st.sampled_from(self.appended))
        record = self.b.records[record_id]
        assert record.partition is not None and record.offset is not None
        if step == "ack" and self.faulty_log and self.draw(st.integers(0, 3)) == 0:
            self.b.at(_K.INDETERMINATE, record_id)  # its send's answer never came
        elif step == "ack":
            self.acknowledge(record_id)
        else:
            redelivered = ReadDetail.REDELIVERED.value
            detail = self.draw(st.sampled_from([None, None, redelivered]))
            # now and then the reader finds the record elsewhere: a second copy in the log,
            # or a second record at an offset
            moved = self.draw(st.sampled_from([0] * 6 + [1, 2])) if self.faulty_log else 0
            self.b.add(
                _K.READ,
                partition=record.partition,
                offset=record.offset + moved,
                record_id=record_id,
                process=process,
                detail=detail,
            )

    def bookkeeping(self, step: str, process: int, partition: str) -> None:
        draw, b = self.draw, self.b
        offsets = st.integers(0, 6)
        if step == "commit":
            b.add(_K.COMMIT, process=process, partition=partition, offset=draw(offsets))
        elif step == "fetch":
            offset = draw(st.none() | offsets)
            if offset is None:  # a rebalance took the partition away and gave it back
                for change in (RebalanceDetail.REVOKED, RebalanceDetail.ASSIGNED):
                    b.add(_K.REBALANCE, process=process, partition=partition, detail=change.value)
            b.add(_K.FETCH, process=process, partition=partition, offset=offset)
        elif step == "rollback":
            b.add(_K.ROLLBACK, partition=partition, offset=draw(st.none() | offsets))
        elif step == "truncate":
            b.add(_K.TRUNCATE, partition=partition, offset=draw(offsets))
        elif step == "txn":
            self.txns.append(len(self.txns))
            b.add(_K.TXN_BEGIN, process=process, txn=self.txns[-1])
        elif step == "abort" and self.txns:
            b.add(_K.TXN_ABORT, process=process, txn=draw(st.sampled_from(self.txns)))
        elif step == "put":
            key = draw(st.sampled_from(KEYS))
            b.add(_K.PUT, process=process, sink="counts", key=key, value=1)
        elif step == "crash":
            b.add(_K.CRASH, process=process, detail="process")

    def observes(self) -> None:
        draw, b, logs = self.draw, self.b, self.logs
        if b.outputs and any(spec.kind is SinkKind.LOG for spec in b.sinks.values()):
            shown = draw(st.lists(st.sampled_from(sorted(b.outputs)), max_size=20))
            if draw(st.integers(0, 3)) == 0:  # newest first: out of order in an ordered sink
                shown = sorted(b.outputs, reverse=True)[:20]
            for output_id in shown:
                b.observe(output_id, draw(st.sampled_from(logs)))
            if draw(st.integers(0, 5)) == 0:
                b.add(_K.OBSERVE, sink=logs[0], output_id=99, record_id=None, part=0)
            if self.appended and draw(st.integers(0, 5)) == 0:  # a part no emit declared
                record_id = draw(st.sampled_from(self.appended))
                b.add(_K.OBSERVE, sink=logs[0], output_id=98, record_id=record_id, part=3)
        if "rows" in b.sinks:
            self.entity_rows()
        for _ in range(draw(st.integers(0, 4))):
            b.add(
                _K.OBSERVE,
                sink=draw(st.sampled_from(("counts", "sums", "plain"))),
                key=draw(st.sampled_from(KEYS)),
                value=draw(st.integers(0, 4)),
            )


@st.composite
def histories(draw: st.DrawFn, *, entity: bool = False) -> History:
    """Well-formed histories of random events (see the module docstring); with ``entity``
    they also have an entity table ``rows`` whose final rows may be stale, missing, or
    under another key than their record's."""
    b = HistoryBuilder(_sinks(draw, entity))
    run = _Drawn(draw, b)
    for _ in range(draw(st.integers(0, 40))):
        step = draw(st.sampled_from(_STEPS))
        run.step(step, draw(st.sampled_from((1, 2, 3))), draw(st.sampled_from(PARTITIONS)))
    if draw(st.integers(0, 4)) > 0:
        b.add(_K.DRAIN)
    run.observes()
    end = draw(st.sampled_from([_COMPLETE, _COMPLETE, "incomplete: budget"]))
    b.add(_K.END, detail=end)
    return b.history()


def _broken(draw: st.DrawFn, events: list[Event]) -> None:
    """One way a stored history can be wrong, applied to ``events`` in place."""
    how = draw(
        st.sampled_from(["field", "field", "field", "kind", "drop", "dup", "swap", "end", "drain"])
    )
    position = draw(st.integers(0, len(events) - 1))
    event = events[position]
    if how == "field":
        name = draw(st.sampled_from(INT_FIELDS + _STRS))
        value: object
        if name in INT_FIELDS:
            value = draw(st.none() | st.integers(-2, 7))
        else:
            names = ["p", "q", "x", "r0", "r1", "out", "counts", "k1", _COMPLETE]
            value = draw(st.none() | st.sampled_from(names))
        changed: dict[str, Any] = {name: value}
        events[position] = dataclasses.replace(event, **changed)
    elif how == "kind":
        events[position] = dataclasses.replace(event, kind=draw(st.sampled_from(EventKind)))
    elif how == "drop" and len(events) > 1:
        del events[position]
    elif how == "dup":
        events.insert(position, event)
    elif how == "swap" and len(events) > 1:
        other = draw(st.integers(0, len(events) - 1))
        events[position], events[other] = events[other], events[position]
    elif how == "end":
        events.insert(position, Event(index=0, kind=_K.END, detail=_COMPLETE))
    elif how == "drain":
        events.insert(position, Event(index=0, kind=_K.DRAIN))


@st.composite
def malformed_histories(draw: st.DrawFn) -> History:
    """A well-formed history broken in ways a Parquet file can hold (values keep their
    types): a field nulled or changed, the kind changed, events dropped, repeated or
    swapped, an end or a drain added; renumbered or not."""
    history = draw(histories())
    events = list(history.events)
    for _ in range(draw(st.integers(1, 3))):
        _broken(draw, events)
    if draw(st.booleans()):
        events = [dataclasses.replace(e, index=i) for i, e in enumerate(events)]
    return History(meta=history.meta, events=tuple(events))


def empty_history() -> History:
    """A history with no events (UNKNOWN for every checker)."""
    return History(meta=HistoryMeta(partitions=PARTITIONS, sinks={}), events=())
