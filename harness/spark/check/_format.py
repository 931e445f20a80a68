"""Validation messages from the Spark queries' problem rows, and the lexicographic part order.

Pure Python over the few rows the Spark queries return (internal).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final

from harness.check import wording

__all__ = ["lexicographic", "problem_message"]


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
    """The validator's message for one problem row of :func:`harness.spark.check.queries.problems`,
    in the validator's own words (:mod:`harness.check.wording`)."""
    i = row["pos"]
    code = row["code"]
    if code == "index":
        return wording.index_out_of_order(i, row["index"])
    if code == "kind":
        return wording.kind_unknown(i, row["kind"])
    at = wording.where(i, row["kind"])
    if code.startswith("missing_"):
        return wording.field_missing(at, code[len("missing_") :])
    simple = _MESSAGES.get(code)
    if simple is not None:
        return simple(at, row, partitions, sinks)
    raise AssertionError(f"unknown problem code {code!r}")


_Message = Callable[[str, Mapping[str, Any], Sequence[str], Sequence[str]], str]
_MESSAGES: Final[Mapping[str, _Message]] = {
    "neg_offset": lambda at, r, _p, _s: wording.negative(at, "offset", r["offset"]),
    "neg_part": lambda at, r, _p, _s: wording.negative(at, "part", r["part"]),
    "parts_low": lambda at, r, _p, _s: wording.parts_too_low(at, r["parts"]),
    "part_high": lambda at, r, _p, _s: wording.part_not_below(at, r["part"], r["parts"]),
    "partition": lambda at, r, p, _s: wording.undeclared_partition(at, r["partition"], p),
    "sink": lambda at, r, _p, s: wording.undeclared_sink(at, r["sink"], s),
    "put_log": lambda at, r, _p, _s: wording.put_into_log(at, r["sink"]),
    "observe_log": lambda at, r, _p, _s: wording.observe_log_fields(
        at, r["sink"], r["output_id"], r["part"]
    ),
    "observe_output": lambda at, r, _p, _s: wording.observe_output_in_table(
        at, r["output_id"], r["sink"]
    ),
    "observe_table": lambda at, r, _p, _s: wording.observe_table_fields(
        at, r["sink"], r["key"], r["value"]
    ),
    "duplicate": lambda at, r, _p, _s: wording.append_again(at, r["record_id"], r["earlier_pos"]),
    "resent": lambda at, r, _p, _s: wording.resent_not_judged(at, r["record_id"]),
    "not_above": lambda at, r, _p, _s: wording.append_not_above(
        at, r["offset"], r["partition"], r["acked_offset"], r["acked_pos"]
    ),
    "not_appended": lambda at, r, _p, _s: wording.not_appended(at, r["record_id"]),
    "misplaced": lambda at, r, _p, _s: wording.misplaced(
        at,
        r["record_id"],
        r["partition"],
        r["offset"],
        r["earlier_pos"],
        r["earlier_partition"],
        r["earlier_offset"],
    ),
}
