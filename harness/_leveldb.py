"""Opening LevelDB through plyvel, with errors a user can act on.

plyvel is imported here, lazily, so that importing :mod:`harness` (or loading the
pytest plugin) does not load it. Both the LevelDB log backend and the LevelDB
offset store open their databases through :func:`open_leveldb`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError, CorruptData, HarnessError, StoreLocked

if TYPE_CHECKING:
    import plyvel

__all__ = ["open_leveldb"]


def _plyvel() -> Any:
    try:
        import plyvel
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise HarnessError(
            f"the LevelDB backend needs plyvel, which failed to import ({exc}); "
            "install it with `pip install plyvel` (wheels exist for CPython 3.10-3.12 on "
            "x86_64; elsewhere install libleveldb-dev first so it can build)"
        ) from exc
    return plyvel


def open_leveldb(path: str | os.PathLike[str], *, create_if_missing: bool = True) -> plyvel.DB:
    """Open the LevelDB database at ``path``.

    Raises :class:`StoreLocked` when another process (or another open handle in this
    process) holds the directory, :class:`CorruptData` when LevelDB reports
    corruption, and :class:`ConfigError` when the path is unusable.
    """
    plyvel = _plyvel()
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ConfigError(
            f"LevelDB path {str(target)!r} exists and is not a directory; "
            "pass a directory path (it is created if missing)"
        )
    if create_if_missing:
        target.parent.mkdir(parents=True, exist_ok=True)
    try:
        return plyvel.DB(str(target), create_if_missing=create_if_missing)
    except plyvel.IOError as exc:
        text = str(exc)
        if "lock" in text.lower():
            raise StoreLocked(
                f"LevelDB directory {str(target)!r} is locked by another process or by another "
                "open handle in this one (LevelDB allows a single process at a time). Close the "
                "other handle or stop the process that holds it, or give each process its own "
                f"directory (for example one per pytest-xdist worker). LevelDB said: {text}"
            ) from None
        raise HarnessError(
            f"cannot open LevelDB directory {str(target)!r}: {text}; check that the path is "
            "writable and on a local file system"
        ) from None
    except plyvel.CorruptionError as exc:
        raise CorruptData(
            f"LevelDB directory {str(target)!r} is corrupt: {exc}; restore it from a backup or "
            "remove it to start from an empty store"
        ) from None
    except plyvel.Error as exc:
        if not create_if_missing and "does not exist" in str(exc):
            raise ConfigError(
                f"no LevelDB database at {str(target)!r}; create it first or pass "
                "create_if_missing=True"
            ) from None
        raise HarnessError(f"cannot open LevelDB directory {str(target)!r}: {exc}") from None
