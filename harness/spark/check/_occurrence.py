"""One anomaly occurrence as the Spark queries return it, typed (internal; pure Python).

Every occurrence frame of the checker has the columns of :class:`Occurrence` (those a kind
does not use are null); the driver turns the few rows it collects into these values and
words their witnesses from the named fields, never from positional slots.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Final, final

__all__ = ["COLUMNS", "Occurrence"]


@final
@dataclass(frozen=True, slots=True)
class Occurrence:
    """What identifies and orders an occurrence (``run``, ``kind``, ``sub``: the variant of
    a kind, ``cls``: count-mismatch's side, ``weight``: how many occurrences it counts,
    ``ev``/``rk``: its events and records, the witness order) and the facts its witness
    sentence needs, by name."""

    run: int
    kind: str
    sub: str
    cls: str
    weight: int
    ev: tuple[int, ...]
    rk: tuple[str, ...] | None = None
    rid: str | None = None
    pos: int | None = None
    output_id: int | None = None
    sink: str | None = None
    app_pos: int | None = None
    how: int | None = None
    """unexpected: 0 record never appended, 1 never acknowledged, 2 poison, 3 undeclared
    part; skip: 0 after a fetch of no offset, 1 after a fetch, 2 after a read."""
    part: int | None = None
    parts: int | None = None
    ack: int | None = None
    mask: int | None = None
    big: int | None = None
    outputs: tuple[int, ...] | None = None
    before_record: str | None = None
    key: str | None = None
    expected: int | None = None
    observed: int | None = None
    offset: int | None = None
    before_offset: int | None = None
    record_offset: int | None = None
    process: int | None = None
    low: int | None = None
    start: int | None = None
    """skip: the first offset the read was owed (after ``low``, never below the log's start)."""
    before: int | None = None
    pno: int | None = None
    emit_pos: int | None = None
    txn: int | None = None
    abort_pos: int | None = None
    range_id: int | None = None
    """Set on the driver: which fetched range of records (skip, offset-ahead) it names."""

    @classmethod
    def from_row(cls, row: Any) -> Occurrence:
        """From a collected Spark row with (at least) :data:`COLUMNS`."""
        data = {name: row[name] for name, _ in COLUMNS}
        for name in ("ev", "rk", "outputs"):
            if data[name] is not None:
                data[name] = tuple(data[name])
        return cls(**data)


_SQL: Final = {
    "int": "long",
    "str": "string",
    "int | None": "long",
    "str | None": "string",
    "tuple[int, ...]": "array<long>",
    "tuple[str, ...] | None": "array<string>",
    "tuple[int, ...] | None": "array<long>",
}
COLUMNS: Final = tuple(
    (f.name, _SQL[str(f.type)]) for f in fields(Occurrence) if f.name != "range_id"
)
"""The columns of every occurrence frame and their Spark SQL types."""
