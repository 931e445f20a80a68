"""Witness details and validation messages, worded exactly as the local checker words them.

Pure Python over the few rows the Spark queries return (internal).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from harness.check.validate import _show  # the validator's own wording of values
from harness.check.verdict import MAX_WITNESSES, Witness
from harness.history.events import EventKind

__all__ = ["lexicographic", "problem_message", "witness"]


def witness(records: Sequence[str], events: Sequence[int | None], detail: str) -> Witness:
    """A :class:`Witness` as the local checker builds one (events deduplicated, sorted)."""
    return Witness(
        record_ids=tuple(records),
        events=tuple(sorted({event for event in events if event is not None})),
        detail=detail,
    )


def best(witnesses: Sequence[Witness]) -> tuple[Witness, ...]:
    """The first :data:`MAX_WITNESSES` in :attr:`Witness.sort_key` order."""
    return tuple(sorted(witnesses, key=lambda w: w.sort_key)[:MAX_WITNESSES])


def lexicographic(count: int) -> Iterator[int]:
    """``0 .. count - 1`` in the order of their decimal strings (0, 1, 10, 100, 11, ...)."""
    if count <= 0:
        return
    yield 0
    top = count - 1
    current = 1
    for _ in range(top):
        yield current
        if current * 10 <= top:
            current *= 10
        else:
            while current % 10 == 9 or current + 1 > top:
                current //= 10
            current += 1


def problem_message(row: Mapping[str, Any], partitions: Sequence[str], sinks: Sequence[str]) -> str:
    """The validator's message for one problem row of :func:`harness.spark._queries.problems`."""
    i = row["pos"]
    code = row["code"]
    if code == "index":
        return (
            f"event {i} has index {_show(row['index'])}; events must be numbered "
            f"0, 1, 2, ... in order"
        )
    if code == "kind":
        return (
            f"event {i} has kind {_show(row['kind'])}, which is not an EventKind "
            f"(one of {', '.join(k.value for k in EventKind)})"
        )
    where = f"event {i} ({row['kind']})"
    if code.startswith("missing_"):
        return f"{where} is missing {code[len('missing_') :]}"
    if code == "neg_offset":
        return f"{where} has offset {row['offset']}; it must not be negative"
    if code == "neg_part":
        return f"{where} has part {row['part']}; it must not be negative"
    if code == "parts_low":
        return f"{where} has parts {row['parts']}; it must be at least 1"
    if code == "part_high":
        return f"{where} has part {row['part']} of parts {row['parts']}; part must be below"
    if code == "partition":
        return (
            f"{where} names partition {row['partition']!r}, which is not in "
            f"meta.partitions {sorted(set(partitions))}"
        )
    if code == "sink":
        return (
            f"{where} names sink {row['sink']!r}, which is not declared in meta.sinks "
            f"{sorted(sinks)}"
        )
    if code == "put_log":
        return f"{where} puts into sink {row['sink']!r}, which is a log, not a table"
    if code == "observe_log":
        return (
            f"{where} observes log sink {row['sink']!r} without output_id and part "
            f"(got output_id {row['output_id']!r}, part {row['part']!r})"
        )
    if code == "observe_output":
        return (
            f"{where} observes output {row['output_id']} in sink {row['sink']!r}, which is a "
            f"table, not a log"
        )
    if code == "observe_table":
        return (
            f"{where} observes table sink {row['sink']!r} without key and value "
            f"(got key {row['key']!r}, value {row['value']!r})"
        )
    if code == "duplicate":
        return (
            f"{where} appends record {row['record_id']!r} again; it was appended at event "
            f"{row['earlier_pos']} and record ids must be unique"
        )
    if code == "not_above":
        return (
            f"{where} appends at offset {row['offset']} of partition {row['partition']!r}, not "
            f"above offset {row['acked_offset']} acknowledged at event {row['acked_pos']}"
        )
    if code == "not_appended":
        return f"{where} names record {row['record_id']!r}, which was not appended before it"
    if code == "misplaced":
        return (
            f"{where} places record {row['record_id']!r} at partition {row['partition']!r} "
            f"offset {row['offset']}, but event {row['earlier_pos']} appended it at partition "
            f"{row['earlier_partition']!r} offset {row['earlier_offset']}"
        )
    raise AssertionError(f"unknown problem code {code!r}")
