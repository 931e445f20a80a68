"""``python -m harness check-spark HISTORY``: the Spark checker, behind the same front door.

The options are declared by ``harness.spark.check.command`` (shared with ``spark-submit
harness/spark/job.py``), imported only when this command runs. The history is looked at
before any JVM starts: a missing path, a directory without Parquet files or a file that is
not history Parquet (a JSONL history, say) is one line on stderr within a second, not after
Spark's start-up. The JVM's start-up notice about incubator modules (Spark 4 enables
``jdk.incubator.vector``) is kept off stderr; everything else the JVM prints goes through.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from harness._usage import UsageParser
from harness.errors import ConfigError, CorruptData

__all__ = [
    "DESCRIPTION",
    "INCUBATOR_NOTICE",
    "NoticeFilter",
    "add_arguments",
    "filter_notice",
    "main",
    "preflight",
    "run_spark_command",
]

INCUBATOR_NOTICE: Final = b"WARNING: Using incubator modules:"
"""The start of the line every JVM with an incubator module enabled prints first."""

_DRAIN_SECONDS: Final = 10.0
"""At most this long, the end of :func:`_without_incubator_notice` waits for the forwarder to
pass on the filtered stream when no JVM holds it (it ends as soon as the pipe is read)."""

DESCRIPTION: Final = (
    "Check history Parquet files with the Spark checker (same verdict as "
    "`check`). Exit code: 0 VALID, 1 INVALID, 2 UNKNOWN or usage error."
)


def _command() -> Any:
    try:
        return importlib.import_module("harness.spark.check.command")
    except ImportError as exc:
        raise ConfigError(f"the Spark checker is not available ({exc})") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the Spark command's options (``harness.spark.check.command.add_arguments``)."""
    _command().add_arguments(parser)


def _jsonl_hint(path: str) -> str | None:
    """What to do with ``path`` when it is a JSONL history rather than Parquet."""
    try:
        with open(path, "rb") as file:
            start = file.read(64).lstrip()
    except OSError:
        return None
    if not (path.endswith(".jsonl") or start.startswith(b"{")):
        return None
    return (
        "it looks like a JSONL history: check it with `python -m harness check "
        f"{path} --guarantee G` (the local checker reads JSONL), or write it as Parquet "
        "with harness.write_history(harness.read_history(FILE), 'history.parquet')"
    )


def preflight(history: str) -> tuple[int, int]:
    """Check that ``history`` holds history Parquet files, without starting Spark; returns
    the number of runs found and their rows (events)."""
    from harness.spark.source import discover_runs

    try:
        runs = discover_runs(history)
        return len(runs), sum(run.rows for run in runs)
    except CorruptData as exc:
        hint = _jsonl_hint(history)
        if hint is None:
            raise
        raise CorruptData(f"{exc}; {hint}") from None


def main(args: argparse.Namespace) -> int:
    """Check the history with Spark; returns the worst verdict's exit code."""
    from harness.report.live import LiveProgress

    command = _command()
    runs, rows = preflight(str(args.history))
    with LiveProgress(f"check-spark {args.history}", rows, units="rows") as live:
        live.step(detail=f"{runs} run{'s' if runs != 1 else ''}: starting Spark")
        with _without_incubator_notice():
            return int(command.run(args, live))


class NoticeFilter:
    """Leaves out lines that start with :data:`INCUBATOR_NOTICE` from a stream of bytes fed
    in chunks. Other output is passed on at once, partial lines included (a progress line has
    none); only a line that may be the notice is held until its end."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, chunk: bytes) -> bytes:
        """What of ``chunk`` (and of what was held) can be passed on now."""
        *lines, pending = (self._pending + chunk).split(b"\n")
        kept = b"".join(line + b"\n" for line in lines if not line.startswith(INCUBATOR_NOTICE))
        if pending and not INCUBATOR_NOTICE.startswith(pending[: len(INCUBATOR_NOTICE)]):
            kept, pending = kept + pending, b""
        self._pending = pending
        return kept

    def end(self) -> bytes:
        """What was held, at the end of the stream."""
        pending, self._pending = self._pending, b""
        return b"" if pending.startswith(INCUBATOR_NOTICE) else pending


def filter_notice(source: int, target: int) -> None:
    """Copy file descriptor ``source`` to ``target`` through a :class:`NoticeFilter`."""
    notice = NoticeFilter()
    while chunk := os.read(source, 65536):
        if kept := notice.feed(chunk):
            os.write(target, kept)
    if rest := notice.end():
        os.write(target, rest)


def _forward(source: int, target: int) -> None:
    try:
        filter_notice(source, target)
    finally:  # every writer closed its end: the JVM has exited
        os.close(source)
        os.close(target)


@contextmanager
def _without_incubator_notice() -> Iterator[None]:
    """Inside the block, file descriptor 2 (which the JVM inherits) goes through
    :func:`filter_notice`; the JVM keeps writing there after the block, filtered."""
    sys.stderr.flush()
    try:
        stderr = os.dup(2)
    except OSError:  # no stderr to filter
        yield
        return
    read_end, write_end = os.pipe()
    forwarder = threading.Thread(
        target=_forward, args=(read_end, stderr), name="jvm-stderr", daemon=True
    )
    forwarder.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(stderr, 2)
        if not _jvm_started():
            # nothing holds the pipe now: what the block wrote (an error line) is passed on
            # before the process may exit (a daemon thread does not outlive it)
            forwarder.join(timeout=_DRAIN_SECONDS)


def _jvm_started() -> bool:
    """Whether pyspark started a JVM in this process (it keeps writing to the pipe)."""
    pyspark = sys.modules.get("pyspark")
    return pyspark is not None and getattr(pyspark.SparkContext, "_gateway", None) is not None


def run_spark_command(argv: Sequence[str]) -> int:
    """Parse ``argv`` as ``check-spark``'s arguments and run it (``check --spark`` uses this)."""
    parser = UsageParser(prog="python -m harness check-spark", description=DESCRIPTION)
    add_arguments(parser)
    return main(parser.parse_args(list(argv)))
