"""Namespaces: a set of logs found by URI (DistributedLog's ``DistributedLogNamespace``)."""

from __future__ import annotations

import os
from typing import Any, Final, final
from urllib.parse import unquote

from harness._closing import Closing
from harness._shown import shown
from harness.errors import (
    AlreadyClosed,
    ConfigError,
    LogNotFound,
    OwnershipAcquireFailed,
    StoreLocked,
    UnsupportedURI,
)
from harness.log.config import LogConfig
from harness.log.manager import LogManager
from harness.log.names import validate_log_name
from harness.log.storage.base import NamespaceStorage

__all__ = ["MEMORY_SCHEME", "LEVELDB_SCHEME", "Namespace", "open_namespace"]

MEMORY_SCHEME: Final = "distributedlog-memory"
LEVELDB_SCHEME: Final = "distributedlog-leveldb"
_SUPPORTED: Final = (
    f"{MEMORY_SCHEME}://NAME (in memory, shared within this process) or "
    f"{LEVELDB_SCHEME}:///ABSOLUTE/PATH (durable, on LevelDB)"
)


def _storage_for(uri: str, *, checks: bool) -> NamespaceStorage:
    if not isinstance(uri, str):
        raise UnsupportedURI(f"a namespace URI is a str, got {type(uri).__name__}: {uri!r}")
    scheme, separator, rest = uri.partition("://")
    if not separator:
        raise UnsupportedURI(f"{uri!r} is not a namespace URI; use {_SUPPORTED}")
    if scheme == MEMORY_SCHEME:
        from harness.log.storage.memory import memory_namespace

        if not rest or "/" in rest or "?" in rest:
            raise UnsupportedURI(
                f"{uri!r}: a memory namespace URI is {MEMORY_SCHEME}://NAME with a non-empty "
                "NAME and no '/' or '?' in it"
            )
        return memory_namespace(rest)
    if scheme == LEVELDB_SCHEME:
        from harness.log.storage.leveldb import LevelDBNamespaceStorage

        if not rest.startswith("/") or rest == "/":
            raise UnsupportedURI(
                f"{uri!r}: a LevelDB namespace URI is {LEVELDB_SCHEME}:///ABSOLUTE/PATH "
                "(three slashes, then an absolute directory path); build one with "
                "Path(directory).absolute().as_uri().replace('file', "
                f"'{LEVELDB_SCHEME}', 1)"
            )
        return LevelDBNamespaceStorage(unquote(rest), checks=checks)
    if scheme in ("distributedlog", "distributedlog-bk"):
        raise UnsupportedURI(
            f"{uri!r} names DistributedLog's BookKeeper backend, which the harness does not "
            f"run; use {_SUPPORTED}"
        )
    raise UnsupportedURI(
        f"unsupported namespace URI scheme {scheme!r} in {uri!r}; use {_SUPPORTED}"
    )


def leveldb_uri(path: str | os.PathLike[str]) -> str:
    """The ``distributedlog-leveldb:///...`` URI of a directory."""
    return f"{LEVELDB_SCHEME}://{os.path.abspath(os.fspath(path))}"


@final
class Namespace(Closing):
    """The logs under one URI; see :func:`open_namespace`."""

    def __init__(self, uri: str, *, config: LogConfig | None = None, checks: bool = True) -> None:
        self.uri = uri
        self.config = LogConfig() if config is None else config
        if not isinstance(self.config, LogConfig):
            raise UnsupportedURI(f"config must be a LogConfig, got {shown(self.config)}")
        if type(checks) is not bool:
            raise ConfigError(f"checks must be True or False, got {shown(checks)}")
        self._storage = _storage_for(uri, checks=checks)
        self._closed = False

    def _check(self) -> None:
        if self._closed:
            raise AlreadyClosed(f"namespace {self.uri!r} is closed; open it again")

    def create_log(self, name: str) -> None:
        """Create a log. Creating one that exists does nothing (as in DistributedLog)."""
        self._check()
        self._storage.create(validate_log_name(name))

    def open_log(self, name: str, **overrides: Any) -> LogManager:
        """A manager for the log, with per-log configuration overrides (see LogConfig).

        The log is not created until its first writer opens.
        """
        self._check()
        normalized = validate_log_name(name)
        config = self.config.with_overrides(overrides) if overrides else self.config
        return LogManager(normalized, self._storage, config, self._check)

    def delete_log(self, name: str) -> None:
        """Delete a log and its data; fails with OwnershipAcquireFailed while a writer holds it."""
        self._check()
        normalized = validate_log_name(name)
        if not self._storage.exists(normalized):
            raise LogNotFound(f"log {normalized!r} does not exist in {self.uri}")
        try:
            storage = self._storage.open(normalized)
        except StoreLocked as exc:
            # On LevelDB another process holding the log holds its database: refuse the
            # deletion the way a held writer lock refuses it.
            raise OwnershipAcquireFailed(f"cannot delete log {normalized!r}: {exc}") from None
        try:
            storage.acquire_writer()
            storage.release_writer()
        finally:
            storage.close()
        self._storage.delete(normalized)

    def log_exists(self, name: str) -> bool:
        self._check()
        return self._storage.exists(validate_log_name(name))

    def get_logs(self) -> list[str]:
        """Names of the logs, sorted."""
        self._check()
        return self._storage.log_names()

    def close(self) -> None:
        """Close the namespace; every later call raises AlreadyClosed."""
        self._closed = True
        self._storage.close()

    def __repr__(self) -> str:
        return f"<Namespace {self.uri!r}>"


def open_namespace(uri: str, *, config: LogConfig | None = None, checks: bool = True) -> Namespace:
    """Open the namespace at ``uri``: ``distributedlog-memory://NAME`` or
    ``distributedlog-leveldb:///PATH``, with ``config`` as every log's default.

    ``checks`` (LevelDB only) keeps LevelDB's integrity checks on (:mod:`harness._leveldb`):
    a damaged log raises :class:`~harness.errors.CorruptData` instead of returning different
    records. ``checks=False`` is the benchmark baseline of ``bench/bench_log.py``.
    """
    return Namespace(uri, config=config, checks=checks)
