"""The local checker: one tiny hand-written history per anomaly, its repaired twin, malformed
histories, the verdict values, and properties over random (and garbage) histories."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import harness.check
from harness.check import (
    MAX_PROBLEMS,
    MAX_WITNESSES,
    Anomaly,
    AnomalyKind,
    Guarantee,
    Status,
    Verdict,
    Witness,
    check,
    validate,
)
from harness.check.local import NO_DRAIN_REASON
from harness.errors import ConfigError
from harness.faults import Produce, Run, Schedule
from harness.history import (
    EVENT_FIELDS,
    Aggregate,
    Event,
    EventKind,
    History,
    HistoryMeta,
    SinkKind,
    SinkSpec,
)
from harness.sim import Context, Topology, simulate
from harness.strategies.histories import histories

K = EventKind
ALO = Guarantee.AT_LEAST_ONCE
EO = Guarantee.EXACTLY_ONCE
BOTH = (ALO, EO)
LOG = SinkSpec(SinkKind.LOG)
ORDERED = SinkSpec(SinkKind.LOG, ordered=True)
COUNTS = SinkSpec(SinkKind.TABLE, aggregate=Aggregate.COUNT)
SUMS = SinkSpec(SinkKind.TABLE, aggregate=Aggregate.SUM)


class Builder:
    """Writes a history event by event; each method returns the new event's index (``emit``
    returns the output id). Records get the next offset of their partition."""

    def __init__(
        self,
        *,
        partitions: tuple[str, ...] = ("p",),
        sinks: dict[str, SinkSpec] | None = None,
    ) -> None:
        self.partitions = partitions
        self.sinks = {"out": LOG} if sinks is None else sinks
        self.events: list[Event] = []
        self.records: dict[str, Event] = {}
        self.outputs: dict[int, Event] = {}
        self.next_offset: dict[str, int] = {}

    @property
    def last(self) -> int:
        return len(self.events) - 1

    def add(self, kind: EventKind, **fields: Any) -> int:
        self.events.append(Event(index=len(self.events), kind=kind, **fields))
        return self.last

    def append(
        self,
        record_id: str,
        *,
        partition: str = "p",
        key: str = "k",
        value: int = 1,
        detail: str | None = None,
    ) -> int:
        offset = self.next_offset.get(partition, 0)
        self.next_offset[partition] = offset + 1
        index = self.add(
            K.APPEND,
            partition=partition,
            offset=offset,
            record_id=record_id,
            key=key,
            value=value,
            detail=detail,
        )
        self.records[record_id] = self.events[index]
        return index

    def ack(self, record_id: str) -> int:
        record = self.records[record_id]
        return self.add(
            K.ACK, partition=record.partition, offset=record.offset, record_id=record_id
        )

    def ingest(self, *record_ids: str, partition: str = "p", key: str = "k") -> None:
        """Append and acknowledge each record."""
        for record_id in record_ids:
            self.append(record_id, partition=partition, key=key)
            self.ack(record_id)

    def read(self, record_id: str, *, process: int = 1, detail: str | None = None) -> int:
        record = self.records[record_id]
        return self.add(
            K.READ,
            process=process,
            partition=record.partition,
            offset=record.offset,
            record_id=record_id,
            detail=detail,
        )

    def emit(
        self,
        record_id: str | None,
        *,
        part: int = 0,
        parts: int = 1,
        sink: str = "out",
        txn: int | None = None,
        process: int = 1,
    ) -> int:
        output_id = len(self.outputs)
        index = self.add(
            K.EMIT,
            process=process,
            record_id=record_id,
            part=part,
            parts=parts,
            sink=sink,
            output_id=output_id,
            txn=txn,
        )
        self.outputs[output_id] = self.events[index]
        return output_id

    def process(self, *record_ids: str, process: int = 1) -> list[int]:
        """Read and emit each record; return the output ids."""
        outputs = []
        for record_id in record_ids:
            self.read(record_id, process=process)
            outputs.append(self.emit(record_id, process=process))
        return outputs

    def observe(self, output_id: int, *, sink: str = "out") -> int:
        emit = self.outputs[output_id]
        return self.add(
            K.OBSERVE, sink=sink, output_id=output_id, record_id=emit.record_id, part=emit.part
        )

    def observe_raw(self, record_id: str | None, *, output_id: int = 99, part: int = 0) -> int:
        return self.add(K.OBSERVE, sink="out", output_id=output_id, record_id=record_id, part=part)

    def observe_key(self, key: str, value: int, *, sink: str = "counts") -> int:
        return self.add(K.OBSERVE, sink=sink, key=key, value=value)

    def commit(self, offset: int, *, partition: str = "p", process: int = 1) -> int:
        return self.add(K.COMMIT, process=process, partition=partition, offset=offset)

    def fetch(self, offset: int | None, *, partition: str = "p", process: int = 1) -> int:
        return self.add(K.FETCH, process=process, partition=partition, offset=offset)

    def drain(self) -> int:
        return self.add(K.DRAIN)

    def end(self, detail: str = "complete") -> int:
        return self.add(K.END, detail=detail)

    def history(self) -> History:
        meta = HistoryMeta(partitions=self.partitions, sinks=dict(self.sinks))
        return History(meta=meta, events=tuple(self.events))

    def finish(self, *observe: int) -> History:
        """Drain, observe these outputs, end complete."""
        self.drain()
        for output_id in observe:
            self.observe(output_id)
        self.end()
        return self.history()


def only(verdict: Verdict) -> Anomaly:
    """The single failing anomaly of an INVALID verdict with nothing tolerated."""
    assert verdict.status is Status.INVALID, verdict.summary()
    assert len(verdict.anomalies) == 1, verdict.summary()
    assert verdict.tolerated == ()
    assert verdict.reasons == ()
    return verdict.anomalies[0]


def assert_valid(history: History, *guarantees: Guarantee) -> None:
    for guarantee in guarantees or BOTH:
        verdict = check(history, guarantee)
        assert verdict.status is Status.VALID, verdict.summary()
        assert (verdict.anomalies, verdict.tolerated, verdict.reasons) == ((), (), ())


def simple(*record_ids: str) -> tuple[Builder, list[int]]:
    """Ingest and process the records on partition ``p``; return the builder and outputs."""
    builder = Builder()
    builder.ingest(*record_ids)
    return builder, builder.process(*record_ids)


# --------------------------------------------------------------------------------------------
# Correct histories


def test_a_correct_history_is_valid_under_both_guarantees() -> None:
    b = Builder(
        partitions=("p", "q"),
        sinks={"out": ORDERED, "counts": COUNTS, "sums": SUMS},
    )
    b.append("a1", key="k1", value=2)
    b.ack("a1")
    b.append("b1", partition="q", key="k1", value=5)
    b.ack("b1")
    b.append("a2", key="k2", value=3)
    b.ack("a2")
    b.append("x", key="k2", value=100, detail="poison")
    b.ack("x")
    b.fetch(None)
    b.fetch(None, partition="q")
    outputs = b.process("a1", "b1", "a2")
    b.read("x")
    b.commit(3)
    b.commit(1, partition="q")
    b.drain()
    for output_id in (outputs[1], outputs[0], outputs[2]):
        b.observe(output_id)
    b.observe_key("k1", 2)
    b.observe_key("k2", 1)
    b.observe_key("k1", 7, sink="sums")
    b.observe_key("k2", 3, sink="sums")
    b.end()
    history = b.history()
    assert validate(history) == []
    assert_valid(history)
    assert dict(check(history, EO).stats) == {
        "acknowledged": 4,
        "appended": 4,
        "duplicates": 0,
        "events": len(history),
        "expected_effects": 3,  # the poison record has no expected effect
        "lost": 0,
        "observed_outputs": 3,
    }


def test_an_empty_run_with_drain_is_valid() -> None:
    b = Builder()
    assert_valid(b.finish())


# --------------------------------------------------------------------------------------------
# lost


def test_lost_an_acknowledged_record_never_observed() -> None:
    b = Builder()
    b.ingest("r1")
    ack = b.append("r2") + 1
    assert b.ack("r2") == ack
    out1 = b.emit("r1")
    read = b.read("r2")
    history = b.finish(out1)
    for guarantee in BOTH:
        assert only(check(history, guarantee)) == Anomaly(
            AnomalyKind.LOST,
            1,
            (
                Witness(
                    ("r2",),
                    (ack, read),
                    "record 'r2' part 0 was acknowledged at event 3 but no log sink shows it",
                ),
            ),
        )
        assert check(history, guarantee).stats["lost"] == 1

    b, outputs = simple("r1", "r2")
    assert_valid(b.finish(*outputs))


def test_lost_a_declared_part_and_the_witness_names_the_last_read_and_emit() -> None:
    b = Builder()
    b.ingest("r1")
    b.read("r1")
    first = b.emit("r1", part=0, parts=2)
    read = b.read("r1", detail="redelivered")
    b.emit("r1", part=0, parts=2)
    emit = b.last
    history = b.finish(first)
    assert only(check(history, EO)) == Anomaly(
        AnomalyKind.LOST,
        1,
        (
            Witness(
                ("r1",),
                (1, read, emit),
                "record 'r1' part 1 was acknowledged at event 1 but no log sink shows it",
            ),
        ),
    )
    assert check(history, EO).stats["expected_effects"] == 2


def test_lost_counts_every_missing_part_and_an_emitted_part_is_expected() -> None:
    b = Builder()
    b.ingest("r1")
    b.read("r1")
    out = b.emit("r1", part=2, parts=3)
    history = b.finish(out)
    lost = only(check(history, ALO))
    assert (lost.kind, lost.count) == (AnomalyKind.LOST, 2)
    assert [w.detail.split(" was ")[0] for w in lost.witnesses] == [
        "record 'r1' part 0",
        "record 'r1' part 1",
    ]


def test_a_poison_record_is_exempt_from_lost() -> None:
    b = Builder()
    b.append("r1", detail="poison")
    b.ack("r1")
    b.read("r1")
    assert_valid(b.finish())

    b = Builder()
    b.ingest("r1")
    b.read("r1")
    assert only(check(b.finish(), EO)).kind is AnomalyKind.LOST


def test_an_output_of_a_poison_record_is_unexpected_under_both_guarantees() -> None:
    b = Builder()
    b.append("r1", detail="poison")
    b.ack("r1")
    (output,) = b.process("r1")
    b.commit(1)
    history = b.finish(output, output)
    for guarantee in BOTH:
        verdict = check(history, guarantee)
        anomaly = only(verdict)
        assert anomaly.kind is AnomalyKind.UNEXPECTED and anomaly.count == 2
        assert anomaly.witnesses[0] == Witness(
            ("r1",),
            (0, 6),
            "output 0 in sink 'out' derives from poison record 'r1' (appended at event 0), "
            "which must have no effect",
        )
        assert verdict.stats["expected_effects"] == 0 and verdict.stats["duplicates"] == 0


def test_an_output_of_a_part_its_record_never_declared_is_unexpected() -> None:
    b, outputs = simple("r1")
    b.drain()
    b.observe(outputs[0])
    b.observe_raw("r1", part=2)
    b.end()
    for guarantee in BOTH:
        anomaly = only(check(b.history(), guarantee))
        assert anomaly.kind is AnomalyKind.UNEXPECTED and anomaly.count == 1
        assert anomaly.witnesses[0].detail == (
            "output 99 in sink 'out' is part 2 of record 'r1', but its emits declare only part 0"
        )


def _emits_everything(ctx: Context) -> None:
    out = ctx.output("out")
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):
        out.emit(record)  # the bug: a poison record is forwarded raw
        out.commit()
        ctx.offsets.put("in-0", record.next)


def _skips_poison(ctx: Context) -> None:
    out = ctx.output("out")
    for record in ctx.read("in-0", ctx.offsets.get("in-0")):
        if not record.poison:
            out.emit(record)
            out.commit()
        ctx.offsets.put("in-0", record.next)


def test_a_processor_forwarding_poison_records_is_caught_and_one_skipping_them_passes() -> None:
    schedule = Schedule((Produce(count=6), Run(calls=40)), drain=True)
    topology = Topology(poison_every=3)
    broken = simulate(_emits_everything, schedule, topology=topology)
    for guarantee in BOTH:
        anomaly = only(check(broken, guarantee))
        assert anomaly.kind is AnomalyKind.UNEXPECTED and anomaly.count == 2
        assert all("poison record" in w.detail for w in anomaly.witnesses)
    assert_valid(simulate(_skips_poison, schedule, topology=topology))


def test_lost_witnesses_are_capped_at_the_earliest_acks_and_the_count_is_exact() -> None:
    b = Builder()
    names = [f"r{i:03}" for i in range(100)]
    for name in names:
        b.append(name)
    for name in reversed(names):  # the last appended is acknowledged first
        b.ack(name)
    history = b.finish()
    lost = only(check(history, EO))
    assert lost.count == 100
    assert len(lost.witnesses) == MAX_WITNESSES
    assert [w.record_ids for w in lost.witnesses] == [
        ("r099",),
        ("r098",),
        ("r097",),
        ("r096",),
        ("r095",),
    ]
    assert [w.events for w in lost.witnesses] == [(100,), (101,), (102,), (103,), (104,)]
    assert check(history, EO) == check(history, EO)
    assert check(history, EO).to_json() == check(dataclasses.replace(history), EO).to_json()


# --------------------------------------------------------------------------------------------
# duplicate


def test_duplicate_fails_exactly_once_and_is_tolerated_at_least_once() -> None:
    b, (first,) = simple("r1")
    b.read("r1", detail="redelivered")
    second = b.emit("r1")
    history = b.finish(first, second)
    expected = Anomaly(
        AnomalyKind.DUPLICATE,
        1,
        (
            Witness(
                ("r1",),
                (3, 5, 7, 8),
                "record 'r1' part 0 was observed 2 times (outputs 0, 1)",
            ),
        ),
    )
    assert only(check(history, EO)) == expected
    at_least_once = check(history, ALO)
    assert at_least_once.status is Status.VALID
    assert at_least_once.anomalies == ()
    assert at_least_once.tolerated == (expected,)
    assert at_least_once.stats["duplicates"] == 1

    b, outputs = simple("r1")
    assert_valid(b.finish(*outputs))


def test_duplicate_counts_extra_copies_across_log_sinks() -> None:
    b = Builder(sinks={"out": LOG, "mirror": LOG})
    b.ingest("r1", "r2")
    out1, out2 = b.process("r1", "r2")
    b.drain()
    b.observe(out1)
    b.observe(out1)
    b.observe(out1, sink="mirror")
    b.observe(out2)
    b.observe(out2, sink="mirror")
    b.end()
    duplicate = only(check(b.history(), EO))
    assert (duplicate.kind, duplicate.count) == (AnomalyKind.DUPLICATE, 3)
    assert duplicate.witnesses == (
        Witness(
            ("r1",), (5, 9, 10, 11), "record 'r1' part 0 was observed 3 times (outputs 0, 0, 0)"
        ),
        Witness(("r2",), (7, 12, 13), "record 'r2' part 0 was observed 2 times (outputs 1, 1)"),
    )


# --------------------------------------------------------------------------------------------
# unexpected


def test_unexpected_outputs_without_an_acknowledged_record() -> None:
    b, outputs = simple("r1")
    appended = b.append("r2")
    b.read("r2")
    out2 = b.emit("r2")
    null_output = b.emit(None)
    b.drain()
    for output_id in (*outputs, out2, null_output):
        b.observe(output_id)
    b.observe_raw("ghost", output_id=7)
    b.end()
    history = b.history()
    for guarantee in BOTH:
        assert only(check(history, guarantee)) == Anomaly(
            AnomalyKind.UNEXPECTED,
            3,
            (
                Witness(
                    ("r2",),
                    (appended, 10),
                    "output 1 in sink 'out' derives from record 'r2', appended at event 4 "
                    "but never acknowledged",
                ),
                Witness((), (11,), "output 2 in sink 'out' has no input record"),
                Witness(
                    ("ghost",),
                    (12,),
                    "output 7 in sink 'out' derives from record 'ghost', which was never appended",
                ),
            ),
        )


# --------------------------------------------------------------------------------------------
# aborted-read


def test_aborted_read_an_output_of_an_aborted_transaction_is_visible() -> None:
    def history(observe_aborted: bool) -> History:
        b = Builder()
        b.ingest("r1")
        b.read("r1")
        b.add(K.TXN_BEGIN, process=1, txn=7)
        aborted = b.emit("r1", txn=7)
        b.add(K.TXN_ABORT, process=1, txn=7)
        b.add(K.TXN_BEGIN, process=1, txn=8)
        committed = b.emit("r1", txn=8)
        b.add(K.TXN_COMMIT, process=1, txn=8)
        return b.finish(aborted if observe_aborted else committed)

    for guarantee in BOTH:
        assert only(check(history(True), guarantee)) == Anomaly(
            AnomalyKind.ABORTED_READ,
            1,
            (
                Witness(
                    ("r1",),
                    (4, 5, 10),
                    "output 0 in sink 'out' was emitted at event 4 in transaction 7, which "
                    "aborted at event 5",
                ),
            ),
        )
    assert_valid(history(False))


# --------------------------------------------------------------------------------------------
# count-mismatch


def counted(observed: dict[str, int], *, sink: SinkSpec = COUNTS) -> History:
    """r1, r2 (key k1, values 1 and 2) and r3 (key k2, value 4) acknowledged; no log sink."""
    b = Builder(sinks={"counts": sink})
    for record_id, key, value in (("r1", "k1", 1), ("r2", "k1", 2), ("r3", "k2", 4)):
        b.append(record_id, key=key, value=value)
        b.ack(record_id)
    b.drain()
    for key, value in observed.items():
        b.observe_key(key, value)
    b.end()
    return b.history()


def test_count_mismatch_an_overcount_fails_exactly_once_only() -> None:
    history = counted({"k1": 3, "k2": 1})
    expected = Anomaly(
        AnomalyKind.COUNT_MISMATCH,
        1,
        (Witness(("r1", "r2"), (7,), "sink counts key k1: expected 2, observed 3"),),
    )
    assert only(check(history, EO)) == expected
    at_least_once = check(history, ALO)
    assert at_least_once.status is Status.VALID
    assert at_least_once.tolerated == (expected,)
    assert_valid(counted({"k1": 2, "k2": 1}))


def test_count_mismatch_an_undercount_or_a_missing_key_fails_both() -> None:
    history = counted({"k1": 1})
    for guarantee in BOTH:
        assert only(check(history, guarantee)) == Anomaly(
            AnomalyKind.COUNT_MISMATCH,
            2,
            (
                Witness(("r3",), (), "sink counts key k2: expected 1, observed 0 (key absent)"),
                Witness(("r1", "r2"), (7,), "sink counts key k1: expected 2, observed 1"),
            ),
        )


def test_count_mismatch_splits_failing_and_tolerated_keys_under_at_least_once() -> None:
    verdict = check(counted({"k1": 1, "k2": 2, "k9": 1}), ALO)
    assert verdict.status is Status.INVALID
    assert verdict.anomalies == (
        Anomaly(
            AnomalyKind.COUNT_MISMATCH,
            1,
            (Witness(("r1", "r2"), (7,), "sink counts key k1: expected 2, observed 1"),),
        ),
    )
    assert verdict.tolerated == (
        Anomaly(
            AnomalyKind.COUNT_MISMATCH,
            2,
            (
                Witness(("r3",), (8,), "sink counts key k2: expected 1, observed 2"),
                Witness((), (9,), "sink counts key k9: expected 0, observed 1"),
            ),
        ),
    )


def test_count_mismatch_sums_values_and_the_last_observation_wins() -> None:
    assert_valid(counted({"k1": 3, "k2": 4}, sink=SUMS))
    b = Builder(sinks={"counts": SUMS})
    b.append("r1", key="k1", value=5)
    b.ack("r1")
    b.drain()
    b.observe_key("k1", 5)
    b.observe_key("k1", 10)
    b.end()
    assert only(check(b.history(), EO)).witnesses == (
        Witness(("r1",), (4,), "sink counts key k1: expected 5, observed 10"),
    )


def test_count_mismatch_ignores_poison_records_and_unaggregated_tables() -> None:
    b = Builder(sinks={"counts": COUNTS, "free": SinkSpec(SinkKind.TABLE)})
    b.ingest("r1")
    b.append("x", detail="poison")
    b.ack("x")
    b.drain()
    b.observe_key("k", 1)
    b.observe_key("k", 42, sink="free")
    b.end()
    assert_valid(b.history())


def test_without_a_log_sink_lost_duplicate_and_unexpected_are_not_assessed() -> None:
    b = Builder(sinks={"counts": COUNTS})
    b.ingest("r1")
    b.append("r2")
    b.read("r1")
    b.add(K.PUT, process=1, sink="counts", key="k", value=1)
    b.drain()
    b.observe_key("k", 1)
    b.end()
    verdict = check(b.history(), EO)
    assert verdict.status is Status.VALID
    assert verdict.stats["expected_effects"] == 0


# --------------------------------------------------------------------------------------------
# nonmonotonic


def ordered_history(spec: SinkSpec, order: tuple[str, ...]) -> History:
    b = Builder(partitions=("p", "q"), sinks={"out": spec})
    b.ingest("p1", "p2", "p3")
    b.ingest("q1", partition="q")
    outputs = dict(zip(("p1", "p2", "p3", "q1"), b.process("p1", "p2", "p3", "q1"), strict=True))
    b.drain()
    for record_id in order:
        b.observe(outputs[record_id])
    b.end()
    return b.history()


def test_nonmonotonic_an_ordered_sink_shows_a_partition_out_of_order() -> None:
    history = ordered_history(ORDERED, ("q1", "p2", "p1", "p3"))
    for guarantee in BOTH:
        assert only(check(history, guarantee)) == Anomaly(
            AnomalyKind.NONMONOTONIC,
            1,
            (
                Witness(
                    ("p2", "p1"),
                    (18, 19),
                    "sink 'out' shows record 'p1' (offset 0 of partition 'p') after record "
                    "'p2' (offset 1)",
                ),
            ),
        )
    assert_valid(ordered_history(ORDERED, ("p1", "q1", "p2", "p3")))
    assert_valid(ordered_history(LOG, ("q1", "p2", "p1", "p3")))


def test_nonmonotonic_counts_each_adjacent_inversion_of_first_occurrences() -> None:
    history = ordered_history(ORDERED, ("p3", "p2", "p1", "q1"))
    nonmonotonic = only(check(history, EO))
    assert (nonmonotonic.kind, nonmonotonic.count) == (AnomalyKind.NONMONOTONIC, 2)
    assert [w.record_ids for w in nonmonotonic.witnesses] == [("p3", "p2"), ("p2", "p1")]
    # a later copy of an effect already seen is a duplicate, not an inversion
    verdict = check(ordered_history(ORDERED, ("p1", "p2", "p1", "p3", "q1")), ALO)
    assert verdict.status is Status.VALID
    assert [a.kind for a in verdict.tolerated] == [AnomalyKind.DUPLICATE]


# --------------------------------------------------------------------------------------------
# skip


def test_skip_consecutive_reads_jump_over_a_record() -> None:
    b = Builder()
    b.ingest("r1", "r2", "r3")
    first = b.read("r1")
    out1 = b.emit("r1")
    jump = b.read("r3")
    out3 = b.emit("r3")
    (out2,) = b.process("r2", process=2)
    history = b.finish(out1, out2, out3)
    for guarantee in BOTH:
        assert only(check(history, guarantee)) == Anomaly(
            AnomalyKind.SKIP,
            1,
            (
                Witness(
                    ("r2",),
                    (first, jump),
                    "process 1 read offset 2 of partition 'p' after a read of offset 0 "
                    "(event 6): offsets 1 to 1 skipped (1 acknowledged records)",
                ),
            ),
        )

    b = Builder()
    b.ingest("r1", "r2", "r3")
    outputs = b.process("r1", "r2")
    b.read("r1", detail="redelivered")  # redeliveries are ignored by the skip check
    outputs += b.process("r3")
    assert_valid(b.finish(*outputs))


def test_skip_the_first_read_after_a_fetch_is_compared_with_the_fetched_offset() -> None:
    def history(fetched: int) -> tuple[History, int, int]:
        b = Builder()
        b.ingest("r1", "r2", "r3")
        outputs = b.process("r1", process=2)
        b.commit(1, process=2)
        fetch = b.fetch(fetched)
        read = b.read("r3")
        outputs.append(b.emit("r3"))
        outputs += b.process("r2", process=2)  # r2 is done, but only after the jump
        return b.finish(*outputs), fetch, read

    jumped, fetch, read = history(1)
    for guarantee in BOTH:
        assert only(check(jumped, guarantee)) == Anomaly(
            AnomalyKind.SKIP,
            1,
            (
                Witness(
                    ("r2",),
                    (fetch, read),
                    "process 1 read offset 2 of partition 'p' after a fetch of offset 1 "
                    f"(event {fetch}): offsets 1 to 1 skipped (1 acknowledged records)",
                ),
            ),
        )
    assert_valid(history(2)[0])

    # after a fetch, the read is compared with the fetched offset, not with the last read
    b = Builder()
    b.ingest("r1", "r2", "r3")
    outputs = b.process("r1")
    outputs += b.process("r2", process=2)
    b.fetch(2)
    outputs += b.process("r3")
    assert_valid(b.finish(*outputs))


def test_skip_a_resume_past_the_fetched_offset_behind_the_reading_frontier_is_no_skip() -> None:
    """Issue 28's held-out false alarm (``resume_last_output_every_offset``): a processor
    stores its offset after each output, crashes between an output and its offset, and on
    restart resumes after its last output, past the fetched offset. The record in between
    was read (and output) before: the reader jumps nothing new. Jumping a record nobody had
    read still is a skip."""

    def history(*, done_before: bool) -> History:
        b = Builder()
        b.ingest("r1", "r2", "r3")
        outputs = b.process("r1", *(["r2"] if done_before else []), process=2)
        b.commit(1, process=2)  # r2's offset was never stored: the crash came first
        b.add(K.CRASH, process=2, detail="process")
        b.fetch(1)
        outputs += b.process("r3")  # resumed after the last output
        if not done_before:
            outputs += b.process("r2", process=3)
        return b.finish(*outputs)

    assert_valid(history(done_before=True))
    assert [a.kind for a in check(history(done_before=False), EO).anomalies] == [AnomalyKind.SKIP]


def test_skip_a_fetch_with_no_offset_starts_at_the_truncation_point() -> None:
    def history(first_read: str) -> History:
        b = Builder()
        b.ingest("r1", "r2", "r3")
        outputs = b.process("r1", process=2)
        b.add(K.TRUNCATE, partition="p", offset=1)
        b.fetch(None)
        outputs += b.process(*(["r2", "r3"] if first_read == "r2" else ["r3"]))
        if first_read == "r3":
            outputs += b.process("r2", process=2)
        return b.finish(*outputs)

    assert_valid(history("r2"))
    skip = only(check(history("r3"), EO))
    assert skip.witnesses == (
        Witness(
            ("r2",),
            (9, 10),
            "process 1 read offset 2 of partition 'p' after a fetch that found no stored "
            "offset (event 9): offsets 1 to 1 skipped (1 acknowledged records)",
        ),
    )


def test_skip_a_read_past_a_truncation_is_compared_with_the_log_s_start() -> None:
    # process 1 reads r1; process 2 does r2 and truncates the log up to offset `at`;
    # process 1's reader, opened without a fetch, goes on at offset 3 (r4); r3 is done by
    # process 2 before, after or never
    def history(at: int, r3: str) -> History:
        b = Builder()
        b.ingest("r1", "r2", "r3", "r4")
        outputs = b.process("r1")
        outputs += b.process(*(["r2", "r3"] if r3 == "before" else ["r2"]), process=2)
        b.add(K.TRUNCATE, partition="p", offset=at, process=2)
        outputs += b.process("r4")
        if r3 == "after":
            outputs += b.process("r3", process=2)
        return b.finish(*outputs)

    assert_valid(history(3, "before"))  # nothing below the log's start is owed to a reader
    assert_valid(history(3, "after"))
    for guarantee in BOTH:  # a jump above the log's start still is a skip
        skip = only(check(history(2, "after"), guarantee))
        assert skip.kind is AnomalyKind.SKIP
        assert skip.witnesses[0].record_ids == ("r3",)
        assert "offsets 2 to 2 skipped" in skip.witnesses[0].detail
    # a record truncated before it was done is lost, not skipped
    assert [a.kind for a in check(history(3, "never"), EO).anomalies] == [AnomalyKind.LOST]

    # after a fetch, too: the fetched offset or the log's start, whichever is higher
    b = Builder()
    b.ingest("r1", "r2", "r3")
    outputs = b.process("r1", "r2", process=2)
    b.fetch(1)
    b.add(K.TRUNCATE, partition="p", offset=2, process=2)
    outputs += b.process("r3")
    assert_valid(b.finish(*outputs))


def test_skip_counts_each_jump_once_and_caps_the_skipped_records() -> None:
    b = Builder()
    names = [f"r{i}" for i in range(10)]
    b.ingest(*names)
    outputs = b.process("r0", "r8")
    outputs += b.process(*names[1:8], process=2)
    outputs += b.process("r9", process=3)
    skip = only(check(b.finish(*outputs), EO))
    assert skip.count == 1
    assert skip.witnesses[0].record_ids == ("r1", "r2", "r3", "r4", "r5")
    assert skip.witnesses[0].detail.endswith("offsets 1 to 7 skipped (7 acknowledged records)")


def _gapped(marker_after: tuple[str, ...], aborted: tuple[str, ...] = ()) -> Builder:
    """A builder whose partition ``p`` is written as Kafka writes a transactional topic: a
    commit marker takes the offset after each record of ``marker_after``, and the records of
    ``aborted`` are appended (never acknowledged) with an abort marker after them."""
    b = Builder()
    original = b.append

    def append(record_id: str, **fields: Any) -> int:
        index = original(record_id, **fields)
        if record_id in marker_after or record_id in aborted:
            b.next_offset["p"] += 1  # the marker's offset
        return index

    b.append = append  # type: ignore[method-assign]
    return b


def test_skip_counts_records_not_offsets_a_gap_of_markers_and_aborted_records_is_no_skip() -> None:
    # offsets: r1 0, marker 1, r2 2, marker 3, x1 4 (aborted), marker 5, r3 6, marker 7
    def history(*, resume: int) -> History:
        b = _gapped(("r1", "r2", "r3"), aborted=("x1",))
        b.ingest("r1", "r2")
        b.append("x1")  # an aborted upstream transaction: appended, never acknowledged
        b.ingest("r3")
        assert [b.records[r].offset for r in ("r1", "r2", "x1", "r3")] == [0, 2, 4, 6]
        outputs = b.process("r1", "r2", process=2)
        b.commit(3, process=2)  # r2's offset + 1: the marker's, as librdkafka commits it
        b.fetch(resume)
        outputs += b.process("r3")
        return b.finish(*outputs)

    # resumed at a marker, an aborted record, the next marker: nothing owed in between
    for resume in (3, 4, 5):
        assert_valid(history(resume=resume))
    b = _gapped(("r1", "r2", "r3"), aborted=("x1",))
    b.ingest("r1", "r2")
    b.append("x1")
    b.ingest("r3")
    assert_valid(b.finish(*b.process("r1", "r2", "r3")))  # consecutive reads across the gaps

    # a read that jumps an acknowledged record across a gap still is a skip, counting it only
    b = _gapped(("r1", "r2", "r3"), aborted=("x1",))
    b.ingest("r1", "r2")
    b.append("x1")
    b.ingest("r3")
    first = b.read("r1")
    outputs = [b.emit("r1")]
    jump = b.read("r3")
    outputs.append(b.emit("r3"))
    outputs += b.process("r2", process=2)
    jumped = b.finish(*outputs)
    for guarantee in BOTH:
        assert only(check(jumped, guarantee)) == Anomaly(
            AnomalyKind.SKIP,
            1,
            (
                Witness(
                    ("r2",),
                    (first, jump),
                    "process 1 read offset 6 of partition 'p' after a read of offset 0 "
                    f"(event {first}): offsets 1 to 5 skipped (1 acknowledged records)",
                ),
            ),
        )


# --------------------------------------------------------------------------------------------
# offset-ahead


def test_offset_ahead_a_commit_beyond_what_was_read() -> None:
    def history(committed: int) -> History:
        b = Builder()
        b.ingest("r1", "r2")
        outputs = b.process("r1")
        b.commit(committed)
        outputs += b.process("r2", process=2)
        return b.finish(*outputs)

    for guarantee in BOTH:
        assert only(check(history(2), guarantee)) == Anomaly(
            AnomalyKind.OFFSET_AHEAD,
            1,
            (
                Witness(
                    ("r2",),
                    (4, 6),
                    "process 1 committed offset 2 of partition 'p', but the highest offset "
                    "read before it was offset 0 (event 4)",
                ),
            ),
        )
    assert_valid(history(1))


def test_offset_ahead_a_commit_before_any_read() -> None:
    b = Builder()
    b.ingest("r1")
    commit = b.commit(1)
    outputs = b.process("r1")
    assert only(check(b.finish(*outputs), EO)) == Anomaly(
        AnomalyKind.OFFSET_AHEAD,
        1,
        (
            Witness(
                ("r1",),
                (commit,),
                "process 1 committed offset 1 of partition 'p', but the highest offset read "
                "before it was nothing",
            ),
        ),
    )


def test_offset_ahead_a_commit_past_a_lost_record() -> None:
    b = Builder()
    b.ingest("r1", "r2")
    outputs = b.process("r1")
    b.read("r2")
    b.commit(1)
    commit = b.commit(2)
    b.commit(2)
    verdict = check(b.finish(*outputs), ALO)
    assert verdict.status is Status.INVALID
    assert [(a.kind, a.count) for a in verdict.anomalies] == [
        (AnomalyKind.LOST, 1),
        (AnomalyKind.OFFSET_AHEAD, 1),
    ]
    assert verdict.anomalies[1].witnesses == (
        Witness(
            ("r2",),
            (commit,),
            "process 1 committed offset 2 of partition 'p', past lost record 'r2' at offset 1",
        ),
    )


# --------------------------------------------------------------------------------------------
# offset-regression


def regression_history(*steps: tuple[EventKind, int | None]) -> History:
    """r1..r3 processed, then commits and rollbacks of partition p."""
    b, outputs = simple("r1", "r2", "r3")
    for kind, offset in steps:
        if kind is K.COMMIT:
            assert offset is not None
            b.commit(offset)
        else:
            b.add(kind, partition="p", offset=offset)
    return b.finish(*outputs)


def test_offset_regression_fails_exactly_once_and_is_tolerated_at_least_once() -> None:
    history = regression_history((K.COMMIT, 3), (K.COMMIT, 1))
    expected = Anomaly(
        AnomalyKind.OFFSET_REGRESSION,
        1,
        (
            Witness(
                (),
                (12, 13),
                "process 1 committed offset 1 of partition 'p', below the stored offset 3 set "
                "at event 12",
            ),
        ),
    )
    assert only(check(history, EO)) == expected
    assert check(history, ALO).tolerated == (expected,)
    assert check(history, ALO).status is Status.VALID
    assert_valid(regression_history((K.COMMIT, 1), (K.COMMIT, 3), (K.COMMIT, 3)))


def test_offset_regression_follows_rollbacks() -> None:
    assert_valid(regression_history((K.COMMIT, 3), (K.ROLLBACK, 1), (K.COMMIT, 1)))
    assert_valid(regression_history((K.COMMIT, 3), (K.ROLLBACK, None), (K.COMMIT, 0)))
    regression = only(check(regression_history((K.COMMIT, 1), (K.ROLLBACK, 3), (K.COMMIT, 2)), EO))
    assert regression.witnesses[0].events == (13, 14)
    assert regression.witnesses[0].detail.endswith("below the stored offset 3 set at event 13")


# --------------------------------------------------------------------------------------------
# UNKNOWN


def test_a_run_without_drain_is_unknown() -> None:
    b, outputs = simple("r1")
    b.observe(outputs[0])
    b.end()
    for guarantee in BOTH:
        verdict = check(b.history(), guarantee)
        assert verdict.status is Status.UNKNOWN
        assert verdict.reasons == (NO_DRAIN_REASON,)
        assert verdict.anomalies == ()


def test_an_incomplete_run_is_unknown_with_the_end_detail_as_reason() -> None:
    b, outputs = simple("r1")
    b.observe(outputs[0])
    b.end("incomplete: step budget exhausted")
    verdict = check(b.history(), EO)
    assert verdict.status is Status.UNKNOWN
    assert verdict.reasons == ("incomplete: step budget exhausted", NO_DRAIN_REASON)


def test_missing_effects_of_an_unsettled_run_are_unknown_not_lost() -> None:
    b = Builder()
    b.ingest("r1")
    b.end("incomplete: crashed")
    verdict = check(b.history(), EO)
    assert verdict.status is Status.UNKNOWN
    assert verdict.anomalies == ()
    assert verdict.reasons == ("incomplete: crashed", NO_DRAIN_REASON)


def test_a_definite_anomaly_makes_an_incomplete_run_invalid() -> None:
    b = Builder()
    b.ingest("r1")
    [first] = b.process("r1")
    [second] = b.process("r1", process=2)  # a second instance (a re-read by one is its own anomaly)
    b.observe(first)
    b.observe(second)
    b.end("incomplete: crashed")
    verdict = check(b.history(), EO)
    assert only(verdict).kind is AnomalyKind.DUPLICATE


def test_a_malformed_history_is_unknown_with_no_anomalies() -> None:
    b = Builder()
    b.ingest("r1")  # lost, but the history cannot be checked
    b.add(K.INDETERMINATE, partition="p", offset=5, record_id="r1")
    b.drain()
    b.end()
    verdict = check(b.history(), EO)
    assert verdict == Verdict(
        status=Status.UNKNOWN,
        guarantee=EO,
        reasons=(
            "event 2 (indeterminate) places record 'r1' at partition 'p' offset 5, but "
            "event 0 appended it at partition 'p' offset 0",
        ),
        stats={
            "acknowledged": 0,
            "appended": 0,
            "duplicates": 0,
            "events": 5,
            "expected_effects": 0,
            "lost": 0,
            "observed_outputs": 0,
        },
    )


def test_check_takes_a_guarantee_as_its_string_and_rejects_anything_else() -> None:
    history = Builder().finish()
    assert check(history, "exactly-once") == check(history, Guarantee.EXACTLY_ONCE)
    assert check(history, "at-least-once") == check(history, Guarantee.AT_LEAST_ONCE)
    with pytest.raises(
        ConfigError, match=r"unknown guarantee, got 'exactly_once'; choose one of at-least-once"
    ):
        check(history, "exactly_once")


# --------------------------------------------------------------------------------------------
# validate


def with_events(*events: Event, meta: HistoryMeta | None = None) -> History:
    if meta is None:
        meta = HistoryMeta(partitions=("p",), sinks={"out": LOG, "counts": COUNTS})
    return History(meta=meta, events=events)


def end_at(index: int) -> Event:
    return Event(index, K.END, detail="complete")


def append(index: int, record_id: str = "r1", offset: int = 0, **fields: Any) -> Event:
    row: dict[str, Any] = dict(partition="p", offset=offset, record_id=record_id, key="k", value=1)
    row.update(fields)
    return Event(index, K.APPEND, **row)


@pytest.mark.parametrize(
    ("events", "problems"),
    [
        pytest.param((end_at(0),), [], id="fine"),
        pytest.param(
            (), ["the history has no events; it needs at least its end event"], id="empty"
        ),
        pytest.param(
            (end_at(1),),
            ["event 0 has index 1; events must be numbered 0, 1, 2, ... in order"],
            id="index",
        ),
        pytest.param(
            (Event(0, "end", detail="complete"), end_at(1)),  # type: ignore[arg-type]
            [
                "event 0 has kind 'end', which is not an EventKind (one of append, ack, "
                "indeterminate, truncate, start, crash, rollback, zombie, error, rebalance, "
                "fetch, read, emit, put, commit, txn-begin, txn-commit, txn-abort, drain, "
                "observe, end)"
            ],
            id="kind",
        ),
        pytest.param(
            ("not an event", end_at(1)),
            ["event 0 is not an Event: 'not an event'"],
            id="not-an-event",
        ),
        pytest.param(
            (Event(0, K.ACK, partition="p", offset=0), end_at(1)),
            ["event 0 (ack) is missing record_id"],
            id="missing",
        ),
        pytest.param(
            (append(0, offset=True), end_at(1)),
            ["event 0 (append) has offset True; it must be an int"],
            id="bool",
        ),
        pytest.param(
            (append(0, key=3), end_at(1)),
            ["event 0 (append) has key 3; it must be a str"],
            id="str",
        ),
        pytest.param(
            (append(0, offset=-1), end_at(1)),
            ["event 0 (append) has offset -1; it must not be negative"],
            id="negative",
        ),
        pytest.param(
            (Event(0, K.EMIT, process=1, sink="out", output_id=0, part=1, parts=1), end_at(1)),
            ["event 0 (emit) has part 1 of parts 1; part must be below"],
            id="part",
        ),
        pytest.param(
            (Event(0, K.EMIT, process=1, sink="out", output_id=0, part=0, parts=0), end_at(1)),
            ["event 0 (emit) has parts 0; it must be at least 1"],
            id="parts",
        ),
        pytest.param(
            (append(0, partition="q"), end_at(1)),
            ["event 0 (append) names partition 'q', which is not in meta.partitions ['p']"],
            id="partition",
        ),
        pytest.param(
            (Event(0, K.EMIT, process=1, sink="nope", output_id=0, part=0, parts=1), end_at(1)),
            [
                "event 0 (emit) names sink 'nope', which is not declared in meta.sinks "
                "['counts', 'out']"
            ],
            id="sink",
        ),
        pytest.param(
            (Event(0, K.PUT, process=1, sink="out", key="k", value=1), end_at(1)),
            ["event 0 (put) puts into sink 'out', which is a log, not a table"],
            id="put-log",
        ),
        pytest.param(
            (Event(0, K.OBSERVE, sink="out", key="k", value=1), end_at(1)),
            [
                "event 0 (observe) observes log sink 'out' without output_id and part "
                "(got output_id None, part None)"
            ],
            id="observe-key-in-log",
        ),
        pytest.param(
            (Event(0, K.OBSERVE, sink="out", output_id=3), end_at(1)),
            [
                "event 0 (observe) observes log sink 'out' without output_id and part "
                "(got output_id 3, part None)"
            ],
            id="observe-log-without-part",
        ),
        pytest.param(
            (Event(0, K.OBSERVE, sink="counts", output_id=3, part=0), end_at(1)),
            ["event 0 (observe) observes output 3 in sink 'counts', which is a table, not a log"],
            id="observe-output-in-table",
        ),
        pytest.param(
            (Event(0, K.OBSERVE, sink="counts", key="k"), end_at(1)),
            [
                "event 0 (observe) observes table sink 'counts' without key and value "
                "(got key 'k', value None)"
            ],
            id="observe-table-without-value",
        ),
        pytest.param(
            (append(0), append(1, offset=1), end_at(2)),
            [
                "event 1 (append) appends record 'r1' again; it was appended at event 0 and "
                "record ids must be unique"
            ],
            id="record-id",
        ),
        pytest.param(
            (Event(0, K.ACK, partition="p", offset=0, record_id="r1"), append(1), end_at(2)),
            ["event 0 (ack) names record 'r1', which was not appended before it"],
            id="ack-before-append",
        ),
        pytest.param(
            (
                append(0),
                Event(1, K.INDETERMINATE, partition="p", offset=1, record_id="r1"),
                end_at(2),
            ),
            [
                "event 1 (indeterminate) places record 'r1' at partition 'p' offset 1, but "
                "event 0 appended it at partition 'p' offset 0"
            ],
            id="indeterminate-offset",
        ),
        pytest.param(
            (Event(0, K.DRAIN),),
            ["the history has no end event; its last event must be 'end'"],
            id="no-end",
        ),
        pytest.param(
            (end_at(0), Event(1, K.DRAIN)),
            ["event 0 (end) is not the last event; the history goes on to 1"],
            id="end-not-last",
        ),
        pytest.param(
            (end_at(0), end_at(1)),
            ["the history has 2 end events (events 0, 1); it must have exactly one, the last"],
            id="two-ends",
        ),
        pytest.param(
            (Event(0, K.DRAIN), Event(1, K.DRAIN), end_at(2)),
            ["the history has 2 drain events (events 0, 1); it may have at most one"],
            id="two-drains",
        ),
    ],
)
def test_validate_names_each_problem(events: tuple[Event, ...], problems: list[str]) -> None:
    history = with_events(*events)
    assert validate(history) == problems
    verdict = check(history, EO)
    if problems:
        assert (verdict.status, verdict.reasons, verdict.anomalies) == (
            Status.UNKNOWN,
            tuple(problems),
            (),
        )


def test_validate_checks_the_header() -> None:
    old = HistoryMeta(partitions=("p",), sinks={}, version=0)
    assert validate(with_events(end_at(0), meta=old)) == [
        "history schema version 0 is not supported: this checker reads version 4"
    ]
    garbage = HistoryMeta(partitions="p", sinks={"out": "log"})  # type: ignore[arg-type, dict-item]
    assert validate(with_events(end_at(0), meta=garbage)) == [
        "meta.partitions must be a tuple of str, got 'p'",
        "meta.sinks entry 'out': 'log' is not a str: SinkSpec",
    ]
    assert validate(History(meta=None, events=None)) == [  # type: ignore[arg-type]
        "history.meta must be a HistoryMeta, got None",
        "history.events must be a sequence of Event, got None",
    ]


def test_validate_stops_after_max_problems() -> None:
    events = (*(append(i, record_id="r", offset=i) for i in range(30)), end_at(30))
    problems = validate(with_events(*events))
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[MAX_PROBLEMS - 1] == (
        f"event {MAX_PROBLEMS} (append) appends record 'r' again; it was appended at event 0 "
        f"and record ids must be unique"
    )
    assert problems[-1] == f"(stopped after {MAX_PROBLEMS} problems; there may be more)"


# --------------------------------------------------------------------------------------------
# Verdict values


def sample_verdict() -> Verdict:
    """r1 observed twice (events 8, 9 of outputs emitted at 3, 4), r2 (acked at 6) lost."""
    b, (first,) = simple("r1")
    second = b.emit("r1")
    b.ingest("r2")
    return check(b.finish(first, second), EO)


def test_verdict_json_round_trip_with_stable_key_order() -> None:
    verdict = sample_verdict()
    assert [a.kind for a in verdict.anomalies] == [AnomalyKind.LOST, AnomalyKind.DUPLICATE]
    data = verdict.to_json()
    assert list(data) == ["status", "guarantee", "anomalies", "tolerated", "reasons", "stats"]
    assert list(data["anomalies"][0]) == ["kind", "count", "witnesses"]
    assert list(data["anomalies"][0]["witnesses"][0]) == ["record_ids", "events", "detail"]
    assert data["status"] == "invalid"
    assert data["guarantee"] == "exactly-once"
    assert [a["kind"] for a in data["anomalies"]] == ["lost", "duplicate"]
    assert list(data["stats"]) == sorted(data["stats"])
    text = json.dumps(data)
    assert Verdict.from_json(json.loads(text)) == verdict
    assert json.dumps(Verdict.from_json(json.loads(text)).to_json()) == text

    tolerated = check(regression_history((K.COMMIT, 3), (K.COMMIT, 1)), ALO)
    assert Verdict.from_json(json.loads(json.dumps(tolerated.to_json()))) == tolerated
    unknown = check(with_events(end_at(0)), ALO)
    assert unknown.reasons == (NO_DRAIN_REASON,)
    assert Verdict.from_json(json.loads(json.dumps(unknown.to_json()))) == unknown


def test_verdict_summary_has_one_line_per_anomaly_with_its_first_witness() -> None:
    assert sample_verdict().summary() == (
        "INVALID under exactly-once\n"
        "  lost x1: records [r2] events [6]: record 'r2' part 0 was acknowledged at event 6 "
        "but no log sink shows it\n"
        "  duplicate x1: records [r1] events [3, 4, 8, 9]: record 'r1' part 0 was observed "
        "2 times (outputs 0, 1)"
    )
    assert check(regression_history((K.COMMIT, 3), (K.COMMIT, 1)), ALO).summary() == (
        "VALID under at-least-once\n"
        "  tolerated offset-regression x1: records [-] events [12, 13]: process 1 committed "
        "offset 1 of partition 'p', below the stored offset 3 set at event 12"
    )
    assert check(with_events(end_at(0)), EO).summary() == (
        f"UNKNOWN under exactly-once\n  unknown because: {NO_DRAIN_REASON}"
    )


def test_status_worst_of() -> None:
    assert Status.VALID.merge(Status.UNKNOWN) is Status.UNKNOWN
    assert Status.INVALID.merge(Status.UNKNOWN) is Status.INVALID
    assert Status.UNKNOWN.merge(Status.VALID) is Status.UNKNOWN
    assert Status.worst([]) is Status.VALID
    assert Status.worst([Status.VALID, Status.INVALID, Status.UNKNOWN]) is Status.INVALID
    assert [kind.value for kind in AnomalyKind] == [
        "lost",
        "duplicate",
        "unexpected",
        "aborted-read",
        "count-mismatch",
        "nonmonotonic",
        "skip",
        "offset-ahead",
        "offset-regression",
        "stale",
        "inconsistent-offsets",
        "log-duplicate",
        "nonmonotonic-poll",
        "nonmonotonic-send",
    ]
    assert [g.value for g in Guarantee] == ["at-least-once", "exactly-once"]


def test_values_refuse_contradictions() -> None:
    witness = Witness(("r1",), (1,), "x")
    anomaly = Anomaly(AnomalyKind.LOST, 1, (witness,))
    with pytest.raises(ConfigError, match="'valid' contradicts its contents"):
        Verdict(Status.VALID, EO, anomalies=(anomaly,))
    with pytest.raises(ConfigError, match="it must be 'unknown'"):
        Verdict(Status.VALID, EO, reasons=("why",))
    with pytest.raises(ConfigError, match="count must be a positive int, got 0"):
        Anomaly(AnomalyKind.LOST, 0, ())
    with pytest.raises(ConfigError, match="between 1 and 5 witnesses, got 6"):
        Anomaly(AnomalyKind.LOST, 9, (witness,) * 6)
    with pytest.raises(ConfigError, match="between 1 and 1 witnesses, got 2"):
        Anomaly(AnomalyKind.LOST, 1, (witness, witness))
    with pytest.raises(ConfigError, match=r"strictly ascending, got \(2, 1\)"):
        Witness((), (2, 1), "x")
    with pytest.raises(ConfigError, match="kind must be an AnomalyKind, got 'lost'"):
        Anomaly("lost", 1, (witness,))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="must map str to int"):
        Verdict(Status.VALID, EO, stats={"lost": True})


def test_public_names() -> None:
    assert set(harness.check.__all__) == {
        "EXIT_CODES",
        "MAX_PROBLEMS",
        "MAX_WITNESSES",
        "Anomaly",
        "AnomalyKind",
        "Guarantee",
        "Status",
        "Verdict",
        "Witness",
        "check",
        "exit_code",
        "guarantee_of",
        "validate",
    }
    for name in harness.check.__all__:
        assert getattr(harness.check, name) is not None


def test_a_long_history_is_checked() -> None:
    b = Builder(partitions=("p", "q"), sinks={"out": ORDERED, "counts": COUNTS})
    outputs = []
    for i in range(10_000):
        partition = "pq"[i % 2]
        record_id = f"r{i}"
        b.append(record_id, partition=partition, key=f"k{i % 7}")
        b.ack(record_id)
        b.read(record_id)
        outputs.append(b.emit(record_id))
        b.commit(i // 2 + 1, partition=partition)
    b.drain()
    for output_id in outputs:
        b.observe(output_id)
    for key in range(7):
        b.observe_key(f"k{key}", len(range(key, 10_000, 7)))
    b.end()
    history = b.history()
    assert len(history) > 60_000
    assert_valid(history)


# --------------------------------------------------------------------------------------------
# Properties


KEYS = ("k1", "k2", "k3")


@given(histories())
def test_random_well_formed_histories_are_checked_without_raising(history: History) -> None:
    assert validate(history) == []
    at_least_once, exactly_once = check(history, ALO), check(history, EO)
    assert exactly_once.status.merge(at_least_once.status) is exactly_once.status
    eo_counts = {a.kind: a.count for a in exactly_once.anomalies}
    for anomaly in at_least_once.anomalies:
        assert eo_counts[anomaly.kind] >= anomaly.count
    assert exactly_once.tolerated == ()
    for verdict in (at_least_once, exactly_once):
        assert Verdict.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict
        duplicates = [
            a.count
            for a in verdict.anomalies + verdict.tolerated
            if a.kind is AnomalyKind.DUPLICATE
        ]
        assert verdict.stats["duplicates"] == sum(duplicates)
        assert all(len(a.witnesses) <= MAX_WITNESSES for a in verdict.anomalies)


@st.composite
def correct_runs(draw: st.DrawFn) -> tuple[Builder, list[int]]:
    """A correct processor: reads each partition in order (sometimes restarting from the
    committed offset and redelivering), emits every part of every record once, commits what it
    has processed; returns the builder before the drain and the outputs to observe."""
    b = Builder(partitions=("p", "q"), sinks={"out": ORDERED, "counts": COUNTS})
    sizes = {"p": draw(st.integers(0, 6)), "q": draw(st.integers(0, 6))}
    for partition, size in sizes.items():
        for i in range(size):
            record_id = f"{partition}{i}"
            b.append(record_id, partition=partition, key=draw(st.sampled_from(KEYS)))
            b.ack(record_id)
    outputs: list[int] = []
    position = dict.fromkeys(sizes, 0)
    while any(position[p] < sizes[p] for p in sizes):
        partition = draw(st.sampled_from([p for p in sizes if position[p] < sizes[p]]))
        record_id = f"{partition}{position[partition]}"
        if draw(st.integers(0, 4)) == 0 and position[partition]:
            b.fetch(position[partition], partition=partition)
        b.read(record_id)
        if draw(st.integers(0, 4)) == 0:
            b.read(record_id, detail="redelivered")
        parts = draw(st.integers(1, 2))
        for part in range(parts):
            outputs.append(b.emit(record_id, part=part, parts=parts))
        position[partition] += 1
        b.commit(position[partition], partition=partition)
    return b, outputs


def finish_correct(b: Builder, observed: list[int]) -> History:
    b.drain()
    for output_id in observed:
        b.observe(output_id)
    counts: dict[str, int] = {}
    for record in b.records.values():
        assert record.key is not None
        counts[record.key] = counts.get(record.key, 0) + 1
    for key, count in sorted(counts.items()):
        b.observe_key(key, count)
    b.end()
    return b.history()


@given(correct_runs())
def test_a_correct_processor_is_valid(run: tuple[Builder, list[int]]) -> None:
    b, outputs = run
    history = finish_correct(b, outputs)
    assert_valid(history)
    assert check(history, EO).stats["observed_outputs"] == len(outputs)


@given(correct_runs(), st.data())
def test_one_dropped_output_is_exactly_one_lost_effect(
    run: tuple[Builder, list[int]], data: st.DataObject
) -> None:
    b, outputs = run
    assume(outputs)
    dropped = data.draw(st.sampled_from(outputs))
    emit = b.outputs[dropped]
    history = finish_correct(b, [o for o in outputs if o != dropped])
    verdict = check(history, ALO)
    assert verdict.anomalies[0].kind is AnomalyKind.LOST
    assert verdict.anomalies[0].count == 1
    assert verdict.anomalies[0].witnesses[0].record_ids == (emit.record_id,)
    # the processor committed past the record, so the commit is ahead of visible effects
    assert [a.kind for a in verdict.anomalies[1:]] == [AnomalyKind.OFFSET_AHEAD]


@given(correct_runs(), st.data())
def test_one_repeated_output_is_exactly_one_duplicate(
    run: tuple[Builder, list[int]], data: st.DataObject
) -> None:
    b, outputs = run
    assume(outputs)
    repeated = data.draw(st.sampled_from(outputs))
    history = finish_correct(b, [*outputs, repeated])
    assert only(check(history, EO)).count == 1
    assert check(history, ALO).status is Status.VALID


GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 4),
    st.sampled_from(["p", "q", "out", "counts", "r0", "r1", "k", "complete", "redelivered"]),
    st.text(max_size=2),
    st.floats(allow_nan=True),
    st.lists(st.integers(), max_size=2),
)


@st.composite
def garbage_events(draw: st.DrawFn) -> object:
    fields = {name: draw(GARBAGE) for name in EVENT_FIELDS[2:]}
    index = draw(st.one_of(st.integers(0, 6), GARBAGE))
    kind = draw(st.one_of(st.sampled_from(EventKind), GARBAGE))
    return Event(index, kind, **fields) if draw(st.integers(0, 9)) else draw(GARBAGE)


@given(
    st.lists(garbage_events(), max_size=8),
    st.one_of(
        st.just(HistoryMeta(partitions=("p", "q"), sinks={"out": ORDERED, "counts": COUNTS})),
        st.builds(HistoryMeta, partitions=GARBAGE, sinks=GARBAGE, version=GARBAGE),
    ),
)
def test_validate_never_raises_on_garbage(events: list[object], meta: HistoryMeta) -> None:
    history = History(meta=meta, events=tuple(events))  # type: ignore[arg-type]
    problems = validate(history)
    assert all(isinstance(problem, str) for problem in problems)
    assert len(problems) <= MAX_PROBLEMS + 1
    verdict = check(history, EO)
    if problems:
        assert verdict.status is Status.UNKNOWN
        assert verdict.reasons == tuple(problems)


@given(histories(), st.data())
def test_check_never_raises_on_a_corrupted_history(history: History, data: st.DataObject) -> None:
    position = data.draw(st.integers(0, len(history) - 1))
    name = data.draw(st.sampled_from([f.name for f in dataclasses.fields(Event)]))
    event = dataclasses.replace(history.events[position], **{name: data.draw(GARBAGE)})
    events = (*history.events[:position], event, *history.events[position + 1 :])
    corrupted = History(meta=history.meta, events=events)
    problems = validate(corrupted)
    verdict = check(corrupted, ALO)
    if problems:
        assert verdict.status is Status.UNKNOWN


# --------------------------------------------------------------------------------------------
# nonmonotonic-send: the log put a producer's later send below an earlier acknowledged one


def _sends(*steps: tuple[str, str, int, int | None]) -> History:
    """Sends and answers of partition ``p``: ``("append", record, offset, producer)`` or
    ``("ack"|"indeterminate"|"read", record, offset, _)``; every acknowledged or read record is
    emitted to and observed in ``out`` (so nothing is lost or unexpected)."""
    events: list[Event] = []
    shown: list[str] = []
    for step, record_id, offset, producer in steps:
        row: dict[str, Any] = dict(partition="p", offset=offset, record_id=record_id)
        if step == "append":
            events.append(Event(len(events), K.APPEND, process=producer, key="k", value=1, **row))
        elif step == "read":
            events.append(Event(len(events), K.READ, process=9, **row))
        else:
            events.append(Event(len(events), K(step), **row))
        if step in ("ack", "read") and record_id not in shown:
            shown.append(record_id)
    for n, record_id in enumerate(shown):
        events.append(
            Event(
                len(events),
                K.EMIT,
                process=9,
                sink="out",
                output_id=n,
                record_id=record_id,
                part=0,
                parts=1,
            )
        )
    events.append(Event(len(events), K.DRAIN))
    for n, record_id in enumerate(shown):
        events.append(
            Event(len(events), K.OBSERVE, sink="out", output_id=n, record_id=record_id, part=0)
        )
    events.append(end_at(len(events)))
    return with_events(*events, meta=HistoryMeta(partitions=("p",), sinks={"out": LOG}))


def test_a_send_placed_below_an_earlier_acknowledged_one_is_a_nonmonotonic_send() -> None:
    """The producer's send of c is acknowledged at 3 and d at 4; its next sends, made
    after those answers, land at 1 and 2: the log reordered them. One occurrence (the
    step down from d to a; b after a is in order), under both guarantees (a reorder gives
    no record twice), witnessed by d's ack and a's append."""
    history = _sends(
        ("append", "c", 3, None), ("ack", "c", 3, None),
        ("append", "d", 4, None), ("ack", "d", 4, None),
        ("append", "a", 1, None), ("ack", "a", 1, None),
        ("append", "b", 2, None), ("ack", "b", 2, None),
    )  # fmt: skip
    assert validate(history) == []
    for guarantee in BOTH:
        verdict = check(history, guarantee)
        assert verdict.status is Status.INVALID
        assert [(a.kind, a.count) for a in verdict.anomalies] == [
            (AnomalyKind.NONMONOTONIC_SEND, 1)
        ]
        (found,) = verdict.anomalies[0].witnesses
        assert found.record_ids == ("a", "d")
        assert found.events == (3, 4)
        assert found.detail == (
            "the producer sent record 'a' (event 4) after its send of record 'd' was "
            "acknowledged at offset 4 of partition 'p' (event 3), and the log put it below, "
            "at offset 1: the log reordered the producer's sends"
        )


def test_a_send_without_an_answer_placed_below_counts_once_a_reader_saw_it() -> None:
    """An unanswered send below an acknowledged one is in the log only if a reader saw it:
    unseen, nothing (VALID); seen, a ``nonmonotonic-send``."""
    steps = [
        ("append", "c", 3, None), ("ack", "c", 3, None),
        ("append", "a", 1, None), ("indeterminate", "a", 1, None),
    ]  # fmt: skip
    assert check(_sends(*steps), EO).status is Status.VALID
    seen = check(_sends(*steps, ("read", "a", 1, None)), EO)
    assert [a.kind for a in seen.anomalies] == [AnomalyKind.NONMONOTONIC_SEND]


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param(
            [
                ("append", "c", 3, None), ("append", "a", 1, None),
                ("ack", "c", 3, None), ("ack", "a", 1, None),
            ],
            id="in-flight-together",
        ),
        pytest.param(
            [("append", "c", 3, None), ("ack", "c", 3, None), ("append", "a", 1, None)],
            id="failed-send-below",
        ),
        pytest.param(
            [
                ("append", "c", 3, 1), ("ack", "c", 3, None),
                ("append", "a", 1, 2), ("ack", "a", 1, None),
            ],
            id="two-producers",
        ),
        pytest.param(
            [
                ("append", "a", 1, None), ("ack", "a", 1, None),
                ("append", "b", 2, None), ("ack", "b", 2, None),
                ("append", "c", 5, None), ("ack", "c", 5, None),
            ],
            id="in-order-with-a-gap",
        ),
    ],
)  # fmt: skip
def test_sends_the_log_may_place_as_it_did_are_no_nonmonotonic_send(
    steps: list[tuple[str, str, int, int | None]],
) -> None:
    """Sends in flight together (a producer may reorder those), a send that failed (its
    offset is no place in the log), two producers' sends (not ordered with each other) and
    sends in order with a gap: VALID under both guarantees, never malformed."""
    history = _sends(*steps)
    assert validate(history) == []
    for guarantee in BOTH:
        verdict = check(history, guarantee)
        assert verdict.status is Status.VALID, verdict.summary()


def test_an_offset_taken_twice_is_inconsistent_not_nonmonotonic() -> None:
    """A later send at the very offset of an earlier acknowledged one is two records at one
    offset (``inconsistent-offsets``), not also a step down."""
    history = _sends(
        ("append", "a", 1, None), ("ack", "a", 1, None),
        ("append", "b", 1, None), ("ack", "b", 1, None),
    )  # fmt: skip
    verdict = check(history, EO)
    assert [a.kind for a in verdict.anomalies] == [AnomalyKind.INCONSISTENT_OFFSETS]


# --------------------------------------------------------------------------------------------
# rebalance events (schema 4): validated, shown, and judged by no rule


def _with_rebalance(*changes: Event) -> History:
    """A clean run (r1 read, emitted, committed, observed) with ``changes`` inserted after
    the ack, renumbered."""
    events = [
        append(0),
        Event(1, K.ACK, partition="p", offset=0, record_id="r1"),
        *changes,
        Event(2, K.FETCH, process=1, partition="p"),
        Event(3, K.READ, process=1, partition="p", offset=0, record_id="r1"),
        Event(4, K.EMIT, process=1, sink="out", output_id=0, record_id="r1", part=0, parts=1),
        Event(5, K.COMMIT, process=1, partition="p", offset=1),
        Event(6, K.DRAIN),
        Event(7, K.OBSERVE, sink="out", output_id=0, record_id="r1", part=0),
        end_at(8),
    ]
    renumbered = [dataclasses.replace(e, index=i) for i, e in enumerate(events)]
    return with_events(*renumbered, meta=HistoryMeta(partitions=("p",), sinks={"out": LOG}))


def test_a_rebalance_changes_no_verdict_and_a_malformed_one_is_refused() -> None:
    """A partition revoked and assigned again before the fetch: the same verdict as the
    run without it (VALID under both guarantees, the same stats but ``events``). One
    without its detail, or of an undeclared partition, is malformed: UNKNOWN, naming it."""
    plain = _with_rebalance()
    changes = (
        Event(0, K.REBALANCE, process=1, partition="p", detail="revoked"),
        Event(0, K.REBALANCE, process=1, partition="p", detail="assigned"),
    )
    rebalanced = _with_rebalance(*changes)
    assert validate(rebalanced) == []
    for guarantee in BOTH:
        with_it, without = check(rebalanced, guarantee), check(plain, guarantee)
        assert with_it.status is without.status is Status.VALID, with_it.summary()
        assert {**with_it.stats, "events": 0} == {**without.stats, "events": 0}
    no_detail = _with_rebalance(Event(0, K.REBALANCE, process=1, partition="p"))
    assert validate(no_detail) == ["event 2 (rebalance) is missing detail"]
    elsewhere = _with_rebalance(Event(0, K.REBALANCE, process=1, partition="z", detail="assigned"))
    (problem,) = validate(elsewhere)
    assert problem.startswith("event 2 (rebalance) names partition 'z'")
    for broken in (no_detail, elsewhere):
        assert check(broken, EO).status is Status.UNKNOWN
