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
from typing import Any, Protocol, final

from harness.errors import CorruptData
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
    def from_json(cls, value: dict[str, Any]) -> SegmentMetadata:
        last = value["last_dlsn"]
        active = value["min_active_dlsn"]
        return cls(
            segment=value["segment"],
            start_sequence_id=value["start_sequence_id"],
            record_count=value["record_count"],
            payload_bytes=value["payload_bytes"],
            first_txid=value["first_txid"],
            last_txid=value["last_txid"],
            last_entry=value["last_entry"],
            last_dlsn=None if last is None else DLSN.from_json(last),
            completed=value["completed"],
            truncation=Truncation(value["truncation"]),
            min_active_dlsn=None if active is None else DLSN.from_json(active),
        )


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
    def from_json(
        cls, log: dict[str, Any], segments: Iterable[dict[str, Any]], *, where: str
    ) -> LogMetadata:
        try:
            if log.get("format") != METADATA_FORMAT:
                raise ValueError(f"metadata format {log.get('format')!r} != {METADATA_FORMAT}")
            committed = log["committed"]
            return cls(
                segments=tuple(
                    sorted((SegmentMetadata.from_json(s) for s in segments), key=_segment_key)
                ),
                committed=None if committed is None else (committed[0], committed[1]),
                max_txid=log["max_txid"],
                end_of_stream=log["end_of_stream"],
                commits=log["commits"],
            )
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CorruptData(
                f"log metadata in {where} cannot be decoded ({type(exc).__name__}: {exc}); "
                "the log was written by an incompatible version or damaged: restore it or "
                "delete the log"
            ) from None


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
