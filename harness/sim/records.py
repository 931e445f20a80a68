"""The records a processor sees and writes, and their payload encoding."""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.errors import CorruptData
from harness.log.dlsn import DLSN

__all__ = ["Delivery", "OutputRecord"]


@dataclass(frozen=True, slots=True)
class Delivery:
    """An input record as the source delivers it.

    ``offset`` is its 0-based position in ``partition``; ``dlsn`` its log position. A
    processor that resumes after it stores ``delivery.next`` (``dlsn.next()``); storing
    ``dlsn`` itself means "read this one again". ``redelivered`` marks a duplicate delivery
    injected by the schedule (a real source would not tell you: it is for reports only).
    """

    partition: str
    offset: int
    record_id: str
    key: str
    value: int
    dlsn: DLSN
    redelivered: bool = False
    poison: bool = False
    """The payload failed to deserialize (``Topology.poison_every``); ``key`` is ``""`` and
    ``value`` 0. No output is expected for it, but a processor must still move past it."""

    @property
    def next(self) -> DLSN:
        """Where to resume reading after this record."""
        return self.dlsn.next()


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """A committed output as read back from an output log (``OutputLog.last``)."""

    output_id: int
    record_id: str | None
    part: int
    parts: int
    key: str | None
    value: int | None
    source: DLSN | None
    """The DLSN of the input record the output derives from (when emitted from a Delivery)."""


def encode_input(record_id: str, key: str, value: int, *, poison: bool = False) -> bytes:
    if poison:
        # what a producer with a broken serializer writes: the id is kept so that the
        # history can name the record, the body is not a record
        return json.dumps({"id": record_id, "poison": True}, separators=(",", ":")).encode()
    return json.dumps({"id": record_id, "key": key, "value": value}, separators=(",", ":")).encode()


def decode_input(payload: bytes, where: str) -> tuple[str, str, int, bool]:
    """``(record id, key, value, poison)`` of an input payload."""
    try:
        data = json.loads(payload)
        if data.get("poison") is True:
            return str(data["id"]), "", 0, True
        return str(data["id"]), str(data["key"]), int(data["value"]), False
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptData(
            f"{where}: input payload {payload[:80]!r} is not a harness record: {exc}"
        ) from None


def encode_output(
    output_id: int,
    record_id: str | None,
    part: int,
    parts: int,
    key: str | None,
    value: int | None,
    source: DLSN | None,
) -> bytes:
    return json.dumps(
        {
            "out": output_id,
            "id": record_id,
            "part": part,
            "parts": parts,
            "key": key,
            "value": value,
            "src": None if source is None else source.serialize(),
        },
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def decode_output(payload: bytes, where: str) -> OutputRecord:
    try:
        data = json.loads(payload)
        src = data["src"]
        return OutputRecord(
            output_id=int(data["out"]),
            record_id=data["id"],
            part=int(data["part"]),
            parts=int(data["parts"]),
            key=data["key"],
            value=data["value"],
            source=None if src is None else DLSN.deserialize(src),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise CorruptData(
            f"{where}: output payload {payload[:80]!r} is not a harness output: {exc}"
        ) from None
