"""Durable storage on LevelDB through plyvel: one LevelDB directory per log.

Layout under the namespace root (``distributedlog-leveldb:///ROOT``)::

    ROOT/NAMESPACE                     marker: this directory is a namespace
    ROOT/logs/<quoted name>/LOG        marker: the log exists (holds its name)
    ROOT/logs/<quoted name>/writer.lock  flock(2)-held by the log's writer
    ROOT/logs/<quoted name>/db/        the LevelDB database

Keys in ``db``: ``m`` (log metadata, JSON), ``s`` + segment (segment metadata, JSON),
``e`` + segment + entry (the entry's records), numbers as 8-byte big-endian so that
keys sort in log order. An entry is its records back to back in DistributedLog's
wire format: ``metadata:int64 | txid:int64 | length:int32 | payload``, where the
metadata holds the flags in bits 0-15 and the position in the segment in bits 16-47.

Transmitted entries wait in memory and go to LevelDB in the same write batch as the
metadata of the next commit, so entries and the visibility point change atomically
(synced when the config asks). Nothing uncommitted is ever on disk, except when more
than ``_SPILL_BYTES`` pile up between commits: they are then written ahead, unsynced,
and a new writer's recovery deletes them. A process crash therefore loses exactly the
uncommitted records; a machine crash after an unsynced commit may lose that commit too,
and readers never see past the last commit that survived.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import struct
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final
from urllib.parse import quote, unquote

from harness._leveldb import open_leveldb
from harness.errors import (
    ConfigError,
    CorruptData,
    LogNotFound,
    OwnershipAcquireFailed,
    StoreLocked,
)
from harness.log.record import StoredRecord
from harness.log.storage.base import LogMetadata

__all__ = ["LevelDBLogStorage", "LevelDBNamespaceStorage", "decode_entry", "encode_entry"]

_META_KEY: Final = b"m"
_SEGMENT_PREFIX: Final = b"s"
_ENTRY_PREFIX: Final = b"e"
_ENTRY_END: Final = b"f"
_U64: Final = struct.Struct(">Q")
_ENTRY_KEY: Final = struct.Struct(">cQQ")
_HEADER: Final = struct.Struct(">qqi")
_SHIFT: Final = 16  # the position's place in a record's metadata
_FLAGS_MASK: Final = 0xFFFF
_SPILL_BYTES: Final = 16 * 1024 * 1024


def encode_entry(records: Sequence[StoredRecord]) -> bytes:
    """Records back to back in DistributedLog's record wire format."""
    pack = _HEADER.pack
    out = bytearray()
    for txid, payload, flags, position in records:
        out += pack(flags | (position << _SHIFT), txid, len(payload))
        out += payload
    return bytes(out)


def decode_entry(data: bytes, *, where: str) -> tuple[StoredRecord, ...]:
    """Inverse of :func:`encode_entry`; damaged bytes raise :class:`CorruptData` naming where."""
    records: list[StoredRecord] = []
    offset = 0
    size = len(data)
    unpack = _HEADER.unpack_from
    header = _HEADER.size
    while offset < size:
        if size - offset < header:
            raise CorruptData(
                f"{where}: truncated record header at byte {offset} of {size} "
                f"({data[offset : offset + 32]!r}); the log is damaged: restore or delete it"
            )
        metadata, txid, length = unpack(data, offset)
        offset += header
        if length < 0 or offset + length > size:
            raise CorruptData(
                f"{where}: record at byte {offset - header} claims {length} payload bytes but "
                f"{size - offset} remain; the log is damaged: restore it or delete the log"
            )
        records.append(
            (txid, data[offset : offset + length], metadata & _FLAGS_MASK, metadata >> _SHIFT)
        )
        offset += length
    return tuple(records)


def _entry_key(segment: int, entry: int) -> bytes:
    return _ENTRY_KEY.pack(_ENTRY_PREFIX, segment, entry)


def _segment_key(segment: int) -> bytes:
    return _SEGMENT_PREFIX + _U64.pack(segment)


class _SharedLog:
    """The one open LevelDB handle of a log in this process, shared by its storages."""

    def __init__(self, name: str, directory: Path) -> None:
        self.name = name
        self.directory = directory
        self.db = open_leveldb(directory / "db")
        self.references = 0
        self.deleted = False
        self.writer_file: IO[bytes] | None = None
        self.pending: list[tuple[bytes, bytes]] = []
        self.pending_bytes = 0
        self.metadata = self._load_metadata()

    def drop_pending(self) -> None:
        """Forget the transmitted entries not yet written with a commit."""
        self.pending.clear()
        self.pending_bytes = 0

    def _load_metadata(self) -> LogMetadata:
        raw = self.db.get(_META_KEY)
        where = f"LevelDB log {self.name!r} at {str(self.directory)!r}"
        if raw is None:
            return LogMetadata()
        try:
            log = json.loads(raw)
            segments = [json.loads(value) for _, value in self.db.iterator(prefix=_SEGMENT_PREFIX)]
        except (ValueError, UnicodeDecodeError) as exc:
            raise CorruptData(
                f"{where}: metadata is not valid JSON ({exc}); restore the log or delete it"
            ) from None
        if not isinstance(log, dict) or not all(isinstance(s, dict) for s in segments):
            raise CorruptData(f"{where}: metadata has the wrong shape; restore or delete the log")
        return LogMetadata.from_json(log, segments, where=where)


_OPEN: dict[Path, _SharedLog] = {}
_OPEN_LOCK = threading.Lock()


class LevelDBLogStorage:
    """A handle on one log's LevelDB database (handles in one process share the database)."""

    def __init__(self, shared: _SharedLog) -> None:
        self._shared = shared
        self._closed = False

    @property
    def metadata(self) -> LogMetadata:
        return self._shared.metadata

    @property
    def deleted(self) -> bool:
        return self._shared.deleted

    def _db(self) -> Any:
        if self._shared.deleted:
            raise LogNotFound(
                f"log {self._shared.name!r} was deleted; create it again to reuse the name"
            )
        return self._shared.db

    def _where(self, segment: int, entry: int) -> str:
        return (
            f"LevelDB log {self._shared.name!r} at {str(self._shared.directory)!r}, "
            f"entry key {_entry_key(segment, entry)!r} (segment {segment}, entry {entry})"
        )

    def append_entry(self, segment: int, entry: int, records: tuple[StoredRecord, ...]) -> None:
        db = self._db()
        shared = self._shared
        value = encode_entry(records)
        shared.pending.append((_entry_key(segment, entry), value))
        shared.pending_bytes += len(value)
        if shared.pending_bytes > _SPILL_BYTES:
            self._write_pending(db.write_batch(sync=False)).write()

    def _write_pending(self, batch: Any) -> Any:
        shared = self._shared
        for key, value in shared.pending:
            batch.put(key, value)
        shared.drop_pending()
        return batch

    def commit(self, metadata: LogMetadata, *, changed: Sequence[int], sync: bool) -> None:
        db = self._db()
        with self._write_pending(db.write_batch(sync=sync)) as batch:
            for number in changed:
                segment = metadata.segment(number)
                if segment is not None:
                    batch.put(_segment_key(number), json.dumps(segment.to_json()).encode())
            batch.put(_META_KEY, json.dumps(metadata.log_json()).encode())
        self._shared.metadata = metadata

    def read_entries(
        self, segment: int, first_entry: int, last_entry: int
    ) -> Iterator[tuple[int, tuple[StoredRecord, ...]]]:
        db = self._db()
        start = _entry_key(segment, first_entry)
        stop = _entry_key(segment, last_entry + 1)
        for key, value in db.iterator(start=start, stop=stop):
            _, _, entry = _ENTRY_KEY.unpack(key)
            yield entry, decode_entry(value, where=self._where(segment, entry))

    def discard_uncommitted(self) -> None:
        db = self._db()
        self._shared.drop_pending()
        committed = self._shared.metadata.committed
        start = _ENTRY_PREFIX if committed is None else _entry_key(committed[0], committed[1] + 1)
        with db.write_batch(sync=True) as batch:
            for key in db.iterator(start=start, stop=_ENTRY_END, include_value=False):
                batch.delete(key)

    def purge_segment(self, segment: int) -> None:
        db = self._db()
        with db.write_batch() as batch:
            for key in db.iterator(prefix=_ENTRY_PREFIX + _U64.pack(segment), include_value=False):
                batch.delete(key)

    def acquire_writer(self) -> None:
        self._db()
        shared = self._shared
        if shared.writer_file is not None:
            raise OwnershipAcquireFailed(
                f"log {shared.name!r} already has a writer in this process; close it before "
                "opening another: DistributedLog allows one writer per log"
            )
        handle = open(shared.directory / "writer.lock", "ab")  # noqa: SIM115 - held until release
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise OwnershipAcquireFailed(
                f"log {shared.name!r} at {str(shared.directory)!r} is owned by a writer in "
                "another process; stop that writer (or wait for it to close) before opening "
                "another: DistributedLog allows one writer per log"
            ) from None
        shared.writer_file = handle

    def release_writer(self) -> None:
        self._shared.drop_pending()  # a writer that goes away uncommitted loses its entries
        handle = self._shared.writer_file
        if handle is not None:
            self._shared.writer_file = None
            fcntl.flock(handle, fcntl.LOCK_UN)
            handle.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with _OPEN_LOCK:
            shared = self._shared
            shared.references -= 1
            if shared.references <= 0 and not shared.deleted:
                _OPEN.pop(shared.directory, None)
                shared.db.close()


class LevelDBNamespaceStorage:
    """The logs under one directory, each in a LevelDB database of its own."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()
        self.description = f"distributedlog-leveldb://{self.root}"
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(
                f"namespace path {str(self.root)!r} exists and is not a directory; "
                "pass a directory (it is created if missing)"
            )
        try:
            (self.root / "logs").mkdir(parents=True, exist_ok=True)
            marker = self.root / "NAMESPACE"
            if not marker.exists():
                marker.write_text('{"format": 1}\n')
        except OSError as exc:
            raise ConfigError(
                f"cannot use {str(self.root)!r} as a namespace directory: {exc.strerror} "
                f"({exc.filename}); pass a writable directory path"
            ) from None

    def _directory(self, name: str) -> Path:
        # Percent-quoting with no safe characters maps every valid name to one path
        # component, so no name can reach outside the namespace directory.
        return self.root / "logs" / quote(name, safe="")

    def log_names(self) -> list[str]:
        names = []
        for child in (self.root / "logs").iterdir():
            if (child / "LOG").exists():
                names.append(unquote(child.name))
        return sorted(names)

    def exists(self, name: str) -> bool:
        return (self._directory(name) / "LOG").exists()

    def create(self, name: str) -> None:
        directory = self._directory(name)
        if (directory / "LOG").exists():
            return
        directory.mkdir(parents=True, exist_ok=True)
        temporary = directory / "LOG.tmp"
        temporary.write_text(json.dumps({"format": 1, "name": name}) + "\n")
        os.replace(temporary, directory / "LOG")

    def delete(self, name: str) -> None:
        directory = self._directory(name)
        if not (directory / "LOG").exists():
            raise LogNotFound(f"log {name!r} does not exist in {self.description}")
        with _OPEN_LOCK:
            shared = _OPEN.pop(directory, None)
            if shared is not None:
                shared.deleted = True
                shared.db.close()
        # The marker goes first so that a crash half-way leaves no log that looks alive.
        (directory / "LOG").unlink()
        shutil.rmtree(directory)

    def open(self, name: str) -> LevelDBLogStorage:
        directory = self._directory(name)
        if not (directory / "LOG").exists():
            raise LogNotFound(
                f"log {name!r} does not exist in {self.description}; create it with "
                "namespace.create_log(name) or write to it first"
            )
        with _OPEN_LOCK:
            shared = _OPEN.get(directory)
            if shared is None:
                try:
                    shared = _SharedLog(name, directory)
                except StoreLocked as exc:
                    raise StoreLocked(
                        f"log {name!r} is open in another process (the LevelDB backend serves a "
                        "log to one process at a time); close it there first, or read it after "
                        f"that process exits. Detail: {exc}"
                    ) from None
                _OPEN[directory] = shared
            shared.references += 1
        return LevelDBLogStorage(shared)

    def close(self) -> None:
        """Handles are closed by their log managers."""
