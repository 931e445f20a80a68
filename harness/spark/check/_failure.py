"""What the Spark checker raises when Spark cannot read or plan a check: one typed error.

A check that fails inside Spark (a damaged Parquet page, a file gone since the footers were
read, a column Spark cannot resolve, an executor lost, the JVM out of memory or gone) is
never a verdict: :func:`failure` turns the exception pyspark or py4j raised into a
:class:`SparkCheckFailed` (an :class:`UnreadableHistory` when a file could not be read)
whose one-line message names the file and the root cause and says what to do, so every door
reports it as UNKNOWN (exit code 2) on one line. Standard library only: pyspark's and py4j's
exceptions are recognised by their module, not imported.
"""

from __future__ import annotations

import re
from typing import Final

from harness._shown import shown
from harness.errors import CorruptData, HarnessError

__all__ = ["SparkCheckFailed", "UnreadableHistory", "failure", "from_spark"]

_CAUSE_CHARS: Final = 240
"""How much of the root cause's message the one line keeps."""
_READ_FILE: Final = re.compile(
    r"(?:reading file|File does not exist:|FileNotFoundException:)\s*(\S+)"
)
_CAUSED_BY: Final = re.compile(r"^\s*Caused by:\s*(.+)$", re.MULTILINE)
_FIRST_JAVA: Final = re.compile(r"^\s*:?\s*([\w.$]+(?:Exception|Error)):?\s*(.*)$", re.MULTILINE)
_MEMORY_HINT: Final = (
    "give the driver more memory (`--driver-memory 8g`, or spark.driver.memory under "
    "spark-submit), or check on a cluster"
)


class SparkCheckFailed(HarnessError):
    """The Spark checker could not finish a check: no verdict (UNKNOWN, exit code 2)."""


class UnreadableHistory(SparkCheckFailed, CorruptData):
    """Spark could not read a history file (damaged pages, a file gone or changed)."""


def from_spark(exc: BaseException) -> bool:
    """Whether ``exc`` comes from pyspark, py4j or a JVM connection that went away."""
    module = type(exc).__module__ or ""
    return module.split(".")[0] in ("pyspark", "py4j") or isinstance(exc, ConnectionError)


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _root(text: str) -> str:
    """The deepest cause in a Java stack trace's text: ``"Type: message"``."""
    causes = _CAUSED_BY.findall(text)
    line = causes[-1] if causes else ""
    if not line:
        found = _FIRST_JAVA.search(text)
        line = f"{found.group(1)}: {found.group(2)}" if found else text.strip().splitlines()[0]
    name, _, message = line.partition(":")
    cause = f"{_short(name.strip())}: {message.strip()}" if message else _short(name.strip())
    cause = cause.replace("\n", " ")
    return cause if len(cause) <= _CAUSE_CHARS else cause[: _CAUSE_CHARS - 3] + "..."


def _text(exc: BaseException) -> str:
    parts = [str(exc)]
    trace = getattr(exc, "_stackTrace", None) or getattr(exc, "stackTrace", None)
    if isinstance(trace, str):
        parts.append(trace)
    return "\n".join(parts)


def failure(exc: BaseException, history: str) -> SparkCheckFailed:
    """The typed error for ``exc``, raised by Spark while checking ``history``."""
    text = _text(exc) if str(exc) else type(exc).__name__
    cause = _root(text)
    where = _READ_FILE.search(text)
    if isinstance(exc, ConnectionError) or "Py4JNetworkError" in type(exc).__name__:
        return SparkCheckFailed(
            f"the Spark check of {shown(history)} failed: the JVM went away ({cause}); "
            f"it may have run out of memory: {_MEMORY_HINT}"
        )
    if "OutOfMemoryError" in text:
        return SparkCheckFailed(
            f"the Spark check of {shown(history)} failed: Java ran out of memory ({cause}); "
            f"{_MEMORY_HINT}"
        )
    if where is not None:
        file = re.sub(r"^file:/+", "/", where.group(1).rstrip(".,;"))
        return UnreadableHistory(
            f"cannot read history file {shown(file)} ({cause}); the file is damaged or "
            f"changed since it was listed: write it again, or check it with the local "
            f"checker to see where"
        )
    lost = "ExecutorLost" in text or "executor lost" in text.lower()
    what = "an executor was lost" if lost else "Spark failed"
    return SparkCheckFailed(
        f"the Spark check of {shown(history)} failed: {what} ({cause}); no verdict: "
        f"rerun it, or check with the local checker"
    )
