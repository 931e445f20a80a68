"""The local checker: a history and a delivery guarantee in, a :class:`Verdict` out.

Pure Python over dicts and sets, a few linear passes (plus sorting where witnesses and
partitions need it), no I/O. The Spark checker implements the same rules and must return the
same verdict for the same history; these rules are the contract between them.

**Truth.** The acknowledged records are the records with an ``ack`` event; their key, value,
partition and offset come from their ``append`` event. A record whose ``append`` has
``detail == "poison"`` is expected to have no effect: it is exempt from ``lost`` and from the
table aggregates. A record id appended again (``detail == "resent"``: an at-least-once
upstream's resend) is the same record at a second position: its key, value, partition and
offset (for ``offset-ahead``) are its first append's, it counts once everywhere, and any
copy's ``ack`` acknowledges it; the ``skip`` and ``offset-ahead`` rules see every position. A
record appended again by a producer's own retry (``detail == "retried"``) is the same record
in the same way, and a ``log-duplicate``. A record with an ``indeterminate`` event (its send
got no answer) and no ``ack`` is acknowledged, as of its first ``indeterminate`` event, when
some reader saw it (a ``read`` of it, or an ``observe`` naming it), and is nothing otherwise.

**Effects.** An output is an ``observe`` event of a log sink; its effect is
``(record_id, part)``. The expected effects of an acknowledged non-poison record ``r`` are
``(r, 0)``, ``(r, p)`` for every ``emit`` of ``r`` with part ``p``, and ``(r, 0)`` ...
``(r, n - 1)`` for every ``emit`` of ``r`` declaring ``parts == n`` (whatever its sink). When
the history declares no log sink at all, ``lost``, ``duplicate``, ``unexpected`` (and so the
lost-record half of ``offset-ahead``) are not assessed.

**Anomalies**, and what one occurrence (counted in :attr:`Anomaly.count`) is:

``lost``
    One expected effect of an acknowledged non-poison record that no log sink shows, in a
    *settled* run (it drained and its ``end`` detail is ``complete``); in an unsettled run a
    missing effect may only be late, so it is not judged (nor is an under-count below).
    Witness: the record, its first ``ack`` and its last ``read`` and ``emit`` events.
``duplicate``
    One extra copy: an effect of an acknowledged record observed ``n > 1`` times (across all
    log sinks) counts ``n - 1``. Witness (one per effect): the record, the ``observe`` events
    and the ``emit`` events of those outputs.
``unexpected``
    One ``observe`` of an output its record's rules do not allow (``docs/history.md``,
    "Which outputs a record allows"): its ``record_id`` is null or not an acknowledged
    record (appended but never acknowledged counts: its write failed), or names a poison
    record (which must have no effect), or a part its record's emits do not declare. Such
    an output is neither a copy nor a delivered effect.
``aborted-read``
    One ``observe`` of an output that was emitted in a transaction that has a ``txn-abort``.
``count-mismatch``
    One key of a table sink whose spec aggregates ``count`` or ``sum``: expected is the count
    of (or sum of ``value`` over) the acknowledged non-poison records with that key, observed
    the value of the last ``observe`` of that key in that sink (missing: 0); the keys are
    both sets' union. Under at-least-once an observed value above the expected one is
    tolerated. Witness: the key in the detail, the key's acknowledged records (the first
    :data:`MAX_WITNESSES` ids), the ``observe``.
``nonmonotonic``
    Log sinks with ``ordered=True`` only. Per sink and source partition, the outputs in
    ``observe`` order, each effect's first occurrence only: every adjacent pair whose source
    offsets (from the records' ``append``) decrease is one occurrence; a record appended at
    several offsets of the partition (resent, retried) stands for the first of them at or
    above the previous output's, else its last (a reader that took a later copy read in
    order). Witness: both records and both ``observe`` events.
``skip``
    Per process and partition, over ``read`` events not marked ``redelivered`` (redeliveries
    are ignored here): a read at offset ``o'`` that jumps an acknowledged record, i.e. some
    acknowledged record (one with an ``ack``, whenever it came) was appended at an offset
    ``max(o + 1, t) <= x < o'``, ``o`` the previous read's offset and ``t`` the last
    ``truncate`` offset of the partition so far (0 if none: records below the log's start
    cannot be read, and whether they were done first is for ``lost`` and ``offset-ahead`` to
    say); and the first read after a ``fetch`` of that partition by that process that
    returned ``c``, when such a record lies in ``max(c, t) <= x < o'`` (``c`` null: 0); such
    a read is compared with the fetch, not with the previous read. The range starts no lower
    than ``h + 1``, ``h`` the highest offset of the partition any process read before (the
    reading frontier): a reader that resumes past records already read (after the output
    that covers them, as a processor resuming from its last output does) jumps nothing new,
    and whether those were done is for ``lost`` and ``duplicate`` to say. Records are
    counted, not offsets: a gap that holds no acknowledged record (Kafka's transaction
    markers, the records of an aborted upstream transaction, an unacknowledged append) is
    not a skip.
    Witness: the two events and the skipped records (the first :data:`MAX_WITNESSES`
    acknowledged ones in the skipped range, in append order) and how many there are.
``nonmonotonic-poll``
    Over the same reads as ``skip``: a read at an offset at or below the previous read's,
    with no ``fetch`` of that partition by that process since (a fetch with detail ``seek``
    is the application moving its reader itself). Witness: the two reads.
``inconsistent-offsets``
    One (partition, offset) where two or more records were acknowledged (``ack``) or read
    (``read``). Witness: the records and the first such event of each.
``nonmonotonic-send``
    Per producer (an ``append``'s ``process``; null, as the simulator and the Kafka doubles
    write them: the one upstream producer) and partition, over ``append`` events in history
    order: an append at offset ``o`` whose send is in the log (an ``ack`` names its record
    at that place, or an ``indeterminate`` one does and a reader saw the record), made after
    the ``ack`` of an earlier append of that producer and partition, when ``o`` is below the
    offset of the latest such append (by append order) acknowledged before it. A send
    made after an earlier one was answered must land after it; sends in flight together
    are not compared (a producer may reorder those). An append at the very offset of the
    earlier one is ``inconsistent-offsets`` instead. Witness: the two records, the earlier
    one's ``ack`` and this ``append``.
``log-duplicate``
    One ``retried`` append (witness: the record's first append and this one); and one
    (partition, offset) where only one record was acknowledged or read, an acknowledged
    record that was never appended there (witness: its first append and the first read
    there).
``stale``
    Entity sinks (``SinkKind.ENTITY``) only, in a settled run. The truth per key is the last
    acknowledged non-poison record with that key in each partition (by the offset of its
    first append). Each key's final row (its last ``observe`` in the sink) must come from
    one of them (``record_id``); a row of an earlier record with that key is one occurrence.
    Witness: the row's record, the key's last record in the row's partition (else the first
    of them by id), the ``observe``, that record's ``ack`` and the row's ``emit`` events.
    A key with acknowledged records and no row is ``lost`` (one per key, the record with
    the latest ``ack``); a row whose record is not acknowledged, is poison or has another
    key is ``unexpected``. Entity rows are not effects: the ``lost``/``duplicate`` rules of
    log sinks do not count them (rewriting a row is what an upsert is for).
``offset-ahead``
    (a) A ``commit`` of offset ``c`` for partition ``p`` with ``c > h + 1``, ``h`` the highest
    offset of ``p`` read by any process before it (``c > 0`` when nothing was read yet).
    Witness: the commit, the read of ``h`` if any, the unread records claimed done.
    (b) For each record with a ``lost`` effect, the first ``commit`` of its partition with an
    offset above the record's: the offset moved past a record whose effect never became
    visible. Witness: the commit and the record.
``offset-regression``
    The stored offset per partition is set by each ``commit`` and by each ``rollback`` (null:
    none). A ``commit`` below the stored offset is one occurrence. Witness: the commit and the
    event that had set the stored offset.

**Verdict** (:mod:`harness.check.policy`, shared with the Spark checker). ``duplicate``,
``offset-regression``, ``log-duplicate`` and ``nonmonotonic-poll`` break exactly-once and
are tolerated (listed in
:attr:`Verdict.tolerated`) under at-least-once; every other anomaly (``nonmonotonic-send``
too: a reorder gives no record twice) breaks both guarantees
(count-mismatch as above); witness sentences are :mod:`harness.check.wording`'s. The status
is INVALID when any anomaly breaks the guarantee (``reasons`` is then empty). Otherwise it
is UNKNOWN when the history fails
:func:`~harness.check.validate.validate` (then nothing is checked: the reasons are its
problems and there are no anomalies), when the ``end`` detail is not ``complete`` (the reason
is that detail) or when there is no ``drain`` event; otherwise VALID.

**Stats**: ``events``, ``appended`` and ``acknowledged`` records, ``observed_outputs``
(``observe`` events of log sinks), ``expected_effects`` (of acknowledged non-poison records;
0 without a log sink), ``duplicates``
(extra copies) and ``lost`` (missing effects), whatever the guarantee; when the history fails
validation, every stat but ``events`` is 0.

**Witnesses** are chosen by :attr:`Witness.sort_key` (earliest events first, then smallest
record ids), at most :data:`MAX_WITNESSES` per anomaly, so a history always gets the same ones.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from harness.check import wording
from harness.check.policy import Finding, assemble, best, unknown, witness
from harness.check.validate import validate
from harness.check.verdict import (
    MAX_WITNESSES,
    AnomalyKind,
    Guarantee,
    Verdict,
    Witness,
    guarantee_of,
)
from harness.check.wording import NO_DRAIN_REASON
from harness.history.events import (
    POISON,
    RETRIED,
    Aggregate,
    EndDetail,
    Event,
    EventKind,
    History,
    ReadDetail,
    SinkKind,
)

__all__ = ["NO_DRAIN_REASON", "REDELIVERED", "check"]

REDELIVERED: Final = ReadDetail.REDELIVERED.value
"""``read`` detail of a duplicate delivery injected by the schedule."""

_K = EventKind


def check(history: History, guarantee: Guarantee | str) -> Verdict:
    """Judge ``history`` against ``guarantee`` (a :class:`Guarantee` or its string,
    ``"exactly-once"``) by the rules of this module's docstring.

    Never raises for a bad history (it is UNKNOWN, with :func:`validate`'s problems as
    reasons); raises :class:`~harness.settings.BadSetting` (a ``ConfigError``) naming the
    choices when ``guarantee`` is neither.
    """
    guarantee = guarantee_of(guarantee)
    problems = validate(history)
    if problems:
        events = getattr(history, "events", None)
        return unknown(guarantee, problems, len(events) if isinstance(events, Sequence) else 0)

    facts = _Facts(history)
    end = history.events[-1].detail
    # Missing effects are only a loss once the processor was given every chance to catch
    # up; in a run that did not drain to completion they are merely not there *yet*.
    settled = facts.drained and end == EndDetail.COMPLETE.value
    found: dict[AnomalyKind, _Occurrences] = defaultdict(_Occurrences)
    over_counts = _Occurrences()
    lost_records: dict[str, Event] = {}
    expected_effects = 0
    if facts.has_log_sink:
        expected_effects = _check_effects(facts, found, lost_records, settled)
    for sink in sorted(s for s, spec in history.meta.sinks.items() if spec.kind is SinkKind.ENTITY):
        _check_entity(facts, sink, found, lost_records, settled)
    _check_aggregates(facts, found[AnomalyKind.COUNT_MISMATCH], over_counts, settled)
    _check_order(facts, found[AnomalyKind.NONMONOTONIC])
    _check_skips(facts, found[AnomalyKind.SKIP], found[AnomalyKind.NONMONOTONIC_POLL])
    _check_log(facts, found[AnomalyKind.INCONSISTENT_OFFSETS], found[AnomalyKind.LOG_DUPLICATE])
    _check_sends(facts, found[AnomalyKind.NONMONOTONIC_SEND])
    _check_offsets(
        facts, lost_records, found[AnomalyKind.OFFSET_AHEAD], found[AnomalyKind.OFFSET_REGRESSION]
    )
    findings = [occurrences.finding(kind) for kind, occurrences in found.items()]
    findings.append(over_counts.finding(AnomalyKind.COUNT_MISMATCH, over=True))
    return assemble(
        guarantee,
        findings,
        end_detail=end,
        drained=facts.drained,
        stats={
            "events": len(history.events),
            "appended": len(facts.appends),
            "acknowledged": len(facts.acks),
            "observed_outputs": len(facts.log_observes),
            "expected_effects": expected_effects,
            "duplicates": found[AnomalyKind.DUPLICATE].count,
            "lost": found[AnomalyKind.LOST].count,
        },
    )


class _Occurrences:
    """Counts occurrences exactly and keeps the first :data:`MAX_WITNESSES` witnesses."""

    __slots__ = ("_witnesses", "count")

    def __init__(self) -> None:
        self.count = 0
        self._witnesses: list[Witness] = []

    def add(self, found: Witness, *, weight: int = 1) -> None:
        self.count += weight
        self._witnesses.append(found)
        if len(self._witnesses) > 8 * MAX_WITNESSES:
            self._witnesses = list(best(self._witnesses))

    def finding(self, kind: AnomalyKind, *, over: bool = False) -> Finding:
        return Finding(kind, self.count, best(self._witnesses), over)


@dataclass(slots=True)
class _Facts:
    """Indexes over a validated history, built in one pass."""

    history: History
    appends: dict[str, Event] = field(default_factory=dict)
    acks: dict[str, int] = field(default_factory=dict)
    """record id -> index of its first ack (of a record whose send was indeterminate and
    that a reader saw: of its first ``indeterminate`` event)."""
    places: dict[str, set[tuple[str, int]]] = field(default_factory=dict)
    """record id -> the (partition, offset) of each of its appends."""
    retried: list[Event] = field(default_factory=list)
    """The appends of a producer's retry (``retried``)."""
    held: dict[tuple[str, int], dict[str, int]] = field(default_factory=dict)
    """(partition, offset) -> the records acknowledged or read there -> the first such event."""
    partition_offsets: dict[str, list[int]] = field(default_factory=dict)
    partition_records: dict[str, list[str]] = field(default_factory=dict)
    last_read: dict[str, int] = field(default_factory=dict)
    last_emit: dict[str, int] = field(default_factory=dict)
    emitted_parts: dict[str, set[int]] = field(default_factory=dict)
    emits_by_output: dict[int, list[Event]] = field(default_factory=dict)
    aborts: dict[int, int] = field(default_factory=dict)
    """txn -> index of its first abort."""
    log_observes: list[Event] = field(default_factory=list)
    entity_observes: dict[str, dict[str, Event]] = field(default_factory=dict)
    """entity sink -> key -> last observe (the key's final row)."""
    table_observes: dict[str, dict[str, Event]] = field(default_factory=dict)
    """table sink -> key -> last observe."""
    drained: bool = False
    has_log_sink: bool = False
    owed: dict[str, tuple[list[int], list[tuple[int, str]]]] | None = None
    """partition -> the offsets of its acknowledged records' appends, sorted, and each one's
    (append index, record id) in that order (built when a skip rule first asks)."""

    def __post_init__(self) -> None:
        sinks = self.history.meta.sinks
        self.has_log_sink = any(spec.kind is SinkKind.LOG for spec in sinks.values())
        indeterminate: dict[str, int] = {}
        seen: set[str] = set()
        for event in self.history.events:
            kind = event.kind
            if kind is _K.APPEND:
                assert event.record_id is not None and event.partition is not None
                assert event.offset is not None
                self.appends.setdefault(event.record_id, event)  # a resend is the same record
                place = (event.partition, event.offset)
                self.places.setdefault(event.record_id, set()).add(place)
                if event.detail == RETRIED:
                    self.retried.append(event)
                self.partition_offsets.setdefault(event.partition, []).append(event.offset)
                self.partition_records.setdefault(event.partition, []).append(event.record_id)
            elif kind is _K.ACK:
                assert event.record_id is not None
                self.acks.setdefault(event.record_id, event.index)
                self._hold(event)
            elif kind is _K.INDETERMINATE:
                assert event.record_id is not None
                indeterminate.setdefault(event.record_id, event.index)
            elif kind is _K.READ:
                assert event.record_id is not None
                self.last_read[event.record_id] = event.index
                seen.add(event.record_id)
                self._hold(event)
            elif kind is _K.EMIT:
                assert event.output_id is not None
                self.emits_by_output.setdefault(event.output_id, []).append(event)
                if event.record_id is not None:
                    assert event.part is not None and event.parts is not None
                    self.last_emit[event.record_id] = event.index
                    parts = self.emitted_parts.setdefault(event.record_id, set())
                    parts.add(event.part)
                    parts.update(range(event.parts))
            elif kind is _K.TXN_ABORT:
                assert event.txn is not None
                self.aborts.setdefault(event.txn, event.index)
            elif kind is _K.DRAIN:
                self.drained = True
            elif kind is _K.OBSERVE:
                assert event.sink is not None
                if event.record_id is not None:
                    seen.add(event.record_id)
                sink_kind = sinks[event.sink].kind
                if sink_kind is SinkKind.LOG:
                    self.log_observes.append(event)
                elif sink_kind is SinkKind.ENTITY:
                    assert event.key is not None
                    self.entity_observes.setdefault(event.sink, {})[event.key] = event
                else:
                    assert event.key is not None
                    self.table_observes.setdefault(event.sink, {})[event.key] = event

        # a send whose answer never came is owed only if a reader saw the record
        for record_id, index in indeterminate.items():
            if record_id in seen and record_id not in self.acks:
                self.acks[record_id] = index

    def _hold(self, event: Event) -> None:
        assert event.partition is not None and event.offset is not None
        assert event.record_id is not None
        there = self.held.setdefault((event.partition, event.offset), {})
        there.setdefault(event.record_id, event.index)

    def is_poison(self, record_id: str) -> bool:
        return self.appends[record_id].detail == POISON

    def parts_of(self, record_id: str) -> int:
        """How many effects ``record_id`` has: parts ``0 .. n - 1`` (its emits declare them;
        a part is always below its emit's ``parts``, so they are contiguous)."""
        return len(self.expected_parts(record_id))

    def expected_parts(self, record_id: str) -> list[int]:
        return sorted({0} | self.emitted_parts.get(record_id, set()))

    def owed_between(self, partition: str, low: int, high: int) -> tuple[list[str], int]:
        """The first :data:`MAX_WITNESSES` acknowledged records appended at offsets
        ``low <= o < high`` of ``partition`` (in append order), and how many there are: what
        a reader that jumps from ``low`` to ``high`` skips."""
        if self.owed is None:
            self.owed = _owed_index(self)
        offsets, appended = self.owed.get(partition, ([], []))
        start, stop = bisect_left(offsets, low), bisect_left(offsets, high)
        chosen = heapq.nsmallest(MAX_WITNESSES, appended[start:stop])
        return [record_id for _, record_id in chosen], stop - start

    def records_between(self, partition: str, low: int, high: int) -> tuple[list[str], int]:
        """The first :data:`MAX_WITNESSES` appended records at offsets ``low <= o < high`` of
        ``partition``, and how many there are (a binary search over the appends in history
        order, which the Spark checker replays exactly: appends out of offset order, as a
        ``nonmonotonic-send`` has them, only change which records a witness names)."""
        offsets = self.partition_offsets.get(partition, [])
        start = bisect_left(offsets, low)
        stop = bisect_left(offsets, high)
        records = self.partition_records.get(partition, [])
        return records[start : min(stop, start + MAX_WITNESSES)], max(0, stop - start)


def _owed_index(facts: _Facts) -> dict[str, tuple[list[int], list[tuple[int, str]]]]:
    """:attr:`_Facts.owed`: every append of an acknowledged record, by partition and offset."""
    places: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for event in facts.history.events:
        if event.kind is _K.APPEND and event.record_id in facts.acks:
            assert event.partition is not None and event.offset is not None
            places[event.partition].append((event.offset, event.index, event.record_id))
    index = {}
    for partition, rows in places.items():
        rows.sort()
        index[partition] = ([o for o, _, _ in rows], [(i, r) for _, i, r in rows])
    return index


def _entity_truth(facts: _Facts) -> dict[str, dict[str, str]]:
    """key -> partition -> the last acknowledged non-poison record with that key there (by
    offset of its first append)."""
    latest: dict[str, dict[str, str]] = {}
    for record_id in facts.acks:
        if facts.is_poison(record_id):
            continue
        append = facts.appends[record_id]
        assert append.key is not None and append.partition is not None
        assert append.offset is not None
        there = latest.setdefault(append.key, {})
        known = there.get(append.partition)
        if known is None or facts.appends[known].offset < append.offset:  # type: ignore[operator]
            there[append.partition] = record_id
    return latest


def _check_entity(
    facts: _Facts,
    sink: str,
    found: dict[AnomalyKind, _Occurrences],
    lost_records: dict[str, Event],
    settled: bool,
) -> None:
    """stale, lost and unexpected over entity sink ``sink``'s final rows: each key's row must
    come from the key's last acknowledged record (in its partition's order; a key spread
    over partitions accepts the last of any of them)."""
    latest = _entity_truth(facts)
    rows = facts.entity_observes.get(sink, {})
    for key, row in sorted(rows.items()):
        record_id = row.record_id
        append = facts.appends.get(record_id) if record_id is not None else None
        if (
            append is None
            or record_id not in facts.acks
            or facts.is_poison(record_id)
            or append.key != key
        ):
            shown_key = None if append is None or record_id not in facts.acks else append.key
            detail = wording.entity_misplaced(sink, key, record_id, shown_key)
            found[AnomalyKind.UNEXPECTED].add(
                witness(() if record_id is None else (record_id,), [row.index], detail)
            )
            continue
        candidates = latest.get(key, {})
        if not settled or record_id in candidates.values():
            continue
        assert append.partition is not None and append.offset is not None
        newest = candidates.get(append.partition) or min(candidates.values())
        newest_append = facts.appends[newest]
        assert newest_append.offset is not None and row.output_id is not None
        emits = [e.index for e in facts.emits_by_output.get(row.output_id, ())]
        after = bool(emits) and max(emits) > facts.last_emit.get(newest, -1) >= 0
        detail = wording.stale(
            sink,
            key,
            record_id,
            append.offset,
            newest,
            newest_append.offset,
            append.partition,
            after,
        )
        events = [row.index, facts.acks[newest], *emits]
        found[AnomalyKind.STALE].add(witness((record_id, newest), events, detail))
    if not settled:
        return
    for key, there in sorted(latest.items()):
        if key in rows:
            continue
        record_id = max(there.values(), key=lambda r: facts.acks[r])
        ack = facts.acks[record_id]
        lost_records[record_id] = facts.appends[record_id]
        context = [ack, facts.last_read.get(record_id), facts.last_emit.get(record_id)]
        detail = wording.entity_lost(sink, key, record_id, ack)
        found[AnomalyKind.LOST].add(witness((record_id,), context, detail))


def _check_effects(
    facts: _Facts,
    found: dict[AnomalyKind, _Occurrences],
    lost_records: dict[str, Event],
    settled: bool,
) -> int:
    """lost, duplicate, unexpected and aborted-read, over the log sinks' outputs; fills
    ``lost_records`` and returns the number of expected effects."""
    observed: dict[tuple[str, int], list[Event]] = defaultdict(list)
    unexpected = found[AnomalyKind.UNEXPECTED]
    for event in facts.log_observes:
        assert event.output_id is not None and event.part is not None
        odd = _unaccounted(facts, event)
        if odd is not None:
            unexpected.add(odd)
        else:
            assert event.record_id is not None
            observed[(event.record_id, event.part)].append(event)
        _check_aborted(facts, event, found[AnomalyKind.ABORTED_READ])

    lost = found[AnomalyKind.LOST]
    expected_effects = 0
    for record_id, ack_index in facts.acks.items():
        if facts.is_poison(record_id):
            continue
        parts = facts.expected_parts(record_id)
        expected_effects += len(parts)
        if not settled:
            continue
        context = [ack_index, facts.last_read.get(record_id), facts.last_emit.get(record_id)]
        for part in parts:
            if (record_id, part) not in observed:
                lost_records[record_id] = facts.appends[record_id]
                lost.add(witness((record_id,), context, wording.lost(record_id, part, ack_index)))

    duplicate = found[AnomalyKind.DUPLICATE]
    for (record_id, part), copies in observed.items():
        if len(copies) < 2:
            continue
        outputs = [copy.output_id for copy in copies]
        events = [copy.index for copy in copies]
        for output_id in outputs:
            assert output_id is not None
            events.extend(emit.index for emit in facts.emits_by_output.get(output_id, ()))
        detail = wording.duplicate(record_id, part, outputs)  # type: ignore[arg-type]
        duplicate.add(witness((record_id,), events, detail), weight=len(copies) - 1)
    return expected_effects


def _unaccounted(facts: _Facts, event: Event) -> Witness | None:
    """The ``unexpected`` witness of a log-sink output its record's rules do not allow:
    no record, a record never appended or never acknowledged, a poison record (it must
    have no effect), or a part its record's emits do not declare; None when it is allowed."""
    record_id, output_id, sink = event.record_id, event.output_id, event.sink
    if record_id is None:
        return witness((), (event.index,), wording.unexpected_no_record(output_id, sink))
    append = facts.appends.get(record_id)
    if append is None:
        detail = wording.unexpected_not_appended(output_id, sink, record_id)
        return witness((record_id,), (event.index,), detail)
    if record_id not in facts.acks:
        detail = wording.unexpected_unacknowledged(output_id, sink, record_id, append.index)
        return witness((record_id,), (event.index, append.index), detail)
    if facts.is_poison(record_id):
        detail = wording.unexpected_poison(output_id, sink, record_id, append.index)
        return witness((record_id,), (event.index, append.index), detail)
    assert event.part is not None
    parts = facts.parts_of(record_id)
    if event.part >= parts:
        detail = wording.unexpected_part(output_id, sink, record_id, event.part, parts)
        return witness((record_id,), (event.index, append.index), detail)
    return None


def _check_aborted(facts: _Facts, event: Event, aborted: _Occurrences) -> None:
    """aborted-read: the observed output was emitted in a transaction that aborted."""
    assert event.output_id is not None
    for emit in facts.emits_by_output.get(event.output_id, ()):
        if emit.txn is not None and emit.txn in facts.aborts:
            abort = facts.aborts[emit.txn]
            detail = wording.aborted_read(event.output_id, event.sink, emit.index, emit.txn, abort)
            records = () if event.record_id is None else (event.record_id,)
            aborted.add(witness(records, (event.index, emit.index, abort), detail))
            break


def _check_aggregates(
    facts: _Facts, under: _Occurrences, over: _Occurrences, settled: bool
) -> None:
    """count-mismatch over the table sinks that declare an aggregate, split by side (the
    observed value below or above the expected one; the policy decides what each breaks)."""
    meta = facts.history.meta
    aggregated = sorted(
        name
        for name, spec in meta.sinks.items()
        if spec.kind is SinkKind.TABLE and spec.aggregate in (Aggregate.COUNT, Aggregate.SUM)
    )
    if not aggregated:
        return
    counts: dict[str, int] = defaultdict(int)
    sums: dict[str, int] = defaultdict(int)
    records: dict[str, list[str]] = defaultdict(list)
    for record_id in facts.acks:
        if facts.is_poison(record_id):
            continue
        append = facts.appends[record_id]
        assert append.key is not None and append.value is not None
        counts[append.key] += 1
        sums[append.key] += append.value
        records[append.key].append(record_id)

    for sink in aggregated:
        expected_by_key = counts if meta.sinks[sink].aggregate is Aggregate.COUNT else sums
        observes = facts.table_observes.get(sink, {})
        for key in sorted(set(expected_by_key) | set(observes)):
            expected = expected_by_key.get(key, 0)
            observe = observes.get(key)
            value = None if observe is None else observe.value
            observed = 0 if value is None else value
            if observed == expected or (observed < expected and not settled):
                continue
            found = witness(
                sorted(records.get(key, ()))[:MAX_WITNESSES],
                () if observe is None else (observe.index,),
                wording.count_mismatch(sink, key, expected, value),
            )
            (over if observed > expected else under).add(found)


def _check_order(facts: _Facts, nonmonotonic: _Occurrences) -> None:
    """nonmonotonic, over the log sinks declared ordered."""
    sinks = facts.history.meta.sinks
    seen: set[tuple[str, str, int]] = set()
    last: dict[tuple[str, str], tuple[int, str, int]] = {}
    for event in facts.log_observes:
        assert event.sink is not None and event.part is not None
        if not sinks[event.sink].ordered or event.record_id is None:
            continue
        append = facts.appends.get(event.record_id)
        if append is None:
            continue
        effect = (event.sink, event.record_id, event.part)
        if effect in seen:
            continue
        seen.add(effect)
        assert append.partition is not None and append.offset is not None
        stream = (event.sink, append.partition)
        previous = last.get(stream)
        offset = _place_after(facts, event.record_id, append, previous)
        if previous is not None and offset < previous[0]:
            detail = wording.nonmonotonic(
                event.sink,
                event.record_id,
                offset,
                append.partition,
                previous[1],
                previous[0],
            )
            nonmonotonic.add(
                witness((previous[1], event.record_id), (previous[2], event.index), detail)
            )
        last[stream] = (offset, event.record_id, event.index)


def _place_after(
    facts: _Facts, record_id: str, append: Event, previous: tuple[int, str, int] | None
) -> int:
    """The offset an ordered output of ``record_id`` stands for: its first append's, or, for
    a record the log holds at several offsets of that partition (a resend, a retry), the
    first of them at or after the previous output's (a reader that took the later copy
    read in order), else the last of them."""
    assert append.offset is not None
    offsets = sorted(o for p, o in facts.places[record_id] if p == append.partition)
    if len(offsets) < 2 or previous is None:
        return append.offset
    after = [o for o in offsets if o >= previous[0]]
    return after[0] if after else offsets[-1]


def _check_log(facts: _Facts, inconsistent: _Occurrences, duplicate: _Occurrences) -> None:
    """inconsistent-offsets (a place holding two records) and log-duplicate (a producer's
    retry; an acknowledged record read where it was never appended and where no other
    record is)."""
    for (partition, offset), holders in facts.held.items():
        if len(holders) > 1:
            ids = sorted(holders)
            detail = wording.inconsistent_offsets(partition, offset, ids)
            inconsistent.add(witness(ids, holders.values(), detail))
    for append in facts.retried:
        assert append.record_id is not None and append.partition is not None
        assert append.offset is not None
        first = facts.appends[append.record_id].index
        detail = wording.log_duplicate_retried(
            append.record_id, append.offset, append.partition, first
        )
        duplicate.add(witness((append.record_id,), (first, append.index), detail))
    for (partition, offset), holders in facts.held.items():
        if len(holders) != 1:
            continue
        ((record_id, index),) = holders.items()
        # a record whose write failed is in the log once at most, wherever it is read
        if (partition, offset) in facts.places[record_id] or record_id not in facts.acks:
            continue
        read = facts.history.events[index]
        assert read.process is not None
        first = facts.appends[record_id].index
        detail = wording.log_duplicate_read(record_id, read.process, offset, partition, first)
        duplicate.add(witness((record_id,), (first, index), detail))


def _answered(facts: _Facts) -> set[tuple[str, str, int]]:
    """The places (record id, partition, offset) of the sends that are in the log: the
    acknowledged ones, and those of a send without an answer whose record a reader saw."""
    events = facts.history.events
    answered: set[tuple[str, str, int]] = set()
    for event in events:
        if event.kind is _K.ACK or (
            event.kind is _K.INDETERMINATE
            and event.record_id in facts.acks
            and events[facts.acks[event.record_id]].kind is _K.INDETERMINATE
        ):
            assert event.record_id is not None and event.partition is not None
            assert event.offset is not None
            answered.add((event.record_id, event.partition, event.offset))
    return answered


def _check_sends(facts: _Facts, reordered: _Occurrences) -> None:
    """nonmonotonic-send: per producer (an append's ``process``; null: the upstream
    producer) and partition, a send that is in the log, made after an earlier send of the
    producer there was acknowledged (the latest such, by append order), at a lower offset."""
    answered = _answered(facts)
    placed: dict[tuple[str, str, int], Event] = {}
    latest: dict[tuple[int | None, str], tuple[Event, int]] = {}
    for event in facts.history.events:
        if event.kind is not _K.APPEND and event.kind is not _K.ACK:
            continue
        assert event.record_id is not None and event.partition is not None
        assert event.offset is not None
        place = (event.record_id, event.partition, event.offset)
        if event.kind is _K.ACK:
            append = placed[place]
            stream = (append.process, event.partition)
            known = latest.get(stream)
            if known is None or append.index > known[0].index:
                latest[stream] = (append, event.index)
            continue
        placed.setdefault(place, event)
        before = latest.get((event.process, event.partition))
        if before is None or place not in answered:
            continue
        earlier, acked_at = before
        assert earlier.record_id is not None and earlier.offset is not None
        if event.offset < earlier.offset:
            detail = wording.nonmonotonic_send(
                event.record_id,
                event.offset,
                event.partition,
                event.index,
                earlier.record_id,
                earlier.offset,
                acked_at,
                event.process,
            )
            records = (event.record_id, earlier.record_id)
            reordered.add(witness(records, (acked_at, event.index), detail))


def _check_skips(facts: _Facts, skip: _Occurrences, backward: _Occurrences) -> None:
    """skip and nonmonotonic-poll, over each process's reads of each partition."""
    truncated: dict[str, int] = {}
    frontier: dict[str, int] = {}
    fetched: dict[tuple[int, str], tuple[int, int | None]] = {}
    previous: dict[tuple[int, str], tuple[int, int]] = {}
    for event in facts.history.events:
        kind = event.kind
        if kind is _K.READ:
            assert event.partition is not None and event.offset is not None
            highest = frontier.get(event.partition, -1)
            frontier[event.partition] = max(highest, event.offset)
            if event.detail == REDELIVERED:
                continue
            _skip_of(facts, skip, backward, event, highest, truncated, fetched, previous)
        elif kind is _K.TRUNCATE:
            assert event.partition is not None and event.offset is not None
            truncated[event.partition] = event.offset
        elif kind is _K.FETCH:
            assert event.process is not None and event.partition is not None
            fetched[(event.process, event.partition)] = (event.index, event.offset)


def _skip_of(
    facts: _Facts,
    skip: _Occurrences,
    backward: _Occurrences,
    event: Event,
    highest: int,
    truncated: Mapping[str, int],
    fetched: dict[tuple[int, str], tuple[int, int | None]],
    previous: dict[tuple[int, str], tuple[int, int]],
) -> None:
    """The skip or backward poll (if any) of one ``read``; ``highest``: the highest offset of
    its partition any process read before it (-1: none)."""
    assert event.process is not None and event.partition is not None
    assert event.offset is not None
    stream = (event.process, event.partition)
    offset = event.offset
    fetch = fetched.pop(stream, None)
    if fetch is not None:
        before, fetch_offset = fetch
        since = wording.since_fetch(fetch_offset, before)
        low = 0 if fetch_offset is None else fetch_offset
    elif stream in previous:
        last_offset, before = previous[stream]
        low = last_offset + 1
        since = wording.since_read(last_offset, before)
        if offset <= last_offset:
            detail = wording.nonmonotonic_poll(
                event.process, offset, event.partition, last_offset, before
            )
            backward.add(witness((), (before, event.index), detail))
    else:
        low = offset
    # records below the log's start cannot be read: whether they were done before
    # being truncated is for the lost and offset-ahead rules to say; records at or
    # below the highest offset read before are behind the reading frontier: a
    # reader resuming past them (after an output that covers them, say) jumps
    # nothing new, and whether they were done is for lost and duplicate to say
    low = max(low, truncated.get(event.partition, 0), highest + 1)
    records, skipped = facts.owed_between(event.partition, low, offset) if offset > low else ([], 0)
    if skipped:
        detail = wording.skip(event.process, offset, event.partition, since, low, skipped)
        skip.add(witness(records, (before, event.index), detail))
    previous[stream] = (offset, event.index)


def _check_offsets(
    facts: _Facts,
    lost_records: Mapping[str, Event],
    ahead: _Occurrences,
    regression: _Occurrences,
) -> None:
    """offset-ahead and offset-regression, over commits and rollbacks."""
    highest_read: dict[str, tuple[int, int]] = {}
    stored: dict[str, tuple[int | None, int]] = {}
    commits: dict[str, list[Event]] = defaultdict(list)
    for event in facts.history.events:
        kind = event.kind
        if kind is _K.READ:
            assert event.partition is not None and event.offset is not None
            top = highest_read.get(event.partition)
            if top is None or event.offset > top[0]:
                highest_read[event.partition] = (event.offset, event.index)
        elif kind is _K.ROLLBACK:
            assert event.partition is not None
            stored[event.partition] = (event.offset, event.index)
        elif kind is _K.COMMIT:
            assert event.partition is not None and event.offset is not None
            partition, offset = event.partition, event.offset
            commits[partition].append(event)
            top = highest_read.get(partition)
            limit = 0 if top is None else top[0] + 1
            if offset > limit:
                records, _ = facts.records_between(partition, limit, offset)
                assert event.process is not None
                detail = wording.ahead_of_reads(
                    event.process,
                    offset,
                    partition,
                    None if top is None else top[0],
                    None if top is None else top[1],
                )
                events = [event.index] if top is None else [top[1], event.index]
                ahead.add(witness(records, events, detail))
            previous = stored.get(partition)
            if previous is not None and previous[0] is not None and offset < previous[0]:
                assert event.process is not None
                detail = wording.regression(
                    event.process, offset, partition, previous[0], previous[1]
                )
                regression.add(witness((), (previous[1], event.index), detail))
            stored[partition] = (offset, event.index)

    running_max: dict[str, list[int]] = {}
    for partition, partition_commits in commits.items():
        maxima: list[int] = []
        for commit in partition_commits:
            assert commit.offset is not None
            maxima.append(commit.offset if not maxima else max(maxima[-1], commit.offset))
        running_max[partition] = maxima
    for record_id, append in lost_records.items():
        assert append.partition is not None and append.offset is not None
        maxima = running_max.get(append.partition, [])
        position = bisect_right(maxima, append.offset)
        if position == len(maxima):
            continue
        commit = commits[append.partition][position]
        assert commit.process is not None and commit.offset is not None
        detail = wording.past_lost(
            commit.process, commit.offset, append.partition, record_id, append.offset
        )
        ahead.add(witness((record_id,), (commit.index,), detail))
