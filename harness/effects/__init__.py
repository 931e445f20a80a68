"""Effects outside a message broker: lines printed, files written, rows in a SQLite database.

A door that runs an application (the Kafka door today) declares *sources*
(:func:`stdout_lines`, :func:`stderr_lines`, :func:`file_lines`, :func:`sqlite_rows`), keeps
one :class:`EffectSession` per run (fresh paths per schedule, kept across restarts, crashes
that lose what a process held), installs :mod:`harness.effects.interpose` while the
application runs, and at the drain writes what :meth:`EffectSession.observe` found into the
sources' log sinks, so every checker judges these effects like any other output.
"""

from __future__ import annotations

from harness.effects.session import EffectSession, Process
from harness.effects.sources import (
    By,
    EffectSource,
    FileLines,
    Found,
    SQLiteRows,
    StreamLines,
    effect_from_json,
    file_lines,
    parse_by,
    parse_effect,
    sources_of,
    sqlite_rows,
    stderr_lines,
    stdout_lines,
)

__all__ = [
    "By",
    "EffectSession",
    "EffectSource",
    "FileLines",
    "Found",
    "Process",
    "SQLiteRows",
    "StreamLines",
    "effect_from_json",
    "file_lines",
    "parse_by",
    "parse_effect",
    "sources_of",
    "sqlite_rows",
    "stderr_lines",
    "stdout_lines",
]
