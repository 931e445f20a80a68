"""The rows of history files checked against their checksums, on the driver, beside the check.

Spark's Parquet reader has no way to check the SHA-256 a history file carries
(:mod:`harness.history.integrity`): the digests are of the columns as decoded, not of pages.
So a bit flipped inside a data page that still decodes reads, to Spark, as a different
history, and would be judged (measured in docs/spark.md: of 400 one-bit flips of a small
history, 39 decode as a different one; the Spark checker gave 38 of them a verdict, one
INVALID). :func:`verified` checks every row group of every file whose footer lists digests
(:attr:`~harness.spark.source.HistoryFile.digests`), with pyarrow on the driver in a thread of
its own, while the block (the Spark check) runs; a row group that does not match, or does not
decode, is :class:`~harness.errors.CorruptData` naming the file and the row group, raised when
the block ends, whatever the block returned or raised: a damaged file is never a verdict.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator, Sequence
from typing import Final

from harness._shown import one_line
from harness.history.integrity import unreadable
from harness.spark.source import HistoryFile, RunSource, _filesystem, _pyarrow

__all__ = ["verified"]

_THREAD: Final = "history-checksums"


class _Stopped(Exception):
    """The check ended first (it failed): the rest need not be read."""


@contextlib.contextmanager
def verified(runs: Sequence[RunSource]) -> Iterator[None]:
    """Check the rows of every file of ``runs`` with digests while the block runs; raise the
    first mismatch (:class:`~harness.errors.CorruptData`), or whatever else kept a row group
    from being verified, when it ends, in place of what the block raised or returned. When
    the block raises and nothing was found by then, the rest is not read."""
    files = [file for run in runs for file in run.files if file.digests is not None]
    if not files:
        yield
        return
    stop = threading.Event()
    found: list[Exception] = []
    thread = threading.Thread(
        target=_check_all, args=(files, stop, found), name=_THREAD, daemon=True
    )
    thread.start()
    try:
        yield
    except Exception:
        stop.set()
        thread.join()
        if found:
            raise found[0] from None  # the damage, named by its row group, is the cause
        raise
    except BaseException:  # a Ctrl-C: no waiting for the files
        stop.set()
        raise
    thread.join()
    if found:
        raise found[0]


def _check_all(files: Sequence[HistoryFile], stop: threading.Event, found: list[Exception]) -> None:
    try:
        for file in files:
            _check(file, stop)
    except _Stopped:
        pass
    except Exception as exc:  # fail closed: rows that could not be verified are no verdict
        found.append(exc)


def _check(file: HistoryFile, stop: threading.Event) -> None:
    """Read ``file``'s row groups and check each against its digest (:class:`_Stopped` as
    soon as ``stop`` is set)."""
    from harness.history.io import _verified_row_groups

    pa, pq, fs = _pyarrow()
    pc = importlib.import_module("pyarrow.compute")
    assert file.digests is not None
    filesystem, inner, _ = _filesystem(file.uri, fs)
    rows = 0
    try:
        with filesystem.open_input_file(inner) as stream:
            parquet = pq.ParquetFile(stream)
            if parquet.num_row_groups != len(file.digests):  # changed since it was listed
                raise unreadable(file.uri, _changed(parquet.num_row_groups, len(file.digests)))
            for batches in _verified_row_groups(pa, pc, parquet, file.digests, file.uri):
                rows += sum(batch.num_rows for batch in batches)
                if stop.is_set():
                    raise _Stopped
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise unreadable(
            file.uri, f"cannot read its rows after row {rows} to verify them ({one_line(exc)})"
        ) from exc


def _changed(groups: int, listed: int) -> str:
    return f"it has {groups} row group(s) now, {listed} when it was listed: it changed"
