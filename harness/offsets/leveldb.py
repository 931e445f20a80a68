"""The offset store on LevelDB, laid out exactly as DistributedLog's at-least-once tutorial.

Layout of the LevelDB directory (``ReaderWithOffsets.java``, so either side can read the other's):

* offset of a reader: key ``reader_id.encode("utf-8")``, value ``dlsn.serialize_bytes()``
  (25 bytes, version 1; version-0 values of 200 bytes are read too);
* state entry: key ``b"\\x00state\\x00" + key.encode("utf-8")``, value the bytes as given.
  Reader ids cannot contain NUL, so the two key spaces never collide.

LevelDB's integrity checks are on unless ``checks=False`` (see :mod:`harness._leveldb`): a
damaged directory raises :class:`~harness.errors.CorruptData`, never a different offset.
plyvel is imported lazily by :func:`harness._leveldb.open_leveldb`, not by this module.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final, final

from harness._closing import Closing
from harness._leveldb import (
    VERIFY,
    close_leveldb,
    leveldb_error,
    open_leveldb,
    plyvel_error,
    scan,
)
from harness._shown import shown
from harness.errors import AlreadyClosed, ConfigError, CorruptData, InvalidDLSN
from harness.log.dlsn import DLSN
from harness.offsets.base import (
    NO_STATE,
    validate_commit_mappings,
    validate_dlsn,
    validate_reader_id,
    validate_state_key,
    validate_state_value,
    validate_sync,
)

if TYPE_CHECKING:
    import plyvel

__all__ = ["STATE_KEY_PREFIX", "LevelDBOffsetStore"]

STATE_KEY_PREFIX: Final = b"\x00state\x00"
"""Prefix of the LevelDB keys that hold state entries (reader ids cannot start with NUL)."""

# The first byte a reader key can start with: everything from b"\x01" on is a reader id.
_FIRST_READER_KEY: Final = b"\x01"
# Reader ids and state keys already seen, mapped to their key bytes; bounded so that a process
# that invents ids forever does not grow without limit.
_KEY_CACHE_LIMIT: Final = 4096
# DLSN as a plain `type`: annotations are not enforced at run time, so put() checks the class
# (DLSN is @final, so `is` is isinstance), and this alias keeps mypy from calling it unreachable.
_DLSN: Final[type] = DLSN
# DLSN.serialize_bytes() inlined on the hot path, which saves a Python call per put: the
# version-1 layout [version:int8][segment:int64][entry:int64][slot:int64], big-endian.
# tests/test_offsets_leveldb.py holds the two byte-for-byte equal.
_pack_v1: Final = struct.Struct(">bqqq").pack
_VERSION1: Final = 1


@final
class LevelDBOffsetStore(Closing):
    """An :class:`~harness.offsets.base.OffsetStore` in a LevelDB directory, through plyvel.

    ``path`` is the directory (created if missing). LevelDB lets one process (and one handle)
    open it at a time: a directory held elsewhere raises :class:`~harness.errors.StoreLocked`.

    ``sync`` (fixed here) chooses what a write survives: with ``sync=False`` (the default, and
    what the tutorial does) a returned ``put``/``commit`` survives a process crash but a machine
    crash may lose a suffix of the latest writes; with ``sync=True`` every write is fsynced and
    survives a machine crash, at the cost of a disk flush per write.

    ``checks`` (default True) opens the directory with LevelDB's integrity checks: paranoid
    checks on open, verified checksums on every read, a seal on close that catches a truncated
    write-ahead log (:mod:`harness._leveldb`). A damaged directory then raises
    :class:`~harness.errors.CorruptData` naming it, never a different offset. ``checks=False``
    is the benchmark baseline (``bench/bench_offsets.py``): a damaged store may then return
    wrong data silently.

    A stored offset that is not a serialized DLSN, or a reader key that is not UTF-8, raises
    :class:`~harness.errors.CorruptData` naming the directory, the reader id or key and the
    bytes; any other LevelDB failure a :class:`~harness.errors.HarnessError` naming the
    directory. The store can be shared between threads (LevelDB is safe for concurrent use).
    """

    __slots__ = ("_checks", "_db", "_db_get", "_db_put", "_keys", "_path", "_state_keys", "_sync")

    def __init__(
        self, path: str | os.PathLike[str], *, sync: bool = False, checks: bool = True
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise ConfigError(
                f"LevelDBOffsetStore path must be a str or os.PathLike directory, got "
                f"{type(path).__name__}: {shown(path)}; pass e.g. pathlib.Path('offsets')"
            )
        self._sync: bool = validate_sync(sync)
        if type(checks) is not bool:
            raise ConfigError(
                f"LevelDBOffsetStore checks must be True or False, got {shown(checks)}"
            )
        self._checks = checks
        # Reader ids and state keys already validated, mapped to their LevelDB keys.
        self._keys: dict[object, bytes] = {}
        self._state_keys: dict[object, bytes] = {}
        db = open_leveldb(path, checks=checks)
        self._path: Path = Path(path)
        self._db: plyvel.DB | None = db
        self._db_get: Callable[[bytes], bytes | None] = (
            partial(db.get, **VERIFY) if checks else db.get
        )
        # put() calls this directly: one attribute load instead of a load, a method lookup
        # and a branch on sync.
        self._db_put: Callable[[bytes, bytes], None] | None = (
            partial(db.put, sync=True) if sync else db.put
        )

    @property
    def sync(self) -> bool:
        """Whether every write is fsynced before the call returns (fixed at construction)."""
        return self._sync

    @property
    def path(self) -> Path:
        """The LevelDB directory."""
        return self._path

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._db is None

    def __repr__(self) -> str:
        state = ", closed" if self._db is None else ""
        return f"LevelDBOffsetStore({str(self._path)!r}, sync={self._sync}{state})"

    # The hot path (see bench/bench_offsets.py): a cached key, a type check, one struct.pack
    # and one db.put; everything else is on the slow path of a first-seen or bad argument.
    def put(self, reader_id: str, dlsn: DLSN) -> None:
        """Store ``dlsn`` as the offset of ``reader_id`` (last write wins)."""
        db_put = self._db_put
        if db_put is None:
            raise self._closed("put")
        try:
            key = self._keys[reader_id]
        except (KeyError, TypeError):
            key = self._reader_key(reader_id)
        if type(dlsn) is not _DLSN:
            validate_dlsn(dlsn, reader_id)
        try:
            db_put(key, _pack_v1(_VERSION1, dlsn.segment, dlsn.entry, dlsn.slot))
        except plyvel_error() as exc:
            raise leveldb_error(
                exc, self._path, f"writing the offset of {shown(reader_id)}"
            ) from None

    def get(self, reader_id: str) -> DLSN | None:
        """The last DLSN stored for ``reader_id``, or ``None`` if it has none."""
        db = self._db
        if db is None:
            raise self._closed("get")
        try:
            key = self._keys[reader_id]
        except (KeyError, TypeError):
            key = self._reader_key(reader_id)
        try:
            value = self._db_get(key)
        except plyvel_error() as exc:
            raise leveldb_error(
                exc, self._path, f"reading the offset of {shown(reader_id)}"
            ) from None
        if value is None:
            return None
        return self._decode(reader_id, key, value)

    def get_state(self, key: str) -> bytes | None:
        """The state value last committed under ``key``, or ``None`` if there is none."""
        db = self._db
        if db is None:
            raise self._closed("get_state")
        try:
            stored_key = self._state_keys[key]
        except (KeyError, TypeError):
            stored_key = self._state_key(key)
        try:
            return self._db_get(stored_key)
        except plyvel_error() as exc:
            raise leveldb_error(exc, self._path, f"reading state key {shown(key)}") from None

    def commit(
        self,
        offsets: Mapping[str, DLSN],
        state: Mapping[str, bytes | None] = NO_STATE,
    ) -> None:
        """Apply every offset and state entry in one LevelDB write batch.

        Every argument is validated before the batch is written, so a bad one raises
        :class:`~harness.errors.ConfigError` and nothing is written. A ``None`` state value
        deletes the key. Committing nothing writes nothing.
        """
        db = self._db
        if db is None:
            raise self._closed("commit")
        if type(offsets) is not dict or (state is not NO_STATE and type(state) is not dict):
            validate_commit_mappings(offsets, state)
        if not offsets and not state:
            return
        # Entries are checked as they are added: the batch lives in memory until write(),
        # so a bad entry discards it with nothing written.
        batch = db.write_batch(sync=self._sync)
        keys = self._keys
        for reader_id, dlsn in offsets.items():
            try:
                key = keys[reader_id]
            except (KeyError, TypeError):
                key = self._reader_key(reader_id)
            if type(dlsn) is not _DLSN:
                validate_dlsn(dlsn, reader_id)
            batch.put(key, _pack_v1(_VERSION1, dlsn.segment, dlsn.entry, dlsn.slot))
        state_keys = self._state_keys
        # object-typed, because the values are checked here (annotations are not enforced)
        state_items: Iterable[tuple[object, object]] = state.items()
        for name, value in state_items:
            try:
                key = state_keys[name]
            except (KeyError, TypeError):
                key = self._state_key(name)
            if value is None:
                batch.delete(key)
            elif type(value) is bytes or isinstance(value, bytes):
                batch.put(key, value)
            else:
                validate_state_value(value, name)
        try:
            batch.write()
        except plyvel_error() as exc:
            raise leveldb_error(exc, self._path, "writing a commit") from None

    def readers(self) -> list[str]:
        """The ids of the readers that have an offset, sorted.

        LevelDB orders keys bytewise, and UTF-8 preserves code point order, so this is the
        order of ``sorted()`` on the ids.
        """
        db = self._db
        if db is None:
            raise self._closed("readers")
        try:
            keys = [key for key, _ in scan(db, start=_FIRST_READER_KEY, checks=self._checks)]
        except plyvel_error() as exc:
            raise leveldb_error(exc, self._path, "reading the reader ids") from None
        ids = []
        for key in keys:
            try:
                ids.append(key.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise CorruptData(
                    f"offset store {shown(str(self._path))}: key {shown(key)} is not a UTF-8 "
                    f"reader id ({exc.reason} at byte {exc.start}); it was not written by an "
                    "offset store. Remove it with another LevelDB client, or restore the "
                    "directory from a backup"
                ) from None
        return ids

    def close(self) -> None:
        """Close the database (releasing the directory lock); closing again does nothing."""
        db = self._db
        if db is not None:
            self._db = None
            self._db_put = None
            self._keys.clear()
            self._state_keys.clear()
            close_leveldb(db, self._path, checks=self._checks)

    def __enter__(self) -> LevelDBOffsetStore:
        if self._db is None:
            raise self._closed("__enter__")
        return self

    def _reader_key(self, reader_id: object) -> bytes:
        key = validate_reader_id(reader_id)
        if len(self._keys) >= _KEY_CACHE_LIMIT:
            self._keys.clear()
        self._keys[reader_id] = key
        return key

    def _state_key(self, name: object) -> bytes:
        key = STATE_KEY_PREFIX + validate_state_key(name)
        if len(self._state_keys) >= _KEY_CACHE_LIMIT:
            self._state_keys.clear()
        self._state_keys[name] = key
        return key

    def _decode(self, reader_id: str, key: bytes, value: bytes) -> DLSN:
        try:
            return DLSN.deserialize_bytes(value)
        except InvalidDLSN:
            raise CorruptData(
                f"offset store {shown(str(self._path))}: the offset of reader {shown(reader_id)} "
                f"(key {shown(key)}) is not a serialized DLSN: {len(value)} bytes {shown(value)}, "
                "expected the 25 bytes of DLSN.serialize_bytes(). Overwrite it with "
                f"put({reader_id!r}, dlsn), or restore the directory from a backup"
            ) from None

    def _closed(self, method: str) -> AlreadyClosed:
        return AlreadyClosed(
            f"{method}() on a closed offset store ({str(self._path)!r}); open a new "
            f"LevelDBOffsetStore({str(self._path)!r}) instead"
        )
