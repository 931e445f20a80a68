"""The peer's unit histories, translated by hand into this project's history form (issue 31).

Jepsen's Kafka workload (jepsen-io/jepsen, ``jepsen/test/jepsen/tests/kafka_test.clj``, the
checker in ``jepsen/src/jepsen/tests/kafka.clj``) tests its checker on small hand-written
histories of sends (with the offsets their acknowledgements gave) and polls (with the
offsets they returned). Each test below rebuilds one of those histories from what the peer's
test describes, in our form, and asserts our verdict and anomaly names. Each docstring says
which peer test it is, what the peer expects, what we say, and where and why that differs.

How the forms map:

* a send that returned ``ok`` with an offset is an ``append`` then an ``ack`` at that offset;
  one that returned ``info`` (no answer) an ``append`` then an ``indeterminate`` event; one
  that ``fail``\\ed an ``append`` with no ``ack`` (its write failed);
* a poll that returned ``[offset value]`` pairs is one ``read`` per pair, by the polling
  process, in the order returned;
* an ``assign``/``subscribe`` that moves a consumer off a key and back makes it resume from a
  position it is told: a ``fetch`` (the committed offset read again, or a seek);
* the peer's values are our record ids; its keys are our partitions.

Names: the peer's ``poll-skip`` and ``int-poll-skip`` are our ``skip``; its
``nonmonotonic-poll`` and ``int-nonmonotonic-poll`` our ``nonmonotonic-poll``; its
``inconsistent-offsets`` and ``nonmonotonic-send`` ours; its ``duplicate`` (a value at two
offsets of the log) our ``log-duplicate`` (our ``duplicate`` is an effect seen twice
downstream); its ``G1a`` (a read of a failed write) our ``unexpected`` once the read has an
effect; its ``lost-write`` (an acknowledged write a reader went past) our ``skip`` of the
reader, and ``lost`` when the reader's effects are checked.

Where a history needs the gap-aware ``skip`` (offsets that hold no record, as Kafka's
transaction markers do), that is issue 31 item 1, another change: those tests accept a
``skip`` today only if it names no appended record (:func:`gap_only_skips`), so they hold
before and after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.check import AnomalyKind, Guarantee, Status, Verdict, check
from harness.history.events import (
    Event,
    EventKind,
    FetchDetail,
    History,
    HistoryMeta,
    SinkKind,
    SinkSpec,
)

K = EventKind
ALO, EO = Guarantee.AT_LEAST_ONCE, Guarantee.EXACTLY_ONCE
SKIP = AnomalyKind.SKIP


@dataclass
class Log:
    """A translated history: sends and polls over partitions ``x`` and ``y``; ``sink``
    makes every read emit one output to the log sink ``out`` (observed after the drain
    unless ``hide`` names its output)."""

    sink: bool = False
    events: list[Event] = field(default_factory=list)
    outputs: list[tuple[int, str]] = field(default_factory=list)

    def add(self, kind: EventKind, **fields: Any) -> int:
        self.events.append(Event(len(self.events), kind, **fields))
        return len(self.events) - 1

    def send(
        self,
        value: str,
        partition: str,
        offset: int,
        outcome: str = "ok",
        producer: int | None = None,
    ) -> None:
        """A send of ``value`` the log placed at ``offset``; ``outcome`` ok, info or fail;
        ``producer``: the sending process (null: the one upstream producer)."""
        self.add(
            K.APPEND,
            process=producer,
            partition=partition,
            offset=offset,
            record_id=value,
            key="k",
            value=1,
        )
        if outcome == "ok":
            self.add(K.ACK, partition=partition, offset=offset, record_id=value)
        elif outcome == "info":
            self.add(K.INDETERMINATE, partition=partition, offset=offset, record_id=value)

    def retry(self, value: str, partition: str, offset: int) -> None:
        """The producer's own retry wrote ``value`` again at ``offset`` (acknowledged)."""
        self.add(
            K.APPEND,
            partition=partition,
            offset=offset,
            record_id=value,
            key="k",
            value=1,
            detail="retried",
        )
        self.add(K.ACK, partition=partition, offset=offset, record_id=value)

    def poll(self, process: int, partition: str, *pairs: tuple[int, str], txn: int | None = None):  # type: ignore[no-untyped-def]
        """One poll returning ``(offset, value)`` pairs of ``partition``."""
        for offset, value in pairs:
            self.add(K.READ, process=process, partition=partition, offset=offset, record_id=value)
            if self.sink:
                output = len(self.outputs)
                self.add(
                    K.EMIT,
                    process=process,
                    sink="out",
                    output_id=output,
                    record_id=value,
                    part=0,
                    parts=1,
                    txn=txn,
                )
                self.outputs.append((output, value))

    def fetch(self, process: int, partition: str, offset: int, *, seek: bool = False) -> None:
        detail = FetchDetail.SEEK.value if seek else None
        self.add(K.FETCH, process=process, partition=partition, offset=offset, detail=detail)

    def history(self, *, hide: frozenset[int] = frozenset(), settled: bool = True) -> History:
        events = list(self.events)
        if settled:
            events.append(Event(len(events), K.DRAIN))
            for output, value in self.outputs:
                if output not in hide:
                    events.append(
                        Event(
                            len(events),
                            K.OBSERVE,
                            sink="out",
                            output_id=output,
                            record_id=value,
                            part=0,
                        )
                    )
        detail = "complete" if settled else "incomplete: the peer's history ends here"
        events.append(Event(len(events), K.END, detail=detail))
        sinks = {"out": SinkSpec(SinkKind.LOG)} if self.sink else {}
        return History(HistoryMeta(partitions=("x", "y"), sinks=sinks), tuple(events))


def kinds(verdict: Verdict) -> dict[str, int]:
    """Every anomaly of ``verdict`` (failing and tolerated) by name, with its count."""
    return {a.kind.value: a.count for a in (*verdict.anomalies, *verdict.tolerated)}


def gap_only_skips(verdict: Verdict) -> dict[str, int]:
    """:func:`kinds` without a ``skip`` whose witnesses name no appended record: the
    offset-counting skip over a gap that issue 31 item 1 makes record-counting."""
    found = kinds(verdict)
    skips = [a for a in (*verdict.anomalies, *verdict.tolerated) if a.kind is SKIP]
    if skips and all(not w.record_ids for a in skips for w in a.witnesses):
        found.pop("skip")
    return found


def assert_only(verdict: Verdict, kind: AnomalyKind, *records: tuple[str, ...]) -> None:
    """``verdict`` has one anomaly, of ``kind``, witnessed by ``records`` (a gap-only
    ``skip`` aside, see :func:`gap_only_skips`)."""
    assert gap_only_skips(verdict) == {kind.value: len(records)}, verdict.summary()
    assert witness_records(verdict, kind) == list(records)


def witness_records(verdict: Verdict, kind: AnomalyKind) -> list[tuple[str, ...]]:
    return [
        w.record_ids
        for a in (*verdict.anomalies, *verdict.tolerated)
        if a.kind is kind
        for w in a.witnesses
    ]


# -- inconsistent-offsets-test ---------------------------------------------------------------


def test_an_unanswered_send_that_conflicts_with_an_acknowledged_one_is_no_conflict() -> None:
    """Peer: ``inconsistent-offsets-test`` "info conflicts", first half. Send 1 (x at 0,
    and y) gets no answer; send 2 puts another value at x offset 0 and is acknowledged.
    Peer: no inconsistent offsets, the unanswered send may not have committed. Ours: the
    same; an ``indeterminate`` record nobody saw is owed nothing and holds no offset:
    VALID under both guarantees."""
    log = Log()
    log.send("x1", "x", 0, "info")
    log.send("y1", "y", 0, "info")
    log.send("x2", "x", 0)
    for guarantee in Guarantee:
        verdict = check(log.history(), guarantee)
        assert verdict.status is Status.VALID, verdict.summary()


def test_an_unanswered_send_seen_by_a_reader_conflicts_with_the_acknowledged_one() -> None:
    """Peer: ``inconsistent-offsets-test``, second half: a poll sees send 1's value on y, so
    send 1 committed and its x value conflicts with send 2's at x offset 0: inconsistent
    offsets at x 0. Ours: ``inconsistent-offsets`` at x 0, with one difference: our sends are
    per record (Kafka acknowledges each record), so seeing y1 says nothing of x1; the
    translation has the reader see x1 at x 0 itself. The peer infers it from the
    transaction's atomicity, which our history has no form for (a transactional producer's
    batch would need its transaction id on each append)."""
    log = Log()
    log.send("x1", "x", 0, "info")
    log.send("y1", "y", 5, "info")
    log.send("x2", "x", 0)
    log.poll(2, "y", (5, "y1"))
    log.poll(3, "x", (0, "x1"))
    assert_only(check(log.history(), EO), AnomalyKind.INCONSISTENT_OFFSETS, ("x1", "x2"))
    assert check(log.history(), ALO).status is Status.INVALID


# -- g1a-test --------------------------------------------------------------------------------


def test_a_read_of_a_failed_send_is_unexpected() -> None:
    """Peer: ``g1a-test``: a send that failed, then a poll that returns its value: G1a.
    Ours: the reader's output of a record whose write failed is ``unexpected`` (an effect
    with no acknowledged record behind it), under both guarantees. Our name is about the
    output: without a sink to show the read's effect the read alone is no anomaly (the
    peer's checker has no downstream, so it names the read)."""
    log = Log(sink=True)
    log.send("v2", "x", 0, "fail")
    log.send("v3", "y", 0, "fail")
    log.poll(1, "x", (0, "v2"))
    for guarantee in Guarantee:
        verdict = check(log.history(), guarantee)
        assert kinds(verdict) == {"unexpected": 1}, verdict.summary()


# -- lost-write-test -------------------------------------------------------------------------


def test_a_reader_that_passes_acknowledged_writes_skips_them() -> None:
    """Peer: ``lost-write-test`` "consistent": a at 0, b at 1, d at 3 acknowledged, c sent
    without answer; a poll returns only c at 2, so a and b, below it, were lost. Ours: the
    reader started at the beginning (its fetch found no stored offset) and went to 2:
    ``skip`` naming a and b; c, unanswered but read, is owed and not unexpected. Without a
    sink (the peer's checker has none) ``lost`` is not assessed; d, above every read, is
    what the peer calls unseen, and here too nothing says it must have been read."""
    log = Log()
    log.send("a", "x", 0)
    log.send("b", "x", 1)
    log.send("c", "x", 2, "info")  # appended before d is acknowledged above it
    log.send("d", "x", 3)
    log.fetch(0, "x", 0)
    log.poll(0, "x", (2, "c"))
    assert_only(check(log.history(), ALO), SKIP, ("a", "b"))


def test_a_lost_write_under_an_offset_two_records_share() -> None:
    """Peer: ``lost-write-test`` "inconsistent": a acknowledged at 0, then b at 0 and c at 2
    in one acknowledged send; a poll returns b at 0 and c at 2: a is lost (and offset 0
    holds two values). Ours, with the reader's outputs checked: ``inconsistent-offsets`` at
    x 0 (a and b) and ``lost`` for a, whose effect never shows. Difference: offset 1 holds
    nothing, and today our ``skip`` counts offsets, so the reader's jump from 0 to 2 is a
    skip that names no record; issue 31 item 1 makes ``skip`` count records, after which it
    is gone (the peer says the same: "there is no offset 1")."""
    log = Log(sink=True)
    log.send("a", "x", 0)
    log.send("b", "x", 0)
    log.send("c", "x", 2)
    log.poll(0, "x", (0, "b"), (2, "c"))
    verdict = check(log.history(), ALO)
    assert gap_only_skips(verdict) == {"lost": 1, "inconsistent-offsets": 1}
    assert witness_records(verdict, AnomalyKind.LOST) == [("a",)]


def test_a_write_is_owed_once_a_reader_saw_it_even_if_its_send_got_no_answer() -> None:
    """Peer: ``lost-write-test`` "atomic": b's send got no answer; c's neither, and a poll
    of y returns c at 1. Without proof that b committed it is not lost; with proof (the
    peer's is a poll of a, sent with b in one transaction) b is a lost write. Ours, per
    record (see the inconsistent-offsets case): unseen, b is owed nothing: VALID; seen by a
    reader (process 2 reads it at y 0) it is owed, and when its effect never shows it is
    ``lost``. Difference: the proof must be b itself; the peer's inference from a
    transaction's atomicity has no form here (transaction ids on appends)."""
    unseen = Log(sink=True)
    unseen.send("b", "y", 0, "info")
    unseen.send("c", "y", 1, "info")
    unseen.fetch(3, "y", 1)
    unseen.poll(3, "y", (1, "c"))
    assert check(unseen.history(), ALO).status is Status.VALID

    seen = Log(sink=True)
    seen.send("b", "y", 0, "info")
    seen.send("c", "y", 1, "info")
    seen.poll(2, "y", (0, "b"))
    seen.fetch(3, "y", 1)
    seen.poll(3, "y", (1, "c"))
    assert_only(check(seen.history(hide=frozenset({0})), ALO), AnomalyKind.LOST, ("b",))


# -- poll-skip-test --------------------------------------------------------------------------


def _skipping_reader(between: list[tuple[int, int]] | None = None) -> Log:
    """Process 0 reads x 1, 2, then 4, then 7; c at 3 (read by process 1) and f at 6
    (acknowledged) exist; 5 may be a gap. ``between``: fetches (process 0's re-subscriptions,
    ``(offset, _)``) inserted before its reads of 4 and of 7. The appends are in the log's
    order (offsets ascending), as a recorder of a real broker writes them."""
    log = Log()
    for value, offset in (("a", 1), ("b", 2), ("c", 3), ("d", 4)):
        log.send(value, "x", offset, "info")
    log.send("f", "x", 6)  # the log's order: the peer's send of f, answered at 6
    log.send("g", "x", 7, "info")
    log.poll(0, "x", (1, "a"), (2, "b"))
    log.poll(1, "x", (3, "c"))
    if between:
        log.fetch(0, "x", between[0][0])
    log.poll(0, "x", (4, "d"))
    if between:
        log.fetch(0, "x", between[1][0])
    log.poll(0, "x", (7, "g"))
    return log


def test_polls_that_jump_over_known_records_skip_them() -> None:
    """Peer: ``poll-skip-test``: process 0 polls x 1, 2 then 4 then 7, while c at 3 and f
    at 6 are known: two poll skips, of c and of f. Ours: two ``skip``\\s, naming c and f
    (offset 5 holds no record and is named by no witness). Difference: one ``skip``, of f.
    c was read (by process 1) before process 0 jumped it, so it lies behind the partition's
    reading frontier: our processes are successive instances of one consumer, and a later
    one resuming past a record an earlier one read (after the output that covers it, as a
    processor resuming from its last output does) jumps nothing new; whether c was done is
    for ``lost`` and ``duplicate`` to say (here no sink: nothing owed). The peer's processes
    are independent consumers, each judged alone."""
    assert_only(check(_skipping_reader().history(), ALO), SKIP, ("f",))


def test_a_resubscription_in_between_forgives_the_jump() -> None:
    """Peer: ``poll-skip-test`` "with intermediate subscribe": a subscribe (or an assign)
    that leaves x out between the polls allows the skips; one that keeps x keeps them.
    Ours: a consumer that leaves x and comes back resumes where it is told, a ``fetch``;
    reads after it are judged from the fetched offset, so resuming at 4 and at 7 is no skip
    (VALID). A subscription that keeps x moves nothing and records nothing: the plain
    history above, two skips. Difference: our fetch carries the offset resumed from, so a
    resubscription that resumed below the next read would still be a skip; the peer forgives
    any jump after it."""
    verdict = check(_skipping_reader([(4, 0), (7, 0)]).history(), ALO)
    assert verdict.status is Status.VALID, verdict.summary()


def _transactional_reader(*, rewinds: bool) -> Log:
    """x holds 0..5 (acknowledged). Process 1 reads 0 in a committed transaction, then 1, 2
    in one that aborts; then, rewound to 1 (``rewinds``) or not, reads on."""
    log = Log(sink=True)
    for n in range(6):
        log.send(f"v{n}", "x", n)
    log.add(K.TXN_BEGIN, process=1, txn=1)
    log.poll(1, "x", (0, "v0"), txn=1)
    log.add(K.COMMIT, process=1, partition="x", offset=1)
    log.add(K.TXN_COMMIT, process=1, txn=1)
    log.add(K.TXN_BEGIN, process=1, txn=2)
    log.poll(1, "x", (1, "v1"), (2, "v2"), txn=2)
    log.add(K.TXN_ABORT, process=1, txn=2)
    return log


def test_a_consumer_that_rewinds_after_an_abort_is_clean() -> None:
    """Peer: ``poll-skip-test`` "txn abort" "good": after an aborted (or crashed)
    transaction the consumer polls 1, 2 again; no error. Ours: after the abort the consumer
    reads its committed offset again (a ``fetch`` of 1), reads 1, 2 in a transaction that
    commits, and its outputs are what a read-committed downstream sees: VALID under
    exactly-once."""
    log = _transactional_reader(rewinds=True)
    log.fetch(1, "x", 1)
    log.add(K.TXN_BEGIN, process=1, txn=3)
    log.poll(1, "x", (1, "v1"), (2, "v2"), (3, "v3"), (4, "v4"), (5, "v5"), txn=3)
    log.add(K.COMMIT, process=1, partition="x", offset=6)
    log.add(K.TXN_COMMIT, process=1, txn=3)
    aborted = frozenset({1, 2})  # outputs of the aborted transaction: never shown
    verdict = check(log.history(hide=aborted), EO)
    assert verdict.status is Status.VALID, verdict.summary()


def test_a_consumer_that_goes_on_after_an_abort_loses_what_it_aborted() -> None:
    """Peer: ``poll-skip-test`` "abort doesn't roll back": after the aborted transaction
    (1, 2) the consumer polls 3, 4 (aborted too), then 5 (committed): two poll skips, of
    1, 2 and of 1..4. Ours: the reads themselves are contiguous (no ``skip``), the fault
    is what the consumer then claims: it commits offset 6 with the effects of 1..4 only in
    aborted transactions: ``lost`` 1..4, and ``offset-ahead`` (the commit past each lost
    record). Difference: the peer names the missing rewind at the reader; we name its
    consequence, the records it committed past without their effects."""
    log = _transactional_reader(rewinds=False)
    log.add(K.TXN_BEGIN, process=1, txn=3)
    log.poll(1, "x", (3, "v3"), (4, "v4"), txn=3)
    log.add(K.TXN_ABORT, process=1, txn=3)
    log.add(K.TXN_BEGIN, process=1, txn=4)
    log.poll(1, "x", (5, "v5"), txn=4)
    log.add(K.COMMIT, process=1, partition="x", offset=6)
    log.add(K.TXN_COMMIT, process=1, txn=4)
    verdict = check(log.history(hide=frozenset({1, 2, 3, 4})), ALO)
    assert kinds(verdict) == {"lost": 4, "offset-ahead": 4}
    assert sorted(r for (r,) in witness_records(verdict, AnomalyKind.LOST)) == [
        "v1",
        "v2",
        "v3",
        "v4",
    ]


# -- nonmonotonic-poll-test, int-nonmonotonic-poll-test --------------------------------------


def _rereading(*, between: bool) -> Log:
    log = Log()
    for value, offset in (("a", 1), ("b", 2), ("c", 3), ("d", 4)):
        log.send(value, "x", offset)
    log.poll(0, "x", (1, "a"), (2, "b"), (3, "c"))
    if between:  # process 0 left x and came back: it resumes where it is told
        log.fetch(0, "x", 2, seek=True)
    log.poll(0, "x", (2, "b"), (3, "c"), (4, "d"))
    return log


def test_a_consumer_that_reads_back_without_being_told_is_nonmonotonic() -> None:
    """Peer: ``nonmonotonic-poll-test``: process 0 polls 1, 2, 3 then 2, 3, 4: one
    nonmonotonic poll (c then b). Ours: one ``nonmonotonic-poll`` (the read of 2 after 3);
    it breaks exactly-once and is tolerated under at-least-once, where reading again is
    allowed (the peer has no guarantee to weigh it against)."""
    log = _rereading(between=False)
    exactly = check(log.history(), EO)
    assert exactly.status is Status.INVALID
    assert kinds(exactly) == {"nonmonotonic-poll": 1}
    at_least = check(log.history(), ALO)
    assert at_least.status is Status.VALID
    assert [a.kind for a in at_least.tolerated] == [AnomalyKind.NONMONOTONIC_POLL]


def test_a_reassignment_in_between_allows_reading_back() -> None:
    """Peer: ``nonmonotonic-poll-test`` "with intermediate subscribe": an assign or a
    subscribe that leaves x out in between allows it; one that keeps x does not (the plain
    history above). Ours: coming back to x, the consumer is positioned (a ``fetch``, here a
    seek back to 2): VALID under exactly-once."""
    verdict = check(_rereading(between=True).history(), EO)
    assert verdict.status is Status.VALID, verdict.summary()


def test_reads_back_within_one_poll_are_nonmonotonic_too() -> None:
    """Peer: ``int-nonmonotonic-poll-test``: one poll returns c at 3 then a at 1; another
    returns b at 2, c at 3, then c at 3 again: two internal nonmonotonic polls (deltas -2
    and 0). Ours: our reads are per record, so within a poll or between polls is one rule:
    two ``nonmonotonic-poll`` (1 after 3, 3 after 3)."""
    log = Log()
    for value, offset in (("a", 1), ("b", 2), ("c", 3)):
        log.send(value, "x", offset, "info")
    log.poll(0, "x", (3, "c"), (1, "a"))
    log.poll(0, "x", (2, "b"), (3, "c"))
    log.poll(0, "x", (3, "c"))
    assert kinds(check(log.history(), EO)) == {"nonmonotonic-poll": 2}


# -- int-poll-skip-test ----------------------------------------------------------------------


def test_a_poll_that_jumps_over_a_known_record_skips_it() -> None:
    """Peer: ``int-poll-skip-test``: polls return a at 1 and d at 4 (in one poll, and in
    two), while another poll shows b at 2: two internal poll skips of b. Ours: the first
    reader (process 0) jumps from 1 to 4: a ``skip`` naming b; the second (process 3, the
    two-poll variant) does not: process 0 had read up to 4 before it, so b is behind the
    reading frontier for it (see :func:`test_polls_that_jump_over_known_records_skip_them`:
    our processes are successive instances of one consumer; the peer's two variants are two
    histories, each of which alone gives its skip here too). Offset 3 holds no record and no
    witness names it."""
    log = Log()
    for value, offset in (("a", 1), ("b", 2), ("d", 4)):
        log.send(value, "x", offset, "info")
    log.poll(0, "x", (1, "a"), (4, "d"))
    log.poll(3, "x", (1, "a"))
    log.poll(3, "x", (4, "d"))
    log.poll(2, "x", (2, "b"))
    assert_only(check(log.history(), ALO), SKIP, ("b",))
    alone = Log()  # the peer's second variant as a history of its own
    for value, offset in (("a", 1), ("b", 2), ("d", 4)):
        alone.send(value, "x", offset, "info")
    alone.poll(3, "x", (1, "a"))
    alone.poll(3, "x", (4, "d"))
    alone.poll(2, "x", (2, "b"))
    assert_only(check(alone.history(), ALO), SKIP, ("b",))


# -- duplicate-test --------------------------------------------------------------------------


def test_a_value_read_at_a_second_offset_is_a_log_duplicate() -> None:
    """Peer: ``duplicate-test`` "basic": a sent to 1 (acknowledged), b sent without answer;
    a poll returns b at 2 and a at 3: a is at offsets 1 and 3, a duplicate. Ours:
    ``log-duplicate`` of a (read where it was never appended, nothing else there);
    b, unanswered but read, is owed and nothing is unexpected. Tolerated under
    at-least-once (a record twice in the log is delivered at least once), fails
    exactly-once."""
    log = Log()
    log.send("a", "x", 1)
    log.send("b", "x", 2, "info")
    log.poll(2, "x", (2, "b"), (3, "a"))
    assert_only(check(log.history(), EO), AnomalyKind.LOG_DUPLICATE, ("a",))
    assert check(log.history(), ALO).status is Status.VALID


def test_a_producer_retry_that_wrote_twice_is_a_log_duplicate_not_a_resend() -> None:
    """Peer: ``duplicate-test`` again, written the way our recorders know it: the producer's
    own retry wrote a a second time (``retried``). Ours: ``log-duplicate`` (exactly-once
    fails), and the reader that read both copies in order is no ``nonmonotonic`` output:
    an ordered sink that shows a (from its second copy) after b is in the log's order.
    Written as an upstream ``resent`` append instead, the same log is legitimate: VALID."""
    log = Log(sink=True)
    log.send("a", "x", 0)
    log.send("b", "x", 1)
    log.retry("a", "x", 2)
    log.fetch(0, "x", 1)
    log.poll(0, "x", (1, "b"), (2, "a"))
    ordered = log.history()
    sinks = {"out": SinkSpec(SinkKind.LOG, ordered=True)}
    ordered = History(HistoryMeta(partitions=("x", "y"), sinks=sinks), ordered.events)
    verdict = check(ordered, EO)
    assert kinds(verdict) == {"log-duplicate": 1}, verdict.summary()
    resent = History(
        ordered.meta,
        tuple(
            Event(**{**e.to_row(), "kind": e.kind, "detail": "resent"})
            if e.detail == "retried"
            else e
            for e in ordered.events
        ),
    )
    assert check(resent, EO).status is Status.VALID


def test_many_values_at_the_same_two_offsets_are_inconsistent_offsets() -> None:
    """Peer: ``duplicate-test`` "hash-insensitive": ten values, each sent to offset 0
    (acknowledged) and polled at offset 1: each is a duplicate, and offsets 0 and 1 each
    hold all ten. Ours: ``inconsistent-offsets`` at 0 and at 1 (ten records each). We give
    a fact one name: a record read at an offset that other records hold is named by the
    offset's inconsistency, not also as a duplicate (``log-duplicate`` is for a record at
    a second offset nothing else holds). And one more: the poller (one process) reads
    offset 1 ten times without a seek, nine ``nonmonotonic-poll``\\s, which the peer's test
    does not look at."""
    log = Log()
    for n in range(10):
        log.send(f"v{n}", "x", 0)
        log.poll(1, "x", (1, f"v{n}"))
    verdict = check(log.history(), EO)
    assert kinds(verdict) == {"inconsistent-offsets": 2, "nonmonotonic-poll": 9}
    assert (
        witness_records(verdict, AnomalyKind.INCONSISTENT_OFFSETS)
        == [tuple(f"v{n}" for n in range(10))] * 2
    )


def test_an_aborted_poll_still_shows_a_duplicate_but_not_of_a_failed_write() -> None:
    """Peer: ``duplicate-test`` "aborted txns": 0 is acknowledged at 1, 1's send fails
    (with an offset, 2); an aborted poll returns 0 at 11 and 1 at 12: a duplicate of 0,
    none of 1 (its write never happened). Ours: ``log-duplicate`` of 0 only: a record whose
    write failed is in the log once at most wherever it is read (with a sink its effect
    would be ``unexpected``). Our reads are facts whatever becomes of the reader's
    transaction, as the peer's."""
    log = Log()
    log.send("v0", "x", 1)
    log.send("v1", "x", 2, "fail")
    log.poll(1, "x", (11, "v0"), (12, "v1"))
    assert_only(check(log.history(), EO), AnomalyKind.LOG_DUPLICATE, ("v0",))


# -- nonmonotonic-send-test ------------------------------------------------------------------


def _sends(second: int) -> Log:
    """Process 0 sends c and d, acknowledged at x 3 and 4; then process ``second`` sends a
    and b, acknowledged at x 1 and 2."""
    log = Log()
    log.send("c", "x", 3, producer=0)
    log.send("d", "x", 4, producer=0)
    log.send("a", "x", 1, producer=second)
    log.send("b", "x", 2, producer=second)
    return log


def test_sends_acknowledged_below_earlier_ones_are_a_nonmonotonic_send() -> None:
    """Peer: ``nonmonotonic-send-test``: process 0's send is acknowledged at 3, 4, its next
    send at 1, 2: a nonmonotonic send. Ours: one ``nonmonotonic-send`` (a, sent after d was
    acknowledged at 4, placed at 1), under both guarantees: a reorder by the log gives no
    record twice, so at-least-once does not allow it either. Our sends are per record, so
    the step inside one of the peer's sends (3 to 4, 1 to 2) is in order; the one between
    them is the step down. Until issue 31's item on producer order such an append was
    refused as malformed (UNKNOWN)."""
    for guarantee in Guarantee:
        verdict = check(_sends(0).history(), guarantee)
        assert verdict.status is Status.INVALID
        assert_only(verdict, AnomalyKind.NONMONOTONIC_SEND, ("a", "d"))


def test_two_producers_sends_are_not_ordered_with_each_other() -> None:
    """Peer: the same checker compares one process's sends only (other processes' sends are
    concurrent with them). Ours: the same: an append's ``process`` names its producer, and
    process 1's sends at 1, 2 after process 0's at 3, 4 are clean (VALID)."""
    for guarantee in Guarantee:
        verdict = check(_sends(1).history(), guarantee)
        assert verdict.status is Status.VALID, verdict.summary()


@pytest.mark.parametrize("guarantee", list(Guarantee))
def test_every_clean_translation_is_valid(guarantee: Guarantee) -> None:
    """The acceptance side: every history the peer calls clean is VALID here under both
    guarantees (no false alarm)."""
    clean = [
        _skipping_reader([(4, 0), (7, 0)]).history(),
        _rereading(between=True).history(),
        _sends(1).history(),
    ]
    unseen = Log()
    unseen.send("x1", "x", 0, "info")
    unseen.send("x2", "x", 0)
    clean.append(unseen.history())
    for history in clean:
        verdict = check(history, guarantee)
        assert verdict.status is Status.VALID, verdict.summary()
