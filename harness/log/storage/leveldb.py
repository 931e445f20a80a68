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

Each database is opened with LevelDB's integrity checks (paranoid checks, verified checksums on
every read, the seal of a clean close: :mod:`harness._leveldb`) unless the namespace was opened
with ``checks=False``; damage raises :class:`~harness.errors.CorruptData` naming the log and the
directory, never different records.
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import struct
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, Final
from urllib.parse import quote, unquote

from harness._leveldb import (
    VERIFY,
    close_leveldb,
    leveldb_error,
    open_leveldb,
    plyvel_error,
    scan,
)
from harness._shown import shown
from harness.errors import (
    ConfigError,
    CorruptData,
    HarnessError,
    LogNotFound,
    OwnershipAcquireFailed,
    StoreLocked,
)
from harness.log.record import StoredRecord
from harness.log.storage.base import LogMetadata

__all__ = [
    "EntryColumns",
    "LevelDBLogStorage",
    "LevelDBNamespaceStorage",
    "decode_columns",
    "decode_entry",
    "encode_entry",
]

_META_KEY: Final = b"m"
_SEGMENT_PREFIX: Final = b"s"
_ENTRY_PREFIX: Final = b"e"
_ENTRY_END: Final = b"f"
_SEGMENT_END: Final = b"t"
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


EntryColumns = tuple[Sequence[int], Sequence[bytes], Sequence[int], Sequence[int]]
"""An entry's records column by column: txids, payloads, flags, positions."""


@functools.lru_cache(maxsize=64)
def _uniform(length: int) -> struct.Struct:
    """A record (header and ``length`` payload bytes) as one struct."""
    return struct.Struct(f"{_HEADER.format}{length}s")


def decode_columns(data: bytes, *, where: str) -> EntryColumns:
    """:func:`decode_entry`'s records as columns: the same values and the same errors, decoded
    in C (``struct.iter_unpack``) when every record of the entry has the same payload length,
    as a writer of fixed-size records stores them; otherwise through :func:`decode_entry`."""
    size = len(data)
    if size >= _HEADER.size:
        length = _HEADER.unpack_from(data)[2]
        if length >= 0 and size % (_HEADER.size + length) == 0:
            metas, txids, lengths, payloads = zip(*_uniform(length).iter_unpack(data), strict=True)
            # the same offsets as decode_entry's walk only if every header says ``length``
            if lengths.count(length) == len(lengths):
                return (
                    txids,
                    payloads,
                    [meta & _FLAGS_MASK for meta in metas],
                    [meta >> _SHIFT for meta in metas],
                )
    records = decode_entry(data, where=where)
    if not records:
        return (), (), (), ()
    txids, payloads, flags, positions = zip(*records, strict=True)
    return txids, payloads, flags, positions


def _entry_key(segment: int, entry: int) -> bytes:
    return _ENTRY_KEY.pack(_ENTRY_PREFIX, segment, entry)


def _segment_key(segment: int) -> bytes:
    return _SEGMENT_PREFIX + _U64.pack(segment)


class _SharedLog:
    """The one open LevelDB handle of a log in this process, shared by its storages."""

    def __init__(self, name: str, directory: Path, *, checks: bool) -> None:
        self.name = name
        self.directory = directory
        self.checks = checks
        self.verify: dict[str, bool] = dict(VERIFY) if checks else {}
        self.db = open_leveldb(directory / "db", checks=checks)
        self.references = 0
        self.deleted = False
        self.writer_file: IO[bytes] | None = None
        self.pending: list[tuple[bytes, bytes]] = []
        self.pending_bytes = 0
        try:
            self.metadata = self._load_metadata()
        except BaseException:
            self.db.close()
            raise

    def failed(self, exc: BaseException, action: str) -> HarnessError:
        """The typed error for plyvel's ``exc``, naming this log."""
        return leveldb_error(exc, self.directory / "db", f"{action} of log {shown(self.name)}")

    def close(self) -> None:
        close_leveldb(self.db, self.directory / "db", checks=self.checks)

    def drop_pending(self) -> None:
        """Forget the transmitted entries not yet written with a commit."""
        self.pending.clear()
        self.pending_bytes = 0

    def _load_metadata(self) -> LogMetadata:
        where = f"LevelDB log {shown(self.name)} at {shown(str(self.directory))}"
        try:
            raw = self.db.get(_META_KEY, **self.verify)
            stored = scan(self.db, start=_SEGMENT_PREFIX, stop=_SEGMENT_END, checks=self.checks)
        except plyvel_error() as exc:
            raise self.failed(exc, "reading the metadata") from None
        if raw is None:
            if stored:
                raise CorruptData(
                    f"{where}: segment metadata without log metadata; the log is damaged: "
                    "restore it or delete it"
                )
            return LogMetadata()
        return LogMetadata.decode(raw, stored, where=where)


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
            try:
                self._write_pending(db.write_batch(sync=False)).write()
            except plyvel_error() as exc:
                raise shared.failed(exc, "writing entries") from None

    def _write_pending(self, batch: Any) -> Any:
        shared = self._shared
        for key, value in shared.pending:
            batch.put(key, value)
        shared.drop_pending()
        return batch

    def commit(self, metadata: LogMetadata, *, changed: Sequence[int], sync: bool) -> None:
        db = self._db()
        batch = self._write_pending(db.write_batch(sync=sync))
        for number in changed:
            segment = metadata.segment(number)
            if segment is not None:
                batch.put(_segment_key(number), json.dumps(segment.to_json()).encode())
        batch.put(_META_KEY, json.dumps(metadata.log_json()).encode())
        try:
            batch.write()
        except plyvel_error() as exc:
            raise self._shared.failed(exc, "committing") from None
        self._shared.metadata = metadata

    def read_entries(
        self, segment: int, first_entry: int, last_entry: int
    ) -> Iterator[tuple[int, tuple[StoredRecord, ...]]]:
        for entry, value in self._stored(segment, first_entry, last_entry):
            yield entry, decode_entry(value, where=self._where(segment, entry))

    def read_entry_columns(
        self, segment: int, first_entry: int, last_entry: int
    ) -> Iterator[tuple[int, EntryColumns]]:
        """:meth:`read_entries`, each entry's records as columns (:func:`decode_columns`)."""
        for entry, value in self._stored(segment, first_entry, last_entry):
            yield entry, decode_columns(value, where=self._where(segment, entry))

    def _stored(self, segment: int, first_entry: int, last_entry: int) -> list[tuple[int, bytes]]:
        """The stored bytes of the entries of ``segment`` in [first_entry, last_entry]."""
        db = self._db()
        start = _entry_key(segment, first_entry)
        stop = _entry_key(segment, last_entry + 1)
        # Read all before decoding, so that a LevelDB error is raised here, where it is typed.
        try:
            stored = scan(db, start=start, stop=stop, checks=self._shared.checks)
        except plyvel_error() as exc:
            raise self._shared.failed(exc, f"reading segment {segment}") from None
        return [(_ENTRY_KEY.unpack(key)[2], value) for key, value in stored]

    def discard_uncommitted(self) -> None:
        db = self._db()
        self._shared.drop_pending()
        committed = self._shared.metadata.committed
        start = _ENTRY_PREFIX if committed is None else _entry_key(committed[0], committed[1] + 1)
        try:
            with db.write_batch(sync=True) as batch:
                for key, _ in scan(db, start=start, stop=_ENTRY_END, checks=self._shared.checks):
                    batch.delete(key)
        except plyvel_error() as exc:
            raise self._shared.failed(exc, "discarding uncommitted entries") from None

    def purge_segment(self, segment: int) -> None:
        db = self._db()
        start, stop = _entry_key(segment, 0), _ENTRY_PREFIX + _U64.pack(segment + 1)
        try:
            with db.write_batch() as batch:
                for key, _ in scan(db, start=start, stop=stop, checks=self._shared.checks):
                    batch.delete(key)
        except plyvel_error() as exc:
            raise self._shared.failed(exc, f"purging segment {segment}") from None

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
                shared.close()


class LevelDBNamespaceStorage:
    """The logs under one directory, each in a LevelDB database of its own."""

    def __init__(self, root: str | os.PathLike[str], *, checks: bool = True) -> None:
        self.checks = checks
        text = os.fspath(root)
        if "\0" in text or any("\ud800" <= char <= "\udfff" for char in text):
            raise ConfigError(
                f"namespace path {shown(text)} contains NUL or a lone surrogate, which no file "
                "system allows; pass a directory path without it"
            )
        self.root = Path(root).absolute()
        self.description = f"distributedlog-leveldb://{self.root}"
        try:
            if self.root.exists() and not self.root.is_dir():
                raise ConfigError(
                    f"namespace path {shown(str(self.root))} exists and is not a directory; "
                    "pass a directory (it is created if missing)"
                )
            (self.root / "logs").mkdir(parents=True, exist_ok=True)
            marker = self.root / "NAMESPACE"
            if not marker.exists():
                marker.write_text('{"format": 1}\n')
        except OSError as exc:
            raise ConfigError(
                f"cannot use {shown(str(self.root))} as a namespace directory: {exc.strerror}; "
                "pass a writable directory path that the file system accepts"
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
        try:
            if (directory / "LOG").exists():
                return
            directory.mkdir(parents=True, exist_ok=True)
            temporary = directory / "LOG.tmp"
            temporary.write_text(json.dumps({"format": 1, "name": name}) + "\n")
            os.replace(temporary, directory / "LOG")
        except OSError as exc:
            raise ConfigError(
                f"cannot create log {shown(name)} in {shown(self.description)}: "
                f"{exc.strerror}; use a shorter namespace path or log name"
            ) from None

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
                    shared = _SharedLog(name, directory, checks=self.checks)
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
