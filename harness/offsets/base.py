"""The offset store interface and the argument rules every store shares.

An offset store remembers, per reader, the DLSN a processor has got to (DistributedLog's
at-least-once tutorial keeps it in LevelDB, key = reader id, value = the serialized DLSN), and,
next to it, opaque state entries that must change in the same atomic write as the offsets
(``commit``), so that a restarted processor never sees state from one point and offsets from
another.

The validators here are public so that a store written by a user raises the same
:class:`~harness.errors.ConfigError` messages as the built-in ones; the conformance suite
(:mod:`harness.offsets.conformance`) checks that a store rejects bad arguments this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType, TracebackType
from typing import Final, Protocol, cast, runtime_checkable

from harness._shown import shown
from harness.errors import ConfigError
from harness.log.dlsn import DLSN

__all__ = [
    "NO_STATE",
    "OffsetStore",
    "validate_commit",
    "validate_commit_mappings",
    "validate_dlsn",
    "validate_reader_id",
    "validate_state_key",
    "validate_state_value",
    "validate_sync",
]

NO_STATE: Final[Mapping[str, bytes | None]] = MappingProxyType({})
"""The default ``state`` argument of :meth:`OffsetStore.commit`: no state change."""


@runtime_checkable
class OffsetStore(Protocol):
    """Where readers' positions (and state committed with them) are kept between runs.

    Promises, for every implementation (checked by :mod:`harness.offsets.conformance`):

    * ``get`` returns the DLSN of the **last** ``put``/``commit`` for that reader, even when it
      is smaller than an earlier one (a store never keeps the maximum on its own), or ``None``
      for a reader that never had an offset; the caller decides what ``None`` means (the
      DistributedLog tutorial starts from ``DLSN.INITIAL``).
    * ``commit`` applies all its offsets and state entries in one atomic write, or none of them:
      every argument is validated before anything is written, and a crash never leaves half a
      commit behind. A ``None`` state value deletes that key.
    * Offsets and state entries live in separate key spaces: reader ``"x"`` and state key
      ``"x"`` are unrelated.
    * Reader ids and state keys are non-empty ``str`` without NUL (``"\\x00"``) that encode to
      UTF-8; DLSNs are :class:`~harness.log.dlsn.DLSN` instances; state values are ``bytes``.
      Anything else raises :class:`~harness.errors.ConfigError` naming the value.
    * After ``close()`` every other call raises :class:`~harness.errors.AlreadyClosed`;
      ``close()`` itself may be called again and does nothing. A store is a context manager
      that closes on exit.

    ``sync`` is fixed when the store is opened (keyword-only ``sync=False``) and says what a
    write survives once the call returns:

    * ``sync=False``: the write has reached the operating system. It survives a **process
      crash** (the process dies, the machine keeps running), but a **machine crash** (power loss,
      kernel panic) may lose the most recent writes. The harness models that loss as a suffix
      of the unsynced writes
      (:meth:`~harness.offsets.memory.MemoryOffsetStorage.lose_unsynced`); a ``commit`` is
      lost whole or kept whole, never in part.
    * ``sync=True``: the write was fsynced, so it, and every write before it, survives a
      machine crash too. Each write then costs a disk flush (milliseconds, not microseconds).
    """

    @property
    def sync(self) -> bool:
        """Whether every write is fsynced before the call returns (fixed at construction)."""
        ...

    def get(self, reader_id: str) -> DLSN | None:
        """The last DLSN stored for ``reader_id``, or ``None`` if it has none."""
        ...

    def put(self, reader_id: str, dlsn: DLSN) -> None:
        """Store ``dlsn`` as the offset of ``reader_id`` (last write wins)."""
        ...

    def get_state(self, key: str) -> bytes | None:
        """The state value last committed under ``key``, or ``None`` if there is none."""
        ...

    def commit(
        self,
        offsets: Mapping[str, DLSN],
        state: Mapping[str, bytes | None] = ...,
    ) -> None:
        """Apply every offset and state entry atomically; a ``None`` state value deletes."""
        ...

    def readers(self) -> list[str]:
        """The ids of the readers that have an offset, sorted."""
        ...

    def close(self) -> None:
        """Release the store; later calls (other than ``close``) raise ``AlreadyClosed``."""
        ...

    def __enter__(self) -> OffsetStore:
        """Return the store itself (``AlreadyClosed`` once closed)."""
        ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def validate_sync(sync: object) -> bool:
    """Return ``sync`` if it is a bool; otherwise raise :class:`ConfigError`."""
    if type(sync) is not bool:
        raise ConfigError(
            f"sync must be True or False, got {type(sync).__name__}: {shown(sync)}; pass sync=True "
            "to fsync every write (survives a machine crash) or sync=False (survives a "
            "process crash only)"
        )
    return sync


def _validate_name(value: object, what: str, example: str) -> bytes:
    if not isinstance(value, str):
        raise ConfigError(
            f"{what} must be a str, got {type(value).__name__}: {shown(value)}; "
            f"pass text such as {shown(example)}"
        )
    if not value:
        raise ConfigError(
            f"{what} must not be empty, got {shown(value)}; pass text such as {shown(example)}"
        )
    if "\x00" in value:
        raise ConfigError(
            f"{what} must not contain NUL ('\\x00'), got {shown(value)}; remove or replace the NUL "
            "character (it separates the store's key spaces)"
        )
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"{what} must encode to UTF-8, got {shown(value)} ({exc.reason} at index {exc.start}); "
            "remove the lone surrogate characters"
        ) from None


def validate_reader_id(reader_id: object) -> bytes:
    """Check a reader id and return its UTF-8 bytes (the LevelDB key of its offset)."""
    return _validate_name(reader_id, "reader id", "reader-1")


def validate_state_key(key: object) -> bytes:
    """Check a state key and return its UTF-8 bytes."""
    return _validate_name(key, "state key", "counts")


def validate_dlsn(dlsn: object, reader_id: object) -> DLSN:
    """Return ``dlsn`` if it is a :class:`DLSN`; otherwise raise :class:`ConfigError`."""
    if type(dlsn) is not DLSN:  # DLSN is @final, so this is isinstance
        raise ConfigError(
            f"the offset of reader {shown(reader_id)} must be a DLSN, got {type(dlsn).__name__}: "
            f"{shown(dlsn)}; build one with DLSN(segment, entry, slot) or "
            "DLSN.deserialize_bytes(...)"
        )
    return dlsn


def validate_state_value(value: object, key: object) -> bytes | None:
    """Return ``value`` if it is ``bytes`` or ``None`` (delete); otherwise raise ConfigError."""
    if value is not None and not isinstance(value, bytes):
        raise ConfigError(
            f"the value of state key {shown(key)} must be bytes (or None to delete the key), got "
            f"{type(value).__name__}: {shown(value)}; encode it first, e.g. text.encode('utf-8') "
            "or bytes(buffer)"
        )
    return value


def validate_commit(
    offsets: object, state: object
) -> tuple[list[tuple[str, bytes, DLSN]], list[tuple[str, bytes, bytes | None]]]:
    """Validate every argument of :meth:`OffsetStore.commit` before anything is written.

    Returns ``(offsets, state)`` as lists of ``(name, utf8_key, value)`` in the mappings' order,
    so a store can write them without checking again. Raises :class:`ConfigError` on the first
    bad argument.
    """
    offsets_map, state_map = validate_commit_mappings(offsets, state)
    # The casts hold because validate_reader_id/validate_state_key raise for anything but str.
    checked_offsets = [
        (cast(str, reader_id), validate_reader_id(reader_id), validate_dlsn(dlsn, reader_id))
        for reader_id, dlsn in offsets_map.items()
    ]
    checked_state = [
        (cast(str, name), validate_state_key(name), validate_state_value(value, name))
        for name, value in state_map.items()
    ]
    return checked_offsets, checked_state


def validate_commit_mappings(
    offsets: object, state: object
) -> tuple[Mapping[object, object], Mapping[object, object]]:
    """Return ``(offsets, state)`` if both are mappings; otherwise raise :class:`ConfigError`.

    The first step of :func:`validate_commit`, for stores that check the entries themselves.
    """
    if type(offsets) is not dict and not isinstance(offsets, Mapping):
        raise ConfigError(
            f"commit() offsets must be a mapping of reader id to DLSN, got "
            f"{type(offsets).__name__}: {shown(offsets)}; pass a dict such as "
            "{'reader-1': DLSN(1, 0, 0)}"
        )
    if type(state) is not dict and not isinstance(state, Mapping):
        raise ConfigError(
            f"commit() state must be a mapping of key to bytes or None, got "
            f"{type(state).__name__}: {shown(state)}; pass a dict such as {{'counts': b'...'}}"
        )
    return offsets, state
