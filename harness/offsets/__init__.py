"""Offset stores: where readers' positions (and state committed with them) survive restarts.

* :class:`OffsetStore` — the interface (``get``, ``put``, ``get_state``, atomic ``commit``,
  ``readers``, ``close``), with ``sync`` deciding what survives a machine crash;
* :class:`LevelDBOffsetStore` — on LevelDB, laid out as DistributedLog's at-least-once tutorial;
* :class:`MemoryOffsetStore` on a :class:`MemoryOffsetStorage` — in memory, with a crash model;
* :func:`open_offset_store` — one of them from a location string;
* :mod:`harness.offsets.conformance` — the suite every store passes, yours included; a store of
  your own can reuse the argument validators of :mod:`harness.offsets.base`.

Importing this package does not import plyvel; opening a LevelDB store does.
"""

from __future__ import annotations

import os
import re
from typing import Final

from harness._shown import shown
from harness.errors import UnsupportedURI
from harness.offsets.base import OffsetStore
from harness.offsets.conformance import (
    CONFORMANCE_CHECKS,
    ConformanceCheck,
    ConformanceFailure,
    ConformanceResult,
    run_conformance,
)
from harness.offsets.leveldb import LevelDBOffsetStore
from harness.offsets.memory import (
    MemoryOffsetStorage,
    MemoryOffsetStore,
    forget_memory_offset_storages,
)

__all__ = [
    "CONFORMANCE_CHECKS",
    "ConformanceCheck",
    "ConformanceFailure",
    "ConformanceResult",
    "LevelDBOffsetStore",
    "MemoryOffsetStorage",
    "MemoryOffsetStore",
    "OffsetStore",
    "forget_memory_offset_storages",
    "open_offset_store",
    "run_conformance",
]

MEMORY_SCHEME: Final = "memory://"
_SCHEME: Final = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_FORMS: Final = (
    "'memory://NAME' (an in-memory store shared by name within the process) or a LevelDB "
    "directory path such as 'offsets' or pathlib.Path('offsets')"
)


def open_offset_store(
    location: str | os.PathLike[str], *, sync: bool = False, checks: bool = True
) -> OffsetStore:
    """Open the offset store at ``location``.

    ``"memory://NAME"`` opens a :class:`MemoryOffsetStore` on the process-wide
    :class:`MemoryOffsetStorage` called NAME (``MemoryOffsetStorage.named(NAME)``), so the same
    name reopens the same data; any other ``str`` or :class:`os.PathLike` is a LevelDB
    directory (created if missing). A string with another ``scheme://`` raises
    :class:`~harness.errors.UnsupportedURI` (a :class:`~harness.errors.ConfigError`).
    ``sync`` is passed to the store: see :class:`OffsetStore` for what it decides; ``checks``
    to a LevelDB store (see :class:`LevelDBOffsetStore`). An empty location raises
    :class:`~harness.errors.ConfigError` rather than opening the working directory.
    """
    if isinstance(location, str):
        if location.startswith(MEMORY_SCHEME):
            name = location[len(MEMORY_SCHEME) :]
            if not name:
                raise UnsupportedURI(
                    f"offset store location {shown(location)} has no name after 'memory://'; "
                    "use e.g. 'memory://offsets'"
                )
            return MemoryOffsetStore(sync=sync, storage=MemoryOffsetStorage.named(name))
        scheme = _SCHEME.match(location)
        if scheme is not None:
            raise UnsupportedURI(
                f"offset store location {shown(location)} has the unsupported scheme "
                f"{scheme.group(1)!r}; use {_FORMS}"
            )
    elif not isinstance(location, os.PathLike):
        raise UnsupportedURI(
            f"offset store location must be a str or os.PathLike, got "
            f"{type(location).__name__}: {shown(location)}; use {_FORMS}"
        )
    return LevelDBOffsetStore(location, sync=sync, checks=checks)
