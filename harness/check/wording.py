"""Every sentence a checker writes: witness details, validation messages and reasons.

The one place the wording lives. The local checker (:mod:`harness.check.local`), the
validator (:mod:`harness.check.validate`) and the Spark checker (:mod:`harness.spark.check`)
all build their text by calling these functions with the facts they found, so the same
history gives the same sentences, character for character, whoever checked it.

Functions take plain values (names, offsets, event positions) and never raise; values that
come from a possibly malformed history are shown with :func:`show` (``repr``, cut short).
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Sequence
from typing import Final

from harness.history.events import EventKind

__all__ = [
    "EMPTY_HISTORY",
    "NO_DRAIN_REASON",
    "NO_END",
    "aborted_read",
    "ahead_of_reads",
    "append_again",
    "append_not_above",
    "count_mismatch",
    "duplicate",
    "end_not_last",
    "field_missing",
    "field_type",
    "kind_unknown",
    "index_out_of_order",
    "inconsistent_offsets",
    "local_only_not_judged",
    "log_duplicate_read",
    "log_duplicate_retried",
    "lost",
    "many_drains",
    "nonmonotonic_poll",
    "nonmonotonic_send",
    "many_ends",
    "misplaced",
    "negative",
    "nonmonotonic",
    "not_appended",
    "resent_differs",
    "resent_not_judged",
    "resent_unknown",
    "observe_log_fields",
    "observe_output_in_table",
    "observe_table_fields",
    "part_not_below",
    "parts_too_low",
    "past_lost",
    "put_into_log",
    "regression",
    "show",
    "since_fetch",
    "since_read",
    "skip",
    "stopped_after",
    "undeclared_partition",
    "where",
    "undeclared_sink",
    "unexpected_no_record",
    "unexpected_not_appended",
    "unexpected_part",
    "unexpected_poison",
    "unexpected_unacknowledged",
]

NO_DRAIN_REASON: Final = "the run has no drain phase, so 'eventually delivered' cannot be judged"
EMPTY_HISTORY: Final = "the history has no events; it needs at least its end event"
NO_END: Final = "the history has no end event; its last event must be 'end'"

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60
_short.maxlist = 6
_short.maxtuple = 6


def show(value: object) -> str:
    """``repr`` of a value, cut short; never raises."""
    try:
        return _short.repr(value)
    except Exception:  # a garbage object whose __repr__ fails still gets a message
        return f"<unprintable {type(value).__name__}>"


def _listed(numbers: Iterable[int]) -> str:
    return ", ".join(map(str, numbers))


# ------------------------------------------------------------------ witness details


def _output(output_id: object, sink: object) -> str:
    return f"output {output_id} in sink {sink!r}"


def lost(record_id: str, part: int, ack: int) -> str:
    return (
        f"record {record_id!r} part {part} was acknowledged at event {ack} but no log sink shows it"
    )


def duplicate(record_id: str, part: int, outputs: Sequence[int]) -> str:
    return (
        f"record {record_id!r} part {part} was observed {len(outputs)} times "
        f"(outputs {_listed(outputs)})"
    )


def unexpected_no_record(output_id: object, sink: object) -> str:
    return f"{_output(output_id, sink)} has no input record"


def unexpected_not_appended(output_id: object, sink: object, record_id: str) -> str:
    return f"{_output(output_id, sink)} derives from record {record_id!r}, which was never appended"


def unexpected_unacknowledged(output_id: object, sink: object, record_id: str, append: int) -> str:
    return (
        f"{_output(output_id, sink)} derives from record {record_id!r}, appended at event "
        f"{append} but never acknowledged"
    )


def unexpected_poison(output_id: object, sink: object, record_id: str, append: int) -> str:
    return (
        f"{_output(output_id, sink)} derives from poison record {record_id!r} (appended at "
        f"event {append}), which must have no effect"
    )


def unexpected_part(output_id: object, sink: object, record_id: str, part: int, parts: int) -> str:
    declared = "part 0" if parts == 1 else f"parts 0 to {parts - 1}"
    return (
        f"{_output(output_id, sink)} is part {part} of record {record_id!r}, but its emits "
        f"declare only {declared}"
    )


def aborted_read(output_id: object, sink: object, emit: int, txn: int, abort: int) -> str:
    return (
        f"{_output(output_id, sink)} was emitted at event {emit} in transaction {txn}, "
        f"which aborted at event {abort}"
    )


def count_mismatch(sink: str, key: str, expected: int, observed: int | None) -> str:
    shown = "observed 0 (key absent)" if observed is None else f"observed {observed}"
    return f"sink {sink} key {key}: expected {expected}, {shown}"


def stale(
    sink: str,
    key: str,
    row: str,
    row_offset: int,
    latest: str,
    latest_offset: int,
    partition: str,
    after: bool,
) -> str:
    written = ", written after it" if after else ""
    return (
        f"entity table {sink!r} key {key!r} holds the row of record {row!r} (offset "
        f"{row_offset} of partition {partition!r}){written}, but the key's last acknowledged "
        "record is "
        f"{latest!r} (offset {latest_offset})"
    )


def entity_lost(sink: str, key: str, record_id: str, ack: int) -> str:
    return (
        f"entity table {sink!r} has no row for key {key!r}; its last acknowledged record "
        f"{record_id!r} was acknowledged at event {ack}"
    )


def entity_misplaced(sink: str, key: object, record_id: object, record_key: object) -> str:
    if record_key is None:
        return (
            f"entity table {sink!r} key {key!r} holds a row of {record_id!r}, which is not an "
            "acknowledged record"
        )
    return (
        f"entity table {sink!r} holds the row of record {record_id!r} under key {key!r}, but the "
        f"record's key is {record_key!r}"
    )


def nonmonotonic(
    sink: str, record_id: str, offset: int, partition: str, before: str, before_offset: int
) -> str:
    return (
        f"sink {sink!r} shows record {record_id!r} (offset {offset} of partition "
        f"{partition!r}) after record {before!r} (offset {before_offset})"
    )


def nonmonotonic_poll(
    process: int, offset: int, partition: str, previous: int, previous_at: int
) -> str:
    return (
        f"process {process} read offset {offset} of partition {partition!r} after reading offset "
        f"{previous} there (event {previous_at}) with no fetch or seek in between: the "
        f"reader went back by itself"
    )


def nonmonotonic_send(
    record_id: str,
    offset: int,
    partition: str,
    sent_at: int,
    before: str,
    before_offset: int,
    acked_at: int,
    producer: int | None,
) -> str:
    who = "the producer" if producer is None else f"producer {producer}"
    return (
        f"{who} sent record {record_id!r} (event {sent_at}) after its send of record "
        f"{before!r} was acknowledged at offset {before_offset} of partition {partition!r} "
        f"(event {acked_at}), and the log put it below, at offset {offset}: the log "
        f"reordered the producer's sends"
    )


def inconsistent_offsets(partition: str, offset: int, record_ids: Sequence[str]) -> str:
    return (
        f"offset {offset} of partition {partition!r} holds {len(record_ids)} records "
        f"({', '.join(repr(r) for r in record_ids)}), acknowledged or read there; a log holds one"
    )


def log_duplicate_retried(record_id: str, offset: int, partition: str, first: int) -> str:
    return (
        f"record {record_id!r} was written again at offset {offset} of partition "
        f"{partition!r} by the producer's retry: the log holds it twice (its first write "
        f"is event {first})"
    )


def log_duplicate_read(
    record_id: str, process: int, offset: int, partition: str, first: int
) -> str:
    return (
        f"process {process} read record {record_id!r} at offset {offset} of partition "
        f"{partition!r}, where it was never appended (its append is event {first}): the "
        f"log holds it twice"
    )


def since_fetch(offset: int | None, event: int) -> str:
    """How a ``skip`` began after a fetch (``offset`` None: no stored offset)."""
    if offset is None:
        return f"a fetch that found no stored offset (event {event})"
    return f"a fetch of offset {offset} (event {event})"


def since_read(offset: int, event: int) -> str:
    """How a ``skip`` began after a read."""
    return f"a read of offset {offset} (event {event})"


def skip(process: int, offset: int, partition: str, since: str, low: int, skipped: int) -> str:
    return (
        f"process {process} read offset {offset} of partition {partition!r} after {since}: "
        f"offsets {low} to {offset - 1} skipped ({skipped} acknowledged records)"
    )


def ahead_of_reads(
    process: int, offset: int, partition: str, best: int | None, best_event: int | None
) -> str:
    read = "nothing" if best is None else f"offset {best} (event {best_event})"
    return (
        f"process {process} committed offset {offset} of partition {partition!r}, but the "
        f"highest offset read before it was {read}"
    )


def past_lost(process: int, offset: int, partition: str, record_id: str, at: int) -> str:
    return (
        f"process {process} committed offset {offset} of partition {partition!r}, past lost "
        f"record {record_id!r} at offset {at}"
    )


def regression(process: int, offset: int, partition: str, stored: int, at: int) -> str:
    return (
        f"process {process} committed offset {offset} of partition {partition!r}, below the "
        f"stored offset {stored} set at event {at}"
    )


# ------------------------------------------------------------------ validation messages


def where(position: int, kind: str) -> str:
    """How a message names an event whose kind is known."""
    return f"event {position} ({kind})"


def index_out_of_order(position: int, index: object) -> str:
    return (
        f"event {position} has index {show(index)}; events must be numbered 0, 1, 2, ... in order"
    )


def kind_unknown(position: int, kind: object) -> str:
    return (
        f"event {position} has kind {show(kind)}, which is not an EventKind "
        f"(one of {', '.join(k.value for k in EventKind)})"
    )


def field_missing(at: str, name: str) -> str:
    return f"{at} is missing {name}"


def field_type(at: str, name: str, value: object, type_name: str) -> str:
    article = "an" if type_name[0] in "aeiou" else "a"
    return f"{at} has {name} {show(value)}; it must be {article} {type_name}"


def negative(at: str, name: str, value: int) -> str:
    return f"{at} has {name} {value}; it must not be negative"


def parts_too_low(at: str, parts: int) -> str:
    return f"{at} has parts {parts}; it must be at least 1"


def part_not_below(at: str, part: int, parts: int) -> str:
    return f"{at} has part {part} of parts {parts}; part must be below"


def undeclared_partition(at: str, partition: str, partitions: Iterable[str]) -> str:
    return (
        f"{at} names partition {partition!r}, which is not in meta.partitions "
        f"{sorted(set(partitions))}"
    )


def undeclared_sink(at: str, sink: str, sinks: Iterable[str]) -> str:
    return f"{at} names sink {sink!r}, which is not declared in meta.sinks {sorted(sinks)}"


def put_into_log(at: str, sink: str) -> str:
    return f"{at} puts into sink {sink!r}, which is a log, not a table"


def observe_log_fields(
    at: str, sink: str, output_id: object, part: object, kind: str = "log"
) -> str:
    return (
        f"{at} observes {kind} sink {sink!r} without output_id and part "
        f"(got output_id {output_id!r}, part {part!r})"
    )


def observe_output_in_table(at: str, output_id: object, sink: str) -> str:
    return f"{at} observes output {output_id} in sink {sink!r}, which is a table, not a log"


def observe_table_fields(at: str, sink: str, key: object, value: object) -> str:
    return (
        f"{at} observes table sink {sink!r} without key and value "
        f"(got key {key!r}, value {value!r})"
    )


def append_again(at: str, record_id: str, earlier: int) -> str:
    return (
        f"{at} appends record {record_id!r} again; it was appended at event {earlier} and "
        f"record ids must be unique"
    )


def resent_unknown(at: str, record_id: str) -> str:
    return f"{at} resends record {record_id!r}, which was not appended before it"


def resent_differs(
    at: str, record_id: str, earlier: int, partition: object, key: object, value: object
) -> str:
    return (
        f"{at} resends record {record_id!r} with another partition, key or value than its "
        f"append at event {earlier} (partition {partition!r}, key {key!r}, value {value!r}); "
        f"a resend appends the same record again"
    )


def entity_not_judged(sinks: list[str], limit: int) -> str:
    return (
        f"entity table sink(s) {', '.join(map(repr, sinks))}: the Spark checker judges entity "
        f"tables only in runs of at most {limit:,} events, by the local checker's rules on the "
        f"driver; check this history with the local checker (python -m harness check FILE "
        f"--engine local)"
    )


def local_only_not_judged(limit: int) -> str:
    return (
        f"this run has retried or indeterminate sends, sends the log put below earlier "
        f"acknowledged ones, or offsets the log holds twice, "
        f"which only the local checker judges, and more than {limit} events; check it with "
        f"the local checker (python -m harness check)"
    )


def resent_not_judged(at: str, record_id: str) -> str:
    return (
        f"{at} resends record {record_id!r}: the Spark checker judges an upstream's resends "
        f"only in runs small enough to judge by the local checker's rules on the driver; "
        f"check this history with the local checker (python -m harness check FILE)"
    )


def append_not_above(at: str, offset: int, partition: str, acked: int, acked_at: int) -> str:
    return (
        f"{at} appends at offset {offset} of partition {partition!r}, not above offset "
        f"{acked} acknowledged at event {acked_at}"
    )


def not_appended(at: str, record_id: str) -> str:
    return f"{at} names record {record_id!r}, which was not appended before it"


def misplaced(
    at: str,
    record_id: str,
    partition: object,
    offset: object,
    earlier: int,
    earlier_partition: str,
    earlier_offset: int,
) -> str:
    return (
        f"{at} places record {record_id!r} at partition {partition!r} offset {offset}, but "
        f"event {earlier} appended it at partition {earlier_partition!r} offset {earlier_offset}"
    )


def many_ends(positions: Sequence[int]) -> str:
    return (
        f"the history has {len(positions)} end events (events {_listed(positions)}); it must "
        f"have exactly one, the last"
    )


def end_not_last(position: int, last: int) -> str:
    return f"event {position} (end) is not the last event; the history goes on to {last}"


def many_drains(positions: Sequence[int]) -> str:
    return (
        f"the history has {len(positions)} drain events (events {_listed(positions)}); it "
        f"may have at most one"
    )


def stopped_after(limit: int) -> str:
    return f"(stopped after {limit} problems; there may be more)"
