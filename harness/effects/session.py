"""One run's effects: a fresh directory for the application's paths, the lines it printed, and
what each of its processes still holds in memory when it crashes.

A door makes one :class:`EffectSession` per run (per schedule): the paths the sources name are
redirected under a new temporary directory, so every schedule starts from nothing while the
restarts within it find what the earlier processes left (a redeployed service keeps its
disk). The door tells the session which *process* (any object with a ``dead`` flag, set before
the process is unwound) writes, and when a process ends (:meth:`EffectSession.end`):

* printed text is counted per the source's buffering (a complete line, or a flush); what a
  process had not written out yet is gone when it crashes;
* a file it opened for writing keeps its buffer in the process: a flush, a full buffer or a
  normal end writes it, a crash drops it (what was written before stays: the page cache
  survives a process crash);
* a SQLite connection commits what the application commits; a crash rolls back the open
  transaction, as SQLite's journal does when a process dies mid-transaction.

A machine crash is treated like a process crash for these effects (files and SQLite commits
that reached the operating system are kept).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, Protocol

from harness.effects.sources import EffectSource, Found, Stream

__all__ = ["EffectSession", "Process"]

PIPE_BUFFER: Final = 8192
"""Bytes a block-buffered standard stream holds before it writes (CPython's default)."""


_MEMORY_DIR: Final = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
"""Where the runs' directories go: memory when the system has it. A run's crashes are the
harness's model (what a process held is dropped), not the disk's, so nothing is lost by it,
and a SQLite commit's fsync costs nothing there (hundreds of runs per search)."""


class Process(Protocol):
    """The door's handle on one process of the application."""

    @property
    def dead(self) -> bool: ...


FaultPoint = Callable[[str], None]
"""The door's fault point, called in the application's own code before an effect happens."""


def _no_fault(point: str) -> None:
    pass


class _CrashBuffered(io.BufferedWriter):
    """A file's buffer in the process: lost, not written, when the process has crashed.
    Writing it out (a flush) is a fault point."""

    def __init__(self, raw: io.FileIO, size: int, process: Process, fault: FaultPoint) -> None:
        super().__init__(raw, size)
        self._process = process
        self._fault = fault

    def write(self, data: Any) -> int:
        if self._process.dead:  # a dead process writes nothing (its cleanup code may try)
            return len(memoryview(data))
        return super().write(data)

    def flush(self) -> None:
        if not self._process.dead and not self.closed:
            self._fault("effect.file.flush")
            super().flush()

    def close(self) -> None:
        if self._process.dead:
            if not self.raw.closed:
                self.raw.close()  # the operating system closes it; the buffer is gone
            return
        super().close()


class _CrashCursor(sqlite3.Cursor):
    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return _statement(self.connection, "execute", super().execute, args, kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        return _statement(self.connection, "executemany", super().executemany, args, kwargs)

    def executescript(self, *args: Any, **kwargs: Any) -> Any:
        return _statement(self.connection, "executescript", super().executescript, args, kwargs)


def _statement(connection: Any, call: str, run: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """A statement of ``connection``: a fault point, then run; while another process holds
    the database's lock, the door lets the others run (the connection does not busy-wait:
    the simulated processes take turns, so the holder could never finish meanwhile)."""
    _refuse(connection, call)
    while True:
        try:
            return run(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            wait = getattr(connection, "harness_wait", None)
            if wait is None or "locked" not in str(exc):
                raise
            wait()
            _refuse(connection, call)


def _refuse(connection: Any, call: str) -> None:
    process = getattr(connection, "harness_process", None)
    if process is not None and process.dead:
        raise sqlite3.OperationalError("the process crashed (harness): no more statements")
    fault = getattr(connection, "harness_fault", None)
    if fault is not None:
        fault(f"effect.sqlite.{call}")


class CrashConnection(sqlite3.Connection):
    """A connection whose process may crash: after that, commit rolls back and nothing runs."""

    harness_process: Process | None = None
    harness_fault: FaultPoint | None = None
    harness_wait: Callable[[], None] | None = None

    def cursor(self, factory: Any = _CrashCursor) -> Any:
        return super().cursor(factory)

    # what sqlite3.Connection's shortcuts do, spelt out: before 3.11 the C shortcut called
    # the cursor's Python-level method, so a statement was two fault points there and one
    # on later versions (the same schedule crashed in different places)
    def execute(self, *args: Any, **kwargs: Any) -> Any:
        return self.cursor().execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        return self.cursor().executemany(*args, **kwargs)

    def executescript(self, *args: Any, **kwargs: Any) -> Any:
        return self.cursor().executescript(*args, **kwargs)

    def commit(self) -> None:
        if self.harness_process is not None and self.harness_process.dead:
            super().rollback()
            return
        if self.in_transaction:
            _statement(self, "commit", super().commit, (), {})

    def close(self) -> None:
        if self.harness_process is not None and self.harness_process.dead:
            with contextlib.suppress(sqlite3.ProgrammingError):  # already closed
                super().rollback()
        super().close()


class EffectSession:
    """The effects of one run (see the module docstring). Close it when the run is over."""

    def __init__(
        self,
        sources: Sequence[EffectSource],
        fault_point: FaultPoint | None = None,
        wait: Callable[[], None] | None = None,
    ) -> None:
        self.sources = tuple(sources)
        self.fault_point = fault_point or _no_fault
        self.wait = wait
        """The door's way to let the other processes run while this one waits for a lock."""
        self._tmp = tempfile.TemporaryDirectory(prefix="harness-effects-", dir=_MEMORY_DIR)
        self.root = Path(self._tmp.name)
        self._map: list[tuple[str, str]] = []
        for number, source in enumerate(self.sources):
            for original in source.paths:
                target = self.root / f"{number}-{Path(original).name or 'root'}"
                if os.path.isdir(original):
                    target.mkdir()
                self._map.append((original, str(target)))
        self.buffered: dict[str, bool] = {}
        for source in self.sources:
            stream = getattr(source, "stream", None)
            if stream in ("stdout", "stderr") and not source.paths:
                self.buffered[stream] = bool(getattr(source, "buffered", False))
        self._written: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self._pending: dict[tuple[int, str], list[str]] = {}
        self._handles: dict[int, list[Any]] = {}
        self._processes: dict[int, Process] = {}

    @property
    def has_paths(self) -> bool:
        return bool(self._map)

    # -- paths -------------------------------------------------------------------------

    def redirect(self, path: object) -> str | None:
        """Where the application's ``path`` really is in this run (None: not redirected)."""
        if not self._map or isinstance(path, int):
            return None
        try:
            text = os.fspath(path)  # type: ignore[call-overload]
        except TypeError:
            return None
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        full = os.path.abspath(text)
        for original, target in self._map:
            if full == original or full.startswith(original + os.sep):
                return str(target + full[len(original) :])
        return None

    def path(self, original: str) -> Path:
        return Path(self.redirect(original) or original)

    def track(self, process: Process, handle: Any) -> None:
        """A file or connection ``process`` opened on a redirected path."""
        self._processes[id(process)] = process
        self._handles.setdefault(id(process), []).append(handle)

    def open_for_writing(
        self, target: str, mode: str, buffering: int, process: Process, text: dict[str, Any]
    ) -> Any:
        """``open(target, mode)`` for writing (no ``+``) with a buffer ``process`` loses if it
        crashes; ``text`` the text layer's arguments (encoding, errors, newline)."""
        raw_mode = mode.replace("b", "").replace("t", "")
        raw = io.FileIO(target, raw_mode)
        if buffering == 0:
            self.track(process, raw)
            return raw
        size = buffering if buffering > 1 else io.DEFAULT_BUFFER_SIZE
        buffer = _CrashBuffered(raw, size, process, self.fault_point)
        if "b" in mode:
            self.track(process, buffer)
            return buffer
        wrapper = io.TextIOWrapper(buffer, line_buffering=buffering == 1, **text)
        wrapper.mode = mode  # type: ignore[misc]
        self.track(process, wrapper)
        return wrapper

    # -- standard streams --------------------------------------------------------------

    def write(self, stream: Stream, process: Process, text: str) -> None:
        """``process`` wrote ``text`` to ``stream``."""
        if stream not in self.buffered or process.dead:
            return
        self._processes[id(process)] = process
        pending = self._pending.setdefault((id(process), stream), [])
        if self.buffered[stream]:
            pending.append(text)
            if sum(len(t) for t in pending) >= PIPE_BUFFER:
                self.flush(stream, process)
        elif "\n" in text:
            self.fault_point(f"effect.{stream}")
            pending.append(text)
            joined = "".join(pending)
            cut = joined.rfind("\n") + 1
            self._written[stream].append(joined[:cut])
            pending[:] = [joined[cut:]] if cut < len(joined) else []
        else:
            pending.append(text)

    def flush(self, stream: Stream, process: Process) -> None:
        """``process`` flushed ``stream``: what it held is written."""
        pending = self._pending.get((id(process), stream))
        if pending and not process.dead:
            self.fault_point(f"effect.{stream}")
            self._written[stream].append("".join(pending))
            pending.clear()

    def lines(self, stream: Stream) -> list[str]:
        return "".join(self._written[stream]).splitlines()

    # -- the end of a process, of the run ----------------------------------------------

    def end(self, process: Process, crashed: bool) -> None:
        """``process`` ended: normally (its buffers are written, as at interpreter exit) or
        by a crash (they are gone)."""
        key = id(process)
        for stream in ("stdout", "stderr"):
            if not crashed and stream in self.buffered:
                pending = self._pending.get((key, stream))
                if pending:
                    self._written[stream].append("".join(pending))
            self._pending.pop((key, stream), None)
        for handle in reversed(self._handles.pop(key, [])):
            with contextlib.suppress(Exception):  # closing what a dead process left
                handle.close()
        self._processes.pop(key, None)

    def end_all(self) -> None:
        """The run is over: a process still running is abandoned like a crashed one."""
        for key, process in list(self._processes.items()):
            self.end(process, crashed=process.dead)
            self._handles.pop(key, None)

    def observe(self) -> dict[str, list[Found]]:
        """Every source's outputs, now (after the drain)."""
        self.end_all()
        return {source.sink: source.observe(self) for source in self.sources}

    def close(self) -> None:
        self.end_all()
        shutil.rmtree(self.root, ignore_errors=True)
        self._tmp.cleanup()
