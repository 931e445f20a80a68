"""The offset store in memory, with a model of what survives a crash.

:class:`MemoryOffsetStore` behaves like :class:`~harness.offsets.leveldb.LevelDBOffsetStore`
(same validation, same errors, same atomic ``commit``), but keeps its data in a
:class:`MemoryOffsetStorage` that outlives the store: a simulated processor that crashes and
restarts opens a new store on the same storage and finds what a LevelDB directory would hold.

The storage models durability the way LevelDB behaves:

* a **process crash** loses nothing that a returned ``put``/``commit`` wrote (LevelDB has
  handed it to the operating system). To model one, drop the store without closing it and
  open a new one on the same storage;
* a **machine crash** loses unsynced writes. The model (the design's fault model) is that
  LevelDB replays its log up to the first write that did not reach the disk, so a suffix of
  the unsynced writes is lost: :meth:`MemoryOffsetStorage.lose_unsynced` keeps the first
  ``keep`` unsynced write batches and drops the rest. A write made with ``sync=True`` is
  durable, and so is every write before it. A batch (one ``put`` or one ``commit``) is kept
  or lost whole.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import final

from harness._closing import Closing
from harness.errors import AlreadyClosed, ConfigError
from harness.log.dlsn import DLSN
from harness.offsets.base import (
    NO_STATE,
    validate_commit,
    validate_dlsn,
    validate_reader_id,
    validate_state_key,
    validate_sync,
)

__all__ = ["MemoryOffsetStorage", "MemoryOffsetStore", "forget_memory_offset_storages"]


@final
@dataclass(frozen=True, slots=True)
class _Batch:
    """One atomic write: what a single ``put`` or ``commit`` changed."""

    offsets: tuple[tuple[str, DLSN], ...]
    state: tuple[tuple[str, bytes | None], ...]

    def apply_to(self, offsets: dict[str, DLSN], state: dict[str, bytes]) -> None:
        offsets.update(self.offsets)
        for key, value in self.state:
            if value is None:
                state.pop(key, None)
            else:
                state[key] = value


@final
class MemoryOffsetStorage:
    """The data behind :class:`MemoryOffsetStore`s: survives the stores, models crashes.

    Every ``put`` and every non-empty ``commit`` is one write batch. Batches written with
    ``sync=True`` are durable at once, together with every batch before them; the others
    wait, in order, in the unsynced queue (:attr:`unsynced_count` of them) until a later
    synced write or a call to :meth:`lose_unsynced`. Safe to use from several threads.
    """

    __slots__ = (
        "_durable_offsets",
        "_durable_state",
        "_lock",
        "_offsets",
        "_state",
        "_unsynced",
        "name",
    )

    def __init__(self, name: str = "") -> None:
        if not isinstance(name, str):
            raise ConfigError(
                f"MemoryOffsetStorage name must be a str, got {type(name).__name__}: {name!r}"
            )
        self.name: str = name
        """A label for messages and ``repr``; :meth:`named` storages carry their name."""
        self._lock = threading.Lock()
        self._offsets: dict[str, DLSN] = {}
        self._state: dict[str, bytes] = {}
        self._durable_offsets: dict[str, DLSN] = {}
        self._durable_state: dict[str, bytes] = {}
        self._unsynced: list[_Batch] = []

    @classmethod
    def named(cls, name: str) -> MemoryOffsetStorage:
        """The process-wide storage called ``name`` (created on first use).

        ``open_offset_store("memory://NAME")`` opens stores on it, so every store opened with
        the same name sees the same data, as every store on one directory does, until
        :func:`forget_memory_offset_storages` drops it.
        """
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"a named memory storage needs a non-empty str name, got {name!r}; "
                "pass e.g. 'offsets' (as in 'memory://offsets')"
            )
        with _REGISTRY_LOCK:
            storage = _REGISTRY.get(name)
            if storage is None:
                storage = _REGISTRY[name] = cls(name)
            return storage

    def __repr__(self) -> str:
        with self._lock:
            return (
                f"MemoryOffsetStorage(name={self.name!r}, readers={len(self._offsets)}, "
                f"state_keys={len(self._state)}, unsynced={len(self._unsynced)})"
            )

    @property
    def unsynced_count(self) -> int:
        """How many write batches a machine crash could lose (``lose_unsynced``'s range)."""
        with self._lock:
            return len(self._unsynced)

    def lose_unsynced(self, keep: int = 0) -> None:
        """Model a machine crash: keep the first ``keep`` unsynced batches, lose the rest.

        ``keep`` ranges over ``0 .. unsynced_count``. Afterwards the kept batches are durable
        (the restarted machine has them on disk) and nothing is unsynced. Stores open on this
        storage see the data that survived; in a simulation they belong to the crashed
        processor and should not be used again.
        """
        with self._lock:
            pending = len(self._unsynced)
            if type(keep) is not int or not 0 <= keep <= pending:
                raise ConfigError(
                    f"lose_unsynced(keep={keep!r}): keep must be an int from 0 to the "
                    f"{pending} unsynced batch(es); choose it from range(unsynced_count + 1)"
                )
            self._make_durable(self._unsynced[:keep])
            self._offsets = dict(self._durable_offsets)
            self._state = dict(self._durable_state)

    # Used by MemoryOffsetStore; the lock makes each batch atomic for concurrent readers.
    def _write(self, batch: _Batch, sync: bool) -> None:
        with self._lock:
            batch.apply_to(self._offsets, self._state)
            if sync:
                self._make_durable([*self._unsynced, batch])
            else:
                self._unsynced.append(batch)

    def _make_durable(self, batches: Iterable[_Batch]) -> None:
        for batch in batches:
            batch.apply_to(self._durable_offsets, self._durable_state)
        self._unsynced.clear()

    def _get(self, reader_id: str) -> DLSN | None:
        with self._lock:
            return self._offsets.get(reader_id)

    def _get_state(self, key: str) -> bytes | None:
        with self._lock:
            return self._state.get(key)

    def _readers(self) -> list[str]:
        with self._lock:
            return sorted(self._offsets)


_REGISTRY: dict[str, MemoryOffsetStorage] = {}
_REGISTRY_LOCK = threading.Lock()


def forget_memory_offset_storages(*names: str) -> None:
    """Drop the named storages of ``memory://NAME`` (all of them when no name is given).

    Stores already open on a dropped storage keep it; the next ``memory://NAME`` starts empty.
    """
    with _REGISTRY_LOCK:
        if names:
            for name in names:
                _REGISTRY.pop(name, None)
        else:
            _REGISTRY.clear()


@final
class MemoryOffsetStore(Closing):
    """An :class:`~harness.offsets.base.OffsetStore` on a :class:`MemoryOffsetStorage`.

    ``storage`` defaults to a new, private storage; pass one to reopen its data after a
    simulated restart. ``sync`` (fixed here) says whether this store's writes are durable at
    once (``True``) or wait in the storage's unsynced queue, where a machine crash
    (:meth:`MemoryOffsetStorage.lose_unsynced`) can lose them (``False``), as with LevelDB.
    """

    __slots__ = ("_closed", "_storage", "_sync")

    def __init__(self, *, sync: bool = False, storage: MemoryOffsetStorage | None = None) -> None:
        self._sync: bool = validate_sync(sync)
        if storage is None:
            storage = MemoryOffsetStorage()
        elif not isinstance(storage, MemoryOffsetStorage):
            raise ConfigError(
                f"storage must be a MemoryOffsetStorage, got {type(storage).__name__}: "
                f"{storage!r}; pass MemoryOffsetStorage() or MemoryOffsetStorage.named('NAME')"
            )
        self._storage = storage
        self._closed = False

    @property
    def sync(self) -> bool:
        """Whether every write is durable before the call returns (fixed at construction)."""
        return self._sync

    @property
    def storage(self) -> MemoryOffsetStorage:
        """The storage this store reads and writes (it outlives the store)."""
        return self._storage

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called."""
        return self._closed

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"MemoryOffsetStore(sync={self._sync}, storage={self._storage!r}{state})"

    def put(self, reader_id: str, dlsn: DLSN) -> None:
        """Store ``dlsn`` as the offset of ``reader_id`` (last write wins)."""
        self._check_open("put")
        validate_reader_id(reader_id)
        validate_dlsn(dlsn, reader_id)
        self._storage._write(_Batch(((reader_id, dlsn),), ()), self._sync)

    def get(self, reader_id: str) -> DLSN | None:
        """The last DLSN stored for ``reader_id``, or ``None`` if it has none."""
        self._check_open("get")
        validate_reader_id(reader_id)
        return self._storage._get(reader_id)

    def get_state(self, key: str) -> bytes | None:
        """The state value last committed under ``key``, or ``None`` if there is none."""
        self._check_open("get_state")
        validate_state_key(key)
        return self._storage._get_state(key)

    def commit(
        self,
        offsets: Mapping[str, DLSN],
        state: Mapping[str, bytes | None] = NO_STATE,
    ) -> None:
        """Apply every offset and state entry as one write batch (all or nothing).

        Every argument is validated first, so a bad one raises
        :class:`~harness.errors.ConfigError` before anything is written. A ``None`` state
        value deletes the key. Committing nothing writes nothing.
        """
        self._check_open("commit")
        checked_offsets, checked_state = validate_commit(offsets, state)
        if not checked_offsets and not checked_state:
            return
        batch = _Batch(
            tuple((reader_id, dlsn) for reader_id, _, dlsn in checked_offsets),
            tuple((key, value) for key, _, value in checked_state),
        )
        self._storage._write(batch, self._sync)

    def readers(self) -> list[str]:
        """The ids of the readers that have an offset, sorted."""
        self._check_open("readers")
        return self._storage._readers()

    def close(self) -> None:
        """Close the store (the storage keeps the data); closing again does nothing."""
        self._closed = True

    def __enter__(self) -> MemoryOffsetStore:
        self._check_open("__enter__")
        return self

    def _check_open(self, method: str) -> None:
        if self._closed:
            raise AlreadyClosed(
                f"{method}() on a closed offset store ({self._storage!r}); open a new "
                "MemoryOffsetStore(storage=...) on the same storage instead"
            )
