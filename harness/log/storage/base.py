"""The narrow interface between the log's logic and where its bytes live.

The writer, readers and namespace implement DistributedLog's rules once; a storage
backend only keeps three kinds of data, and promises what each call makes durable:

- entries, keyed by (segment, entry id), each a tuple of :class:`StoredRecord`;
  ``append_entry`` transmits one (stored, not yet visible, not yet durable);
- committed metadata (:class:`LogMetadata`): readers see exactly the entries up to
  ``metadata.committed``; ``commit`` replaces it atomically, with the entries appended
  before it, and ``sync=True`` makes it survive a machine crash;
- a writer lock, held by at most one writer at a time (across processes where the
  backend is shared between processes).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, final

from harness._json import parse_json
from harness._shown import shown
from harness.errors import CorruptData, InvalidDLSN
from harness.log.dlsn import DLSN
from harness.log.record import StoredRecord

__all__ = [
    "METADATA_FORMAT",
    "LogMetadata",
    "LogStorage",
    "NamespaceStorage",
    "SegmentMetadata",
    "Truncation",
]

METADATA_FORMAT = 1
"""Version of the stored metadata layout; bumped on any incompatible change."""


class Truncation(enum.Enum):
    """A segment's truncation status, as in DistributedLog."""

    ACTIVE = "active"
    PARTIALLY_TRUNCATED = "partially-truncated"
    TRUNCATED = "truncated"


@final
@dataclass(frozen=True, slots=True)
class SegmentMetadata:
    """What the log knows about one segment, as of the last commit.

    ``last_entry`` is the last committed entry id (-1 for none); ``last_dlsn`` the DLSN
    of the last committed user record (None while it has none); ``record_count`` counts
    user records only, so sequence ids are ``start_sequence_id + position - 1``.
    """

    segment: int
    start_sequence_id: int
    record_count: int = 0
    payload_bytes: int = 0
    first_txid: int | None = None
    last_txid: int | None = None
    last_entry: int = -1
    last_dlsn: DLSN | None = None
    completed: bool = False
    truncation: Truncation = Truncation.ACTIVE
    min_active_dlsn: DLSN | None = None

    def segment_end(self) -> DLSN:
        """The first DLSN after this segment: the start of the next one."""
        return DLSN(self.segment + 1, 0, 0)

    def to_json(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "start_sequence_id": self.start_sequence_id,
            "record_count": self.record_count,
            "payload_bytes": self.payload_bytes,
            "first_txid": self.first_txid,
            "last_txid": self.last_txid,
            "last_entry": self.last_entry,
            "last_dlsn": None if self.last_dlsn is None else self.last_dlsn.to_json(),
            "completed": self.completed,
            "truncation": self.truncation.value,
            "min_active_dlsn": (
                None if self.min_active_dlsn is None else self.min_active_dlsn.to_json()
            ),
        }

    @classmethod
    def from_json(cls, value: object) -> SegmentMetadata:
        """Inverse of :meth:`to_json`; a field of the wrong type or range raises
        :class:`_Malformed` (a ``ValueError``) naming it."""
        fields = _fields(value, "segment metadata", _SEGMENT_FIELDS)
        last = fields["last_dlsn"]
        active = fields["min_active_dlsn"]
        truncation = fields["truncation"]
        if truncation not in _TRUNCATIONS:
            raise _Malformed(f"segment truncation {shown(truncation)} is not one of {_TRUNCATIONS}")
        return cls(
            segment=_int(fields, "segment", low=0),
            start_sequence_id=_int(fields, "start_sequence_id"),
            record_count=_int(fields, "record_count", low=0),
            payload_bytes=_int(fields, "payload_bytes", low=0),
            first_txid=_int(fields, "first_txid", nullable=True),
            last_txid=_int(fields, "last_txid", nullable=True),
            last_entry=_int(fields, "last_entry", low=-1),
            last_dlsn=None if last is None else _dlsn(last, "last_dlsn"),
            completed=_bool(fields, "completed"),
            truncation=Truncation(truncation),
            min_active_dlsn=None if active is None else _dlsn(active, "min_active_dlsn"),
        )


_SEGMENT_FIELDS: Final = frozenset(
    (
        "segment",
        "start_sequence_id",
        "record_count",
        "payload_bytes",
        "first_txid",
        "last_txid",
        "last_entry",
        "last_dlsn",
        "completed",
        "truncation",
        "min_active_dlsn",
    )
)
_LOG_FIELDS: Final = frozenset(("format", "committed", "max_txid", "end_of_stream", "commits"))
_TRUNCATIONS: Final = tuple(t.value for t in Truncation)
_INT64: Final = (-(2**63), 2**63 - 1)


class _Malformed(ValueError):
    """A stored metadata value of the wrong type or range (turned into CorruptData)."""


def _fields(value: object, what: str, names: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Malformed(f"{what} is {type(value).__name__} {shown(value)}, not a JSON object")
    if set(value) != names:
        missing = sorted(names - set(value))
        extra = sorted(set(value) - names)
        raise _Malformed(f"{what} is missing {missing} or has unknown {shown(extra)} fields")
    return value


def _int(fields: dict[str, Any], name: str, *, low: int = _INT64[0], nullable: bool = False) -> Any:
    value = fields[name]
    if value is None and nullable:
        return None
    if type(value) is not int or not low <= value <= _INT64[1]:
        raise _Malformed(f"field {name!r} must be an int in [{low}, 2**63-1], got {shown(value)}")
    return value


def _bool(fields: dict[str, Any], name: str) -> bool:
    value = fields[name]
    if type(value) is not bool:
        raise _Malformed(f"field {name!r} must be true or false, got {shown(value)}")
    return value


def _dlsn(value: object, name: str) -> DLSN:
    try:
        return DLSN.from_json(value)
    except InvalidDLSN as exc:
        raise _Malformed(f"field {name!r}: {exc}") from None


@final
@dataclass(frozen=True, slots=True)
class LogMetadata:
    """The committed state of a log: its segments and the visibility point.

    ``committed`` is the (segment, entry id) of the last committed entry: readers see
    every entry up to and including it, nothing after. ``max_txid`` is the largest txid
    committed so far (``MAX_TXID`` once the end of stream is marked). ``commits`` counts
    commits, so a reader can tell cheaply whether anything changed.
    """

    segments: tuple[SegmentMetadata, ...] = ()
    committed: tuple[int, int] | None = None
    max_txid: int | None = None
    end_of_stream: bool = False
    commits: int = 0
    _by_segment: dict[int, SegmentMetadata] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._by_segment.update((s.segment, s) for s in self.segments)

    def segment(self, number: int) -> SegmentMetadata | None:
        return self._by_segment.get(number)

    def log_json(self) -> dict[str, Any]:
        """The log-level fields (segments are stored one key each)."""
        return {
            "format": METADATA_FORMAT,
            "committed": None if self.committed is None else list(self.committed),
            "max_txid": self.max_txid,
            "end_of_stream": self.end_of_stream,
            "commits": self.commits,
        }

    @classmethod
    def from_json(cls, log: object, segments: Iterable[object], *, where: str) -> LogMetadata:
        """Inverse of :meth:`log_json` and the segments' ``to_json``, checked field by field:
        anything else raises :class:`CorruptData` naming ``where`` and the bad field."""
        try:
            fields = _fields(log, "log metadata", _LOG_FIELDS)
            if fields["format"] != METADATA_FORMAT:
                raise _Malformed(
                    f"metadata format {shown(fields['format'])} is not {METADATA_FORMAT}"
                )
            committed = fields["committed"]
            if committed is not None:
                if type(committed) is not list or len(committed) != 2:
                    raise _Malformed(
                        f"field 'committed' must be [segment, entry], got {shown(committed)}"
                    )
                pair = {"segment": committed[0], "entry": committed[1]}
                committed = (_int(pair, "segment", low=0), _int(pair, "entry", low=0))
            parsed = sorted((SegmentMetadata.from_json(s) for s in segments), key=_segment_key)
            numbers = [segment.segment for segment in parsed]
            if len(set(numbers)) != len(numbers):
                raise _Malformed(f"segment numbers repeat: {shown(numbers)}")
            if committed is not None and committed[0] not in numbers:
                raise _Malformed(f"committed segment {committed[0]} has no metadata")
            return cls(
                segments=tuple(parsed),
                committed=committed,
                max_txid=_int(fields, "max_txid", nullable=True),
                end_of_stream=_bool(fields, "end_of_stream"),
                commits=_int(fields, "commits", low=0),
            )
        except _Malformed as exc:
            raise CorruptData(
                f"log metadata in {where} cannot be decoded ({exc}); the log was written by an "
                "incompatible version or damaged: restore it or delete the log"
            ) from None

    @classmethod
    def decode(
        cls, log: bytes, segments: Iterable[tuple[bytes, bytes]], *, where: str
    ) -> LogMetadata:
        """:meth:`from_json` of stored JSON bytes: the log's, and each segment's under its key
        (``b"s"`` + the segment number as 8 bytes big-endian, which must match the value)."""
        fix = "the log is damaged: restore it or delete the log"
        parsed_log = parse_json(log, what=f"log metadata in {where}", fix=fix, error=CorruptData)
        parsed = []
        for key, value in segments:
            what = f"segment metadata {shown(key)} in {where}"
            segment = parse_json(value, what=what, fix=fix, error=CorruptData)
            if (
                len(key) != 9
                or not isinstance(segment, dict)
                or segment.get("segment") != int.from_bytes(key[1:], "big")
            ):
                raise CorruptData(f"{what} does not match its value {shown(segment)}; {fix}")
            parsed.append(segment)
        return cls.from_json(parsed_log, parsed, where=where)


def _segment_key(segment: SegmentMetadata) -> int:
    return segment.segment


class LogStorage(Protocol):
    """Where one log's entries and metadata live (see the module docstring)."""

    @property
    def metadata(self) -> LogMetadata:
        """The last committed metadata."""
        ...

    @property
    def deleted(self) -> bool:
        """True once the log was deleted; every later call should raise LogNotFound."""
        ...

    def append_entry(self, segment: int, entry: int, records: tuple[StoredRecord, ...]) -> None:
        """Store an entry. Not visible to readers, and not durable, until ``commit``."""
        ...

    def commit(self, metadata: LogMetadata, *, changed: Sequence[int], sync: bool) -> None:
        """Atomically make ``metadata`` (whose ``changed`` segments differ) the committed one."""
        ...

    def read_entries(
        self, segment: int, first_entry: int, last_entry: int
    ) -> Iterator[tuple[int, tuple[StoredRecord, ...]]]:
        """The stored entries of ``segment`` with ids in [first_entry, last_entry], in order."""
        ...

    def discard_uncommitted(self) -> None:
        """Drop entries beyond ``metadata.committed`` (a new writer's recovery)."""
        ...

    def purge_segment(self, segment: int) -> None:
        """Delete the entries of a truncated segment (its metadata stays)."""
        ...

    def acquire_writer(self) -> None:
        """Take the writer lock or raise OwnershipAcquireFailed."""
        ...

    def release_writer(self) -> None: ...

    def close(self) -> None:
        """Release this handle."""
        ...


class NamespaceStorage(Protocol):
    """The set of logs of one namespace."""

    description: str

    def log_names(self) -> list[str]: ...

    def exists(self, name: str) -> bool: ...

    def create(self, name: str) -> None:
        """Create the log; an existing log is left as it is."""
        ...

    def delete(self, name: str) -> None:
        """Delete the log (the caller has checked that no writer holds it)."""
        ...

    def open(self, name: str) -> LogStorage:
        """A handle on an existing log, or raise LogNotFound."""
        ...

    def close(self) -> None: ...
