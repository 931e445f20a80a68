"""The application's file and SQLite calls, redirected into its run's directory.

While installed (:func:`install` / :func:`remove`, nested), ``open`` (``builtins``, ``io``),
``os.open``, ``os.stat``, ``os.mkdir``, ``os.remove``/``unlink``, ``os.rename``/``replace``,
``os.listdir``, ``os.scandir`` and ``sqlite3.connect`` ask the door's ``lookup`` which run and
which process the calling code belongs to; a path one of that run's sources names is then
redirected (:meth:`EffectSession.redirect`), and a file opened for writing or a SQLite
connection gets the crash behaviour of :mod:`harness.effects.session`. Calls from anywhere
else, or on other paths, go to the originals unchanged. ``pathlib`` and ``os.path`` go through
these functions, so they follow.
"""

from __future__ import annotations

import builtins
import io
import os
import sqlite3
from collections.abc import Callable
from typing import Any

from harness.effects.session import CrashConnection, EffectSession, Process

__all__ = ["Lookup", "install", "remove"]

Lookup = Callable[[], "tuple[EffectSession, Process] | None"]

_ORIGINALS: dict[tuple[Any, str], Any] = {}
_STATE: dict[str, Any] = {"depth": 0, "lookup": None}
_PATH_FUNCTIONS = ("stat", "lstat", "mkdir", "remove", "unlink", "rmdir", "listdir", "scandir")


def _where(path: Any) -> tuple[EffectSession, Process, str] | None:
    lookup: Lookup | None = _STATE["lookup"]
    found = lookup() if lookup is not None else None
    if found is None:
        return None
    session, process = found
    target = session.redirect(path)
    return None if target is None else (session, process, target)


def _open(
    file: Any,
    mode: str = "r",
    buffering: int = -1,
    encoding: str | None = None,
    errors: str | None = None,
    newline: str | None = None,
    closefd: bool = True,
    opener: Any = None,
) -> Any:
    original = _ORIGINALS[(builtins, "open")]
    where = _where(file)
    if where is None:
        return original(file, mode, buffering, encoding, errors, newline, closefd, opener)
    session, process, target = where
    if "+" in mode or "r" in mode or opener is not None or not isinstance(mode, str):
        return original(target, mode, buffering, encoding, errors, newline, closefd, opener)
    text = {"encoding": encoding, "errors": errors, "newline": newline}
    return session.open_for_writing(target, mode, buffering, process, text)


def _os_open(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
    where = _where(path)
    target = path if where is None else where[2]
    result: int = _ORIGINALS[(os, "open")](target, flags, mode, dir_fd=dir_fd)
    return result


def _one_path(name: str) -> Callable[..., Any]:
    def call(path: Any = ".", *args: Any, **kwargs: Any) -> Any:
        where = _where(path)
        return _ORIGINALS[(os, name)](path if where is None else where[2], *args, **kwargs)

    call.__name__ = name
    return call


def _two_paths(name: str) -> Callable[..., Any]:
    def call(src: Any, dst: Any, *args: Any, **kwargs: Any) -> Any:
        first, second = _where(src), _where(dst)
        return _ORIGINALS[(os, name)](
            src if first is None else first[2],
            dst if second is None else second[2],
            *args,
            **kwargs,
        )

    call.__name__ = name
    return call


def _connect(database: Any, *args: Any, **kwargs: Any) -> Any:
    original = _ORIGINALS[(sqlite3, "connect")]
    where = _where(database) if not kwargs.get("uri") else None
    if where is None:
        return original(database, *args, **kwargs)
    session, process, target = where
    if "factory" in kwargs or len(args) >= 4:  # the application's own connection class
        connection = original(target, *args, **kwargs)
    else:
        if session.wait is not None and not args:  # lock waits take turns, not seconds
            kwargs["timeout"] = 0
        connection = original(target, *args, factory=CrashConnection, **kwargs)
        connection.harness_process = process
        connection.harness_fault = session.fault_point
        connection.harness_wait = session.wait
    session.track(process, connection)
    return connection


def _patches() -> list[tuple[Any, str, Any]]:
    patches: list[tuple[Any, str, Any]] = [
        (builtins, "open", _open),
        (io, "open", _open),
        (os, "open", _os_open),
        (sqlite3, "connect", _connect),
        (sqlite3.dbapi2, "connect", _connect),
        (os, "rename", _two_paths("rename")),
        (os, "replace", _two_paths("replace")),
    ]
    patches.extend((os, name, _one_path(name)) for name in _PATH_FUNCTIONS)
    return patches


def install(lookup: Lookup) -> None:
    """Redirect through ``lookup`` until the matching :func:`remove`."""
    if _STATE["depth"] == 0:
        _STATE["lookup"] = lookup
        for owner, name, replacement in _patches():
            _ORIGINALS[(owner, name)] = getattr(owner, name)
            setattr(owner, name, replacement)
    _STATE["depth"] += 1


def remove() -> None:
    """Undo one :func:`install`; the last one puts the originals back."""
    _STATE["depth"] -= 1
    if _STATE["depth"] == 0:
        for (owner, name), original in _ORIGINALS.items():
            setattr(owner, name, original)
        _ORIGINALS.clear()
        _STATE["lookup"] = None
