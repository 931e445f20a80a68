"""Where the histories are: Parquet files, their headers and the runs they make up.

A *history source* is a path (local, or a URI pyarrow understands such as ``hdfs://``):

* a single ``.parquet`` file: one run;
* a directory: every ``.parquet`` file below it (hidden ``.*`` and ``_*`` files and
  directories, e.g. ``_SUCCESS`` and ``.crc`` files, are skipped), grouped into runs by the
  ``run_id`` of their headers. The usual layout is one directory per run, named
  ``run_id=<id>`` as Spark's ``partitionBy("run_id")`` writes it; such a name must agree
  with the headers below it. A run may be split over several files (all with the same
  header); its events are the files' rows in path order.

Only the footers are read here (header, column types, row counts, the checksum), on the
driver, with pyarrow; the rows are read by Spark, and checked against the checksum by
:mod:`harness.spark.check._verify`.
"""

from __future__ import annotations

import importlib
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any, Final, final

from harness.errors import ConfigError, CorruptData
from harness.history.events import HistoryMeta
from harness.history.integrity import ChecksumPolicy, checked_policy
from harness.history.io import _pyarrow as _parquet_modules

__all__ = ["HistoryFile", "RunSource", "discover_runs"]

_RUN_DIR: Final = "run_id="
_PARQUET_INSTALL: Final = "pip install 'stream-harness[spark]'"


@final
@dataclass(frozen=True, slots=True)
class HistoryFile:
    """One Parquet file of a run: ``uri`` as Spark reads it, ``rows`` from its footer, and
    ``digests``, the SHA-256 of each row group its checksum lists (``None``: nothing to
    verify, see :func:`discover_runs`), which :mod:`harness.spark.check` verifies."""

    uri: str
    rows: int
    digests: tuple[str, ...] | None = None


@final
@dataclass(frozen=True, slots=True)
class RunSource:
    """The files of one run (in event order) and their common header."""

    run_id: str
    meta: HistoryMeta
    files: tuple[HistoryFile, ...]

    @property
    def rows(self) -> int:
        """The number of events of the run."""
        return sum(file.rows for file in self.files)


def _pyarrow() -> tuple[Any, Any, Any]:
    """``pyarrow``, ``pyarrow.parquet`` and ``pyarrow.fs`` (:class:`MissingDependency` with the
    pip command without pyarrow)."""
    pa, pq = _parquet_modules("the Spark checker reads history headers with", _PARQUET_INSTALL)
    return pa, pq, importlib.import_module("pyarrow.fs")


def _filesystem(path: str, fs: Any) -> tuple[Any, str, str]:
    """(filesystem, path inside it, prefix that turns such a path back into a Spark URI)."""
    parsed = urllib.parse.urlparse(path)
    if parsed.scheme and len(parsed.scheme) > 1 and parsed.scheme != "file":
        try:
            filesystem, inner = fs.FileSystem.from_uri(path)
        except Exception as exc:  # pyarrow raises ArrowInvalid / OSError variants
            raise ConfigError(
                f"cannot open history location {path!r}: {exc}; use a local path or a URI "
                f"pyarrow supports (hdfs://, s3://, gs://)"
            ) from exc
        return filesystem, inner, f"{parsed.scheme}://{parsed.netloc}"
    local = parsed.path if parsed.scheme == "file" else path
    return fs.LocalFileSystem(), os.path.abspath(local), ""


def _hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


def discover_runs(
    path: str | os.PathLike[str], *, checksum: ChecksumPolicy = "verify"
) -> tuple[RunSource, ...]:
    """The runs stored at ``path``, sorted by run id, each with its files in path order.

    ``checksum`` is :func:`harness.history.read_history`'s: a file's header is checked
    against its checksum here, and the row groups' digests it lists are kept
    (:attr:`HistoryFile.digests`) for the rows to be checked against; ``"require"`` refuses a
    file without a checksum, ``"ignore"`` checks nothing. Raises :class:`ConfigError` when
    ``path`` does not exist or holds no ``.parquet`` file (or for an unknown ``checksum``),
    :class:`CorruptData` when a file is not a history Parquet file (no header, wrong columns:
    the same checks as :func:`harness.history.io.read_parquet`), when its header does not
    match its checksum, when files of one run have different headers, or when a ``run_id=``
    directory disagrees with a header below it; :class:`MissingDependency` without pyarrow.
    """
    from harness.history.io import _current, _parquet_head

    policy = checked_policy(checksum)
    text = os.fspath(path)
    pa, pq, fs = _pyarrow()
    filesystem, root, prefix = _filesystem(text, fs)
    info = filesystem.get_file_info(root)
    if info.type == fs.FileType.NotFound:
        raise ConfigError(f"no history at {text!r}: no such file or directory")
    if info.type == fs.FileType.File:
        paths = [root]
    else:
        selector = fs.FileSelector(root, recursive=True)
        paths = sorted(
            entry.path
            for entry in filesystem.get_file_info(selector)
            if entry.type == fs.FileType.File
            and entry.path.endswith(".parquet")
            and not _hidden(entry.path[len(root) :])
        )
        if not paths:
            raise ConfigError(
                f"no history at {text!r}: the directory holds no .parquet file (a history "
                f"is one .parquet file, or a directory of them, e.g. run_id=<id>/*.parquet)"
            )
    runs: dict[str, tuple[HistoryMeta, str, list[HistoryFile]]] = {}
    for file_path in paths:
        shown = prefix + file_path
        try:
            with filesystem.open_input_file(file_path) as stream:
                parquet = pq.ParquetFile(stream)
                rows = parquet.metadata.num_rows
        except (pa.ArrowException, OSError, ValueError) as exc:
            cause = " ".join(str(exc).split())  # pyarrow's text spans lines: one line
            raise CorruptData(f"{shown}: not a Parquet file ({cause})") from exc
        own, digests = _parquet_head(pa, parquet, shown, policy)
        meta = _current(own)
        for part in file_path[len(root) :].split("/"):
            if part.startswith(_RUN_DIR):
                named = urllib.parse.unquote(part[len(_RUN_DIR) :])
                if named != meta.run_id:
                    raise CorruptData(
                        f"{shown}: the file sits in directory {part!r} but its header says "
                        f"run_id {meta.run_id!r}; move it, or rewrite its header"
                    )
        uri = prefix + file_path if prefix else file_path
        listed = None if digests is None else tuple(digests)
        known = runs.get(meta.run_id)
        if known is None:
            runs[meta.run_id] = (meta, shown, [HistoryFile(uri, rows, listed)])
            continue
        if known[0].to_json() != meta.to_json():
            raise CorruptData(
                f"{shown}: its header differs from the one of {known[1]}, which has the same "
                f"run_id {meta.run_id!r}; files of one run must share one header"
            )
        known[2].append(HistoryFile(uri, rows, listed))
    return tuple(
        RunSource(run_id=run_id, meta=meta, files=tuple(files))
        for run_id, (meta, _, files) in sorted(runs.items())
    )
