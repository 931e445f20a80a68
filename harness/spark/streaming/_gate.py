"""As many streaming query starts at once on this machine as it has cores: the start gate.

Spark starts a fresh Python process for every streaming query's Python source (``python -m
pyspark.sql.streaming.python_streaming_source_runner``) and gives it a fixed, unconfigurable
10 seconds to connect back to the JVM. Before it can connect it imports pyspark. On a busy
2-core machine, many such starts at once (three runs per test process, two test processes,
child driver JVMs booting next to them) starve each other past the deadline and the query
dies with "Python worker failed to connect back".

:func:`start_gate` bounds those moments across every process of the machine: a holder takes
one of ``os.cpu_count()`` slots, each an exclusive ``flock`` on a file
(``$HARNESS_SPARK_GATE.<n>``, default ``<tempdir>/harness-spark-query-start.lock.<n>``). A
run holds a slot from ``start()`` until its source is initialized (a child driver from its
launch until then), and nothing else; the kernel releases the lock of a holder that dies,
SIGKILL included. Waiting for a slot is bounded by its holders' own deadlines. POSIX only
(``fcntl``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final

__all__ = ["GATE_ENV", "gate_path", "start_gate"]

GATE_ENV: Final = "HARNESS_SPARK_GATE"
"""Environment variable naming the gate's lock file (default in the system temp dir)."""


def gate_path() -> str:
    """The machine's start-gate file: ``$HARNESS_SPARK_GATE`` or one in the temp dir."""
    named = os.environ.get(GATE_ENV)
    if named:
        return named
    return str(Path(tempfile.gettempdir()) / "harness-spark-query-start.lock")


@contextlib.contextmanager
def start_gate(path: str | None, *, slots: int | None = None) -> Iterator[None]:
    """Hold one of the ``slots`` (default: the machine's cores) of the start gate at
    ``path`` for the body; no gate when ``path`` is None.

    A free slot is taken at once; when all are held the caller waits for one (chosen by
    its process and thread). Every holder opens its file anew, so threads of one process
    exclude each other too (``flock`` locks belong to the open file description).
    """
    if path is None:
        yield
        return
    count = max(1, slots if slots is not None else (os.cpu_count() or 1))
    try:
        descriptor = _take_free_slot(path, count)
        if descriptor is None:
            descriptor = _open((os.getpid() * 31 + threading.get_ident()) % count, path)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            except BaseException:
                os.close(descriptor)
                raise
    except OSError:  # a gate file this process cannot open: start without the gate
        descriptor = None
    try:
        yield
    finally:
        if descriptor is not None:
            os.close(descriptor)  # closing the last descriptor releases the lock


def _open(slot: int, path: str) -> int:
    # read-only is enough for flock, and works on a slot file another user created
    return os.open(f"{path}.{slot}", os.O_CREAT | os.O_RDONLY, 0o666)


def _take_free_slot(path: str, count: int) -> int | None:
    for slot in range(count):
        descriptor = _open(slot, path)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)
            continue
        return descriptor
    return None
