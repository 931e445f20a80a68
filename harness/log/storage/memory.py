"""In-memory storage: fast, shared by every namespace object opened on the same name.

``distributedlog-memory://NAME`` names a process-wide namespace, so that a
"restarted" processor that opens the URI again finds the logs it left behind,
as it would with a real DistributedLog cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence

from harness.errors import LogNotFound, OwnershipAcquireFailed
from harness.log.record import StoredRecord
from harness.log.storage.base import LogMetadata

__all__ = ["MemoryLogStorage", "MemoryNamespaceStorage", "forget_memory_namespaces"]


class MemoryLogStorage:
    """One log's entries and metadata in dictionaries."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._entries: dict[int, dict[int, tuple[StoredRecord, ...]]] = {}
        self._metadata = LogMetadata()
        self._writer_held = False
        self._deleted = False

    @property
    def metadata(self) -> LogMetadata:
        return self._metadata

    @property
    def deleted(self) -> bool:
        return self._deleted

    def _check(self) -> None:
        if self._deleted:
            raise LogNotFound(f"log {self.name!r} was deleted; create it again to reuse the name")

    def append_entry(self, segment: int, entry: int, records: tuple[StoredRecord, ...]) -> None:
        self._check()
        self._entries.setdefault(segment, {})[entry] = records

    def commit(self, metadata: LogMetadata, *, changed: Sequence[int], sync: bool) -> None:
        self._check()
        self._metadata = metadata

    def read_entries(
        self, segment: int, first_entry: int, last_entry: int
    ) -> Iterator[tuple[int, tuple[StoredRecord, ...]]]:
        self._check()
        entries = self._entries.get(segment)
        if not entries:
            return
        for entry in range(first_entry, last_entry + 1):
            records = entries.get(entry)
            if records is not None:
                yield entry, records

    def discard_uncommitted(self) -> None:
        self._check()
        committed = self._metadata.committed
        for segment in list(self._entries):
            entries = self._entries[segment]
            for entry in list(entries):
                if committed is None or (segment, entry) > committed:
                    del entries[entry]
            if not entries:
                del self._entries[segment]

    def purge_segment(self, segment: int) -> None:
        self._entries.pop(segment, None)

    def acquire_writer(self) -> None:
        self._check()
        if self._writer_held:
            raise OwnershipAcquireFailed(
                f"log {self.name!r} already has a writer; close it (or let it crash and "
                "restart) before opening another: DistributedLog allows one writer per log"
            )
        self._writer_held = True

    def release_writer(self) -> None:
        self._writer_held = False

    def close(self) -> None:
        """Memory handles share one state; nothing to release."""


class MemoryNamespaceStorage:
    """The logs of one named in-memory namespace."""

    def __init__(self, name: str) -> None:
        self.description = f"distributedlog-memory://{name}"
        self._logs: dict[str, MemoryLogStorage] = {}

    def log_names(self) -> list[str]:
        return sorted(self._logs)

    def exists(self, name: str) -> bool:
        return name in self._logs

    def create(self, name: str) -> None:
        if name not in self._logs:
            self._logs[name] = MemoryLogStorage(name)

    def delete(self, name: str) -> None:
        storage = self._logs.pop(name, None)
        if storage is None:
            raise LogNotFound(f"log {name!r} does not exist in {self.description}")
        storage._deleted = True
        storage._entries.clear()

    def open(self, name: str) -> MemoryLogStorage:
        storage = self._logs.get(name)
        if storage is None:
            raise LogNotFound(
                f"log {name!r} does not exist in {self.description}; create it with "
                "namespace.create_log(name) or write to it first"
            )
        return storage

    def close(self) -> None:
        """The state outlives namespace objects, like a real cluster does."""


_REGISTRY: dict[str, MemoryNamespaceStorage] = {}
_REGISTRY_LOCK = threading.Lock()


def memory_namespace(name: str) -> MemoryNamespaceStorage:
    with _REGISTRY_LOCK:
        storage = _REGISTRY.get(name)
        if storage is None:
            storage = _REGISTRY[name] = MemoryNamespaceStorage(name)
        return storage


def forget_memory_namespaces(*names: str) -> None:
    """Drop the named in-memory namespaces (all of them when no name is given)."""
    with _REGISTRY_LOCK:
        if names:
            for name in names:
                _REGISTRY.pop(name, None)
        else:
            _REGISTRY.clear()
