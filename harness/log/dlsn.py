"""DLSN: DistributedLog's position of a record in a log.

Byte-for-byte compatible with ``org.apache.distributedlog.DLSN``: the version-1
form is 25 bytes, big-endian ``[version:int8][segment:int64][entry:int64][slot:int64]``,
and the string form is that, Base64-encoded (standard alphabet, padded).
"""

from __future__ import annotations

import base64
import binascii
import struct
from dataclasses import dataclass
from typing import ClassVar, Final, final

from harness._shown import shown
from harness.errors import InvalidDLSN

__all__ = ["DLSN"]

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_V1: Final = struct.Struct(">bqqq")
VERSION0: Final = 0
VERSION1: Final = 1
# DistributedLog computes the version-0 length in bits (Long.SIZE*3 + Byte.SIZE = 200)
# and pads with zeros; we keep that quirk so stored version-0 offsets still decode.
_VERSION0_LEN: Final = 200
_VERSION1_LEN: Final = _V1.size  # 25


@final
@dataclass(frozen=True, order=True, slots=True)
class DLSN:
    """Log segment sequence number, entry id and slot id, compared in that order."""

    segment: int
    entry: int
    slot: int

    INITIAL: ClassVar[DLSN]
    NON_INCLUSIVE_LOWER_BOUND: ClassVar[DLSN]
    INVALID: ClassVar[DLSN]

    def __post_init__(self) -> None:
        for name in ("segment", "entry", "slot"):
            value = getattr(self, name)
            if type(value) is not int or not _INT64_MIN <= value <= _INT64_MAX:
                raise InvalidDLSN(
                    f"DLSN {name} must be a signed 64-bit int, got {shown(value)}; "
                    "build DLSNs from ints such as DLSN(1, 0, 0)"
                )

    def next(self) -> DLSN:
        """The DLSN of the next slot in the same entry (DistributedLog's ``getNextDLSN``)."""
        return DLSN(self.segment, self.entry, self.slot + 1)

    def position_on_next_segment(self) -> DLSN:
        """The first DLSN of the following log segment."""
        return DLSN(self.segment + 1, 0, 0)

    def serialize_bytes(self, version: int = VERSION1) -> bytes:
        """The 25-byte version-1 form (or the 200-byte version-0 form)."""
        if version == VERSION1:
            return _V1.pack(VERSION1, self.segment, self.entry, self.slot)
        if version == VERSION0:
            body = _V1.pack(VERSION0, self.segment, self.entry, self.slot)
            return body + bytes(_VERSION0_LEN - len(body))
        raise InvalidDLSN(f"unknown DLSN serialization version {shown(version)}; use 0 or 1")

    @classmethod
    def deserialize_bytes(cls, data: bytes) -> DLSN:
        """Decode :meth:`serialize_bytes` output; anything else raises :class:`InvalidDLSN`."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidDLSN(f"DLSN bytes must be bytes, got {type(data).__name__}: {shown(data)}")
        data = bytes(data)
        if not data:
            raise InvalidDLSN(
                "empty bytes are not a DLSN; expected 25 bytes from serialize_bytes()"
            )
        version = data[0]
        expected = {VERSION0: _VERSION0_LEN, VERSION1: _VERSION1_LEN}.get(version)
        if expected is None:
            raise InvalidDLSN(
                f"unknown DLSN version byte {version} in {shown(data[:32])}; expected 0 or 1"
            )
        if len(data) != expected:
            raise InvalidDLSN(
                f"DLSN version {version} needs {expected} bytes, got {len(data)}: "
                f"{shown(data[:32])}"
            )
        _, segment, entry, slot = _V1.unpack_from(data)
        return cls(segment, entry, slot)

    def serialize(self) -> str:
        """The Base64 string form, e.g. ``AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA==`` for INITIAL."""
        return base64.b64encode(self.serialize_bytes()).decode("ascii")

    @classmethod
    def deserialize(cls, text: str) -> DLSN:
        """Decode :meth:`serialize` output; ``"baddlsn"`` and such raise :class:`InvalidDLSN`."""
        if not isinstance(text, str):
            raise InvalidDLSN(
                f"a serialized DLSN is a str, got {type(text).__name__}: {shown(text)}"
            )
        try:
            raw = base64.b64decode(text.encode("ascii"), validate=True)
        except (binascii.Error, UnicodeEncodeError) as exc:
            raise InvalidDLSN(
                f"{shown(text)} is not a serialized DLSN (not Base64: {exc}); "
                "pass a string produced by DLSN.serialize()"
            ) from None
        try:
            return cls.deserialize_bytes(raw)
        except InvalidDLSN as exc:
            raise InvalidDLSN(f"{shown(text)} is not a serialized DLSN: {exc}") from None

    def to_json(self) -> dict[str, int]:
        """A JSON-friendly form: ``{"segment": 1, "entry": 0, "slot": 0}``."""
        return {"segment": self.segment, "entry": self.entry, "slot": self.slot}

    @classmethod
    def from_json(cls, value: object) -> DLSN:
        """Inverse of :meth:`to_json`; a malformed value raises :class:`InvalidDLSN`."""
        if not isinstance(value, dict) or set(value) != {"segment", "entry", "slot"}:
            raise InvalidDLSN(
                f"expected a mapping with keys segment, entry, slot; got {shown(value)}"
            )
        return cls(value["segment"], value["entry"], value["slot"])

    def __str__(self) -> str:
        return (
            f"DLSN{{logSegmentSequenceNo={self.segment}, entryId={self.entry}, slotId={self.slot}}}"
        )


DLSN.INITIAL = DLSN(1, 0, 0)
DLSN.NON_INCLUSIVE_LOWER_BOUND = DLSN(1, 0, -1)
DLSN.INVALID = DLSN(0, -1, -1)
