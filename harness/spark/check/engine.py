"""Which checker a stored history should go to: the local one or Spark, and why.

``python -m harness check HISTORY --engine auto`` (the default) asks :func:`choose_engine`.
The Spark checker returns the same verdict as the local one, but it pays for a JVM and its
planning before it reads a row, so on a small history the local checker is faster; past
:data:`SPARK_FROM_EVENTS` events Spark overtakes it on the 2-core machine the figures in
``docs/spark.md`` ("Which engine") were measured on, and a history whose events the local
checker could not hold in memory (about :data:`LOCAL_BYTES_PER_EVENT` bytes each, measured)
goes to Spark whatever its size. Only Parquet histories can go to Spark; a JSONL one, or a
machine without pyspark or a Java 17+, stays local, and the reason says so.

No pyspark or JVM is touched here: the size comes from the Parquet footers (pyarrow), the
memory from ``/proc/meminfo`` where there is one.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from typing import Final, final

from harness.errors import HarnessError

__all__ = [
    "LOCAL_BYTES_PER_EVENT",
    "SPARK_FROM_EVENTS",
    "EngineChoice",
    "available_memory",
    "choose_engine",
]

SPARK_FROM_EVENTS: Final = 4_000_000
"""From this many events Spark (``local[2]``, JVM start included) is faster than the local
checker on the machine of ``docs/spark.md``'s figures (2 cores)."""
LOCAL_BYTES_PER_EVENT: Final = 600
"""The local checker's peak memory per event (read, indexed and checked), measured."""
_MEMORY_SHARE: Final = 0.5
"""The local checker may take at most this share of the available memory."""


@final
@dataclass(frozen=True, slots=True)
class EngineChoice:
    """The engine (``"local"`` or ``"spark"``) and the one-line reason."""

    engine: str
    reason: str


def available_memory() -> int | None:
    """Bytes of memory available to a new process (``MemAvailable``), None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _spark_missing() -> str | None:
    """Why Spark cannot run here (no pyspark, no Java 17+), None when it can."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'stream-harness[spark]')"
    from harness.spark.java import java_info

    try:
        java_info()
    except HarnessError as exc:
        return str(exc)
    return None


def _gib(size: float) -> str:
    """``size`` bytes in GiB, or in MiB below a tenth of a GiB (never "0.0 GiB")."""
    if size < 2**30 / 10:
        return f"{max(size / 2**20, 0.1):.1f} MiB"
    return f"{size / 2**30:.1f} GiB"


def choose_engine(
    history: str | os.PathLike[str],
    *,
    memory: int | None = None,
    spark_from: int = SPARK_FROM_EVENTS,
) -> EngineChoice:
    """The engine for ``history`` and why (``memory``: available bytes, default
    :func:`available_memory`). Raises what :func:`~harness.spark.source.discover_runs`
    raises for a Parquet path that holds no history."""
    text = os.fspath(history)
    if not (text.endswith(".parquet") or os.path.isdir(text)):
        return EngineChoice("local", "a JSONL history: only the local checker reads JSONL")
    from harness.spark.source import discover_runs

    runs = discover_runs(text)
    events = sum(run.rows for run in runs)
    memory = available_memory() if memory is None else memory
    needed = events * LOCAL_BYTES_PER_EVENT
    fits = memory is None or needed <= _MEMORY_SHARE * memory
    room = "" if memory is None else f" of {_gib(memory)} available"
    if len(runs) > 1 or os.path.isdir(text):
        why = f"{len(runs)} run(s) in a directory: the local checker reads one file"
    elif not fits:
        why = f"{events:,} events need about {_gib(needed)}{room}, too much for the local checker"
    elif events >= spark_from:
        why = f"{events:,} events, at least {spark_from:,}, where Spark overtakes the local checker"
    else:
        return EngineChoice(
            "local",
            f"{events:,} events, below {spark_from:,}, where Spark overtakes the local "
            f"checker; it needs about {_gib(needed)} of memory{room}",
        )
    missing = _spark_missing()
    if missing is not None:
        return EngineChoice("local", f"{why}, but Spark cannot run here: {missing}")
    return EngineChoice("spark", why)
