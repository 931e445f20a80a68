"""Opening and closing LevelDB through plyvel, with its integrity checks on and typed errors.

Promises, for every LevelDB database the harness opens (the LevelDB log backend and the LevelDB
offset store both go through :func:`open_leveldb` and :func:`close_leveldb`):

* with ``checks=True`` (the default) the database is opened with LevelDB's
  ``paranoid_checks``, so a damaged write-ahead log, manifest or table stops the open instead
  of being skipped, and every read passes ``verify_checksums=True`` (:data:`VERIFY`), so a
  damaged table block raises instead of decoding to different data;
* :func:`scan` reads a key range so that a damaged block raises: plyvel's ordinary iterator
  steps over a block whose checksum fails and ends quietly, returning fewer keys;
* a clean close leaves a *seal* (:data:`SEAL_NAME`): the size and SHA-256 of CURRENT, the
  manifest and the write-ahead logs (fsynced first), and the size of every table. LevelDB
  takes a write-ahead log or manifest cut short, or one whose record length a flipped bit
  made too large, for a crash in mid-write and silently drops its tail, even with paranoid
  checks; the next :func:`open_leveldb` compares the files with the seal and raises
  :class:`~harness.errors.CorruptData` when one differs, is shorter or is gone, so committed
  data never vanishes quietly (format-1 seals, which recorded sizes only, are still read).
  A process that dies leaves no seal (its losses are the crash semantics LevelDB promises),
  and neither does ``checks=False``. Without a seal that applies, the open scans the
  write-ahead logs and the manifest instead (:func:`harness._wal.damaged_length`) and refuses
  a record that is whole but whose length field is damaged, while letting a write truly torn
  by the crash be dropped; what it cannot see is a file cut exactly at a record boundary, or
  gone, which without a seal looks like a crash (``docs/log.md``, "Damaged stores"). Checking
  the seal and opening, and closing and sealing, are each one step between processes (an
  flock on :data:`SEAL_LOCK_NAME`), so processes racing for one directory get the database
  or :class:`~harness.errors.StoreLocked`, never an error of a half-read seal;
* every plyvel error becomes a :class:`~harness.errors.HarnessError` naming the directory
  (:func:`leveldb_error`): :class:`~harness.errors.CorruptData` for damage,
  :class:`~harness.errors.StoreLocked` for a held lock, :class:`~harness.errors.StorageFailed`
  for other I/O failures.

plyvel is imported here, lazily, so that importing :mod:`harness` (or loading the pytest
plugin) does not load it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from harness._json import parse_json
from harness._shown import shown
from harness._wal import damaged_length
from harness.errors import (
    ConfigError,
    CorruptData,
    HarnessError,
    MissingDependency,
    StorageFailed,
    StoreLocked,
)

if TYPE_CHECKING:
    import plyvel

__all__ = [
    "SEAL_LOCK_NAME",
    "SEAL_NAME",
    "VERIFY",
    "close_leveldb",
    "leveldb_error",
    "open_leveldb",
    "plyvel_error",
    "scan",
]

SEAL_NAME: Final = "HARNESS-SEAL"
"""The file a clean close leaves in the database directory (see the module docstring)."""

VERIFY: Final[Mapping[str, bool]] = {"verify_checksums": True}
"""Keyword arguments of every checked read (``db.get(key, **VERIFY)``, ``db.iterator(...)``)."""

SEAL_LOCK_NAME: Final = "HARNESS-SEAL.lock"
"""The file whose lock makes opening and closing one step each between processes."""

_SEAL_FORMAT: Final = 2
# Opening (seal check, then plyvel) and closing (plyvel, then seal) are one step each for the
# threads of this process, and, through an flock on SEAL_LOCK_NAME, for other processes: no
# one reads a seal another is writing, unlinks one another has unlinked, or opens the database
# between another's close and its seal (whose sizes would then describe the opener's files).
_SEAL_LOCK = threading.Lock()


def _plyvel() -> Any:
    try:
        import plyvel
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependency(
            f"the LevelDB backend needs plyvel, which failed to import ({exc}); "
            "install it with `pip install plyvel` (wheels exist for CPython 3.10-3.12 on "
            "x86_64; elsewhere install libleveldb-dev first so it can build)"
        ) from exc
    return plyvel


def plyvel_error() -> type[Exception]:
    """plyvel's root exception class (catch it around LevelDB calls, then :func:`leveldb_error`)."""
    error: type[Exception] = _plyvel().Error
    return error


def _said(exc: BaseException) -> str:
    """LevelDB's own words (plyvel passes them as bytes)."""
    detail = exc.args[0] if exc.args else exc
    if isinstance(detail, bytes):
        return detail.decode("utf-8", "backslashreplace")
    return str(detail)


def leveldb_error(exc: BaseException, path: str | os.PathLike[str], action: str) -> HarnessError:
    """The typed error for plyvel's ``exc``, raised while ``action`` the database at ``path``."""
    plyvel = _plyvel()
    where = shown(str(path))
    said = _said(exc)
    if isinstance(exc, plyvel.CorruptionError) or said.startswith("Corruption"):
        return CorruptData(
            f"LevelDB directory {where} is damaged ({action}: LevelDB said {shown(said)}); "
            "restore it from a backup, or delete it to start from an empty store"
        )
    if isinstance(exc, plyvel.IOError) and "lock" in said.lower():
        return StoreLocked(
            f"LevelDB directory {where} is locked by another process or by another open "
            "handle in this one (LevelDB allows a single process at a time). Close the other "
            "handle or stop the process that holds it, or give each process its own directory "
            f"(for example one per pytest-xdist worker). LevelDB said: {shown(said)}"
        )
    if action.startswith("reading") and isinstance(exc, plyvel.IOError):
        # A read that fails below LevelDB (a table shorter than its index says, EIO) means the
        # stored bytes cannot be trusted.
        return CorruptData(
            f"LevelDB directory {where} cannot be read ({action}: {shown(said)}): a table is "
            "damaged or unreadable; restore it from a backup, or delete it to start over"
        )
    return StorageFailed(
        f"LevelDB directory {where} failed while {action}: {shown(said)}; check that the "
        "path is writable, on a local file system, and that the disk is not full"
    )


def open_leveldb(
    path: str | os.PathLike[str], *, create_if_missing: bool = True, checks: bool = True
) -> plyvel.DB:
    """Open the LevelDB database at ``path`` (see the module docstring for ``checks``).

    Raises :class:`StoreLocked` when another process (or another open handle in this
    process) holds the directory, :class:`CorruptData` when LevelDB reports damage or the
    seal shows a truncated file, and :class:`ConfigError` when the path is unusable.
    """
    plyvel = _plyvel()
    target = _directory(path, create_if_missing=create_if_missing)
    with _sealing(target, checks=checks):
        if checks:
            _check_seal(target)
        try:
            return plyvel.DB(
                str(target), create_if_missing=create_if_missing, paranoid_checks=checks
            )
        except plyvel.Error as exc:
            if not create_if_missing and "does not exist" in _said(exc):
                raise ConfigError(
                    f"no LevelDB database at {shown(str(target))}; create it first or pass "
                    "create_if_missing=True"
                ) from None
            raise leveldb_error(exc, target, "opening it") from None


def close_leveldb(db: plyvel.DB, path: str | os.PathLike[str], *, checks: bool = True) -> None:
    """Close ``db`` (opened on ``path`` by :func:`open_leveldb`) and, with ``checks``, seal it."""
    with _sealing(Path(path), checks=checks):
        db.close()
        if checks:
            _write_seal(Path(path))


def scan(
    db: plyvel.DB, *, start: bytes, stop: bytes | None = None, checks: bool = True
) -> list[tuple[bytes, bytes]]:
    """Every ``(key, value)`` with ``start <= key < stop`` (``stop=None``: to the end), in order.

    With ``checks``, checksums are verified and LevelDB's iterator status is checked after every
    step, so a damaged block raises plyvel's error (map it with :func:`leveldb_error`) instead
    of being skipped.
    """
    iterator = db.raw_iterator(verify_checksums=checks)
    found: list[tuple[bytes, bytes]] = []
    try:
        iterator.seek(start)
        while iterator.valid():
            key: bytes = iterator.key()
            if stop is not None and key >= stop:
                break
            found.append((key, iterator.value()))
            iterator.next()
    finally:
        iterator.close()
    return found


@contextmanager
def _sealing(directory: Path, *, checks: bool) -> Iterator[None]:
    """Hold the seal's locks: this process's, then (with ``checks``) the directory's flock.

    Without a directory there is no seal to guard (LevelDB's open creates it, or reports it
    missing); where the lock file cannot be made (a read-only directory) or flock is missing,
    the process lock alone remains, as before.
    """
    with _SEAL_LOCK:
        descriptor = _lock_file(directory) if checks else None
        try:
            yield
        finally:
            if descriptor is not None:
                os.close(descriptor)  # releases the flock


def _lock_file(directory: Path) -> int | None:
    """An open descriptor of the directory's seal lock file, flocked; or None (see _sealing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return None
    try:
        descriptor = os.open(directory / SEAL_LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
    except OSError:  # pragma: no cover - a file system without flock
        os.close(descriptor)
        return None
    return descriptor


def _directory(path: str | os.PathLike[str], *, create_if_missing: bool) -> Path:
    """``path`` as a usable directory path, or :class:`ConfigError` saying why it is not."""
    text: object = os.fspath(path)
    if (
        not isinstance(text, str)
        or not text
        or any(c == "\0" or "\ud800" <= c <= "\udfff" for c in text)
    ):
        raise ConfigError(
            f"LevelDB path {shown(text)} is not a usable directory path (empty, bytes or "
            "containing NUL or a lone surrogate); pass a directory path such as 'offsets'"
        )
    target = Path(text)
    try:
        if target.exists() and not target.is_dir():
            raise ConfigError(
                f"LevelDB path {shown(str(target))} exists and is not a directory; "
                "pass a directory path (it is created if missing)"
            )
        if create_if_missing:
            target.mkdir(parents=True, exist_ok=True)  # so its seal lock file can be made
    except OSError as exc:
        raise ConfigError(
            f"cannot use {shown(str(target))} as a LevelDB directory: {exc.strerror}; pass a "
            "shorter, writable directory path"
        ) from None
    return target


def _current(directory: Path) -> str:
    """The manifest CURRENT names."""
    return (directory / "CURRENT").read_text(encoding="utf-8", errors="replace").strip()


def _digest(path: Path) -> str:
    """The SHA-256 of the file at ``path``, read in blocks of 1 MiB."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while block := stream.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _fdatasync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(descriptor)
    finally:
        os.close(descriptor)


def _write_seal(directory: Path) -> None:
    """Record the closed database's files; best effort (no seal means no check, never an alarm).

    CURRENT, the manifest and the non-empty write-ahead logs (the files in LevelDB's log
    format, whose damage LevelDB can mistake for a torn write) get their size and SHA-256;
    tables their size (each table block carries a checksum LevelDB verifies).
    """
    try:
        current = _current(directory)
        files: dict[str, dict[str, object]] = {}
        for path in sorted(directory.iterdir()):
            name = path.name
            if name.endswith((".ldb", ".sst")):
                files[name] = {"size": path.stat().st_size}
            elif name.endswith(".log") and path.stat().st_size:
                # The seal must not outlive what it describes: a machine crash after the
                # close must not leave a seal promising writes that never reached the disk.
                # (LevelDB syncs CURRENT and the manifest itself.)
                _fdatasync(path)
                files[name] = {"size": path.stat().st_size, "sha256": _digest(path)}
            elif name in ("CURRENT", current):
                files[name] = {"size": path.stat().st_size, "sha256": _digest(path)}
        seal = {"format": _SEAL_FORMAT, "current": current, "files": files}
        temporary = directory / (SEAL_NAME + ".tmp")
        temporary.write_text(json.dumps(seal, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(temporary, directory / SEAL_NAME)
    except OSError:
        return


def _check_seal(directory: Path) -> None:
    """Raise :class:`CorruptData` if the files differ from the seal's record of them (or, with
    no seal that applies, if a log-format file holds a damaged record length); then unseal."""
    _check_current(directory)
    seal_path = directory / SEAL_NAME
    try:
        text = seal_path.read_bytes()
    except FileNotFoundError:
        _scan_unsealed(directory)
        return
    except OSError as exc:
        raise _bad_seal(seal_path, f"unreadable: {exc.strerror}") from None
    seal = parse_json(
        text,
        what=f"the seal {shown(str(seal_path))}",
        fix="delete it to open the directory as a crash leaves it, without the seal's checks",
        error=CorruptData,
    )
    files = _sealed_files(seal, seal_path)
    try:
        current: str | None = _current(directory)
    except OSError:
        current = None  # LevelDB's open reports the missing CURRENT
    if isinstance(seal, dict) and current == seal["current"]:
        _compare(directory, files)
        if seal["format"] == _SEAL_FORMAT:  # it names every non-empty write-ahead log
            _no_stray_log(directory, files)
    else:
        # Another LevelDB client opened the database since the seal was written: the seal
        # describes files that client legitimately replaced, so it no longer says anything.
        _scan_unsealed(directory)
    seal_path.unlink()


def _check_current(directory: Path) -> None:
    """Raise :class:`CorruptData` if CURRENT is gone from a directory that holds a database:
    LevelDB would take it for no database at all, start a new one and delete the old tables
    (every offset or record held there, gone without an error)."""
    if (directory / "CURRENT").exists():
        return
    held = sorted(
        path.name
        for pattern in ("MANIFEST-*", "*.ldb", "*.sst")
        for path in directory.glob(pattern)
    )
    if held:
        raise CorruptData(
            f"LevelDB directory {shown(str(directory))} is damaged: its CURRENT file is gone, "
            f"but it holds a database ({shown(', '.join(held))}); opened as it is, LevelDB "
            "would start a new, empty one and delete those files. Restore the directory from "
            "a backup, or write CURRENT again naming its newest manifest"
        )


_Sealed = tuple[int, str | None, bool]
"""What a seal says of a file: its size, its SHA-256 (None for a table) and whether the size
is a lower bound only (format 1 seals recorded sizes to catch truncation)."""


def _sealed_files(seal: object, seal_path: Path) -> dict[str, _Sealed]:
    """The seal's files, or :class:`CorruptData` for a seal this harness never wrote (format 1
    seals, which hold sizes only, are read too)."""
    files = seal.get("files") if isinstance(seal, dict) else None
    if (
        isinstance(seal, dict)
        and seal.get("format") in (1, _SEAL_FORMAT)
        and isinstance(seal.get("current"), str)
        and isinstance(files, dict)
    ):
        found = {name: _sealed_file(entry, seal["format"]) for name, entry in files.items()}
        if None not in found.values():
            return {name: entry for name, entry in found.items() if entry is not None}
    raise _bad_seal(seal_path, "not a seal this harness wrote")


def _sealed_file(entry: object, form: int) -> _Sealed | None:
    if form == 1:
        entry = {"size": entry}
    if not isinstance(entry, dict) or not set(entry) <= {"size", "sha256"}:
        return None
    size, digest = entry.get("size"), entry.get("sha256")
    if not isinstance(size, int) or isinstance(size, bool):
        return None
    if digest is not None and not (isinstance(digest, str) and len(digest) == 64):
        return None
    return size, digest, form == 1


def _compare(directory: Path, files: Mapping[str, _Sealed]) -> None:
    for name, (size, digest, at_least) in sorted(files.items()):
        if os.sep in name or name in ("", ".", ".."):
            raise _bad_seal(directory / SEAL_NAME, f"it names {shown(name)}")
        try:
            actual: int | None = (directory / name).stat().st_size
        except FileNotFoundError:
            actual = None
        if actual is None or actual < size or (actual > size and not at_least):
            found = "is gone" if actual is None else f"has {actual} bytes"
            raise _damaged(directory, f"{name} {found}, but held {size} bytes")
        if digest is not None and _digest(directory / name) != digest:
            raise _damaged(directory, f"{name} differs from the {size} bytes it held")


def _no_stray_log(directory: Path, files: Mapping[str, _Sealed]) -> None:
    """Raise :class:`CorruptData` for a non-empty write-ahead log the seal does not name:
    LevelDB would replay it (another store's log copied in, say) as this store's writes."""
    for path in sorted(directory.glob("*.log")):
        try:
            size = path.stat().st_size
        except OSError:
            continue
        if size and path.name not in files:
            raise CorruptData(
                f"LevelDB directory {shown(str(directory))} is damaged: it holds a write-ahead "
                f"log {shown(path.name)} ({size:,} bytes) that was not there when the store "
                "was last closed cleanly; LevelDB would replay its writes as this store's. "
                "Restore the directory from a backup, or remove that file if it does not "
                "belong there"
            )


def _damaged(directory: Path, what: str) -> CorruptData:
    return CorruptData(
        f"LevelDB directory {shown(str(directory))} is damaged: {what} when the store was "
        "last closed cleanly. LevelDB could silently read fewer or older records (it takes a "
        "damaged tail for a torn write). Restore the directory from a backup; or, to accept "
        "the loss, open it once with checks=False, which keeps what LevelDB can still read"
    )


def _scan_unsealed(directory: Path) -> None:
    """With no seal to compare with (after a crash, or a close without checks), refuse a
    write-ahead log or manifest whose damaged record length LevelDB would take for a torn
    write (:func:`harness._wal.damaged_length`); a truly torn last write is let through."""
    try:
        current = _current(directory)
    except OSError:
        current = ""
    names = sorted(path.name for path in directory.glob("*.log"))
    if current.startswith("MANIFEST-") and os.sep not in current:
        names.append(current)
    for name in names:
        why = damaged_length(directory / name)
        if why is not None:
            raise CorruptData(
                f"LevelDB directory {shown(str(directory))} is damaged: in {name}, {why}. "
                "Restore the directory from a backup; or, to accept the loss, open it once "
                "with checks=False"
            )


def _bad_seal(path: Path, why: str) -> CorruptData:
    return CorruptData(
        f"the seal {shown(str(path))} of a LevelDB directory is damaged ({shown(why)}); "
        "delete it to open the directory as a crash leaves it, without the seal's checks"
    )
