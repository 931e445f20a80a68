"""What an effect outside a broker is, and how its records are attributed to input records.

An :class:`EffectSource` names one place an application's effects land that the harness can
read after the drain: the lines it printed (:func:`stdout_lines`, :func:`stderr_lines`), the
lines of a file or of the files under a directory it wrote (:func:`file_lines`), or the rows of
a table of a SQLite database (:func:`sqlite_rows`). Each is judged as a *log sink* of the
history named :attr:`EffectSource.sink`: every line or row found at the drain is an output,
attributed to the input record(s) it names by an :class:`By` rule:

* ``By(column="order_id")`` (rows): the value of that column; an integer ``n`` or the string
  ``"n"`` is record ``r<n>``, a string naming an ``r<N>`` token is that record;
* ``By(pattern=r"processed (\\S+)")``: every match of the regular expression (its first group
  if it has one, else the whole match), read as above;
* ``By(function=f)``: ``f(line)`` (a ``str``) or ``f(row)`` (a ``dict`` of column -> value)
  returns a record id, several, or None;
* the default: the ``r<N>`` tokens in the line or row (input records are named ``r<N>``; the
  default payloads carry the id, and a template's ``{id}`` placeholder does).

A line naming no record is not an effect (programs print other things too); a row naming
none is an output with no input behind it, reported as ``unexpected``. These sources know
nothing of Kafka: any door that runs an application and can hand over what it printed and
where its files went (:class:`Observation`) can judge them.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from harness._lazy import named_object
from harness._shown import shown
from harness.effects._ids import ids_in, record_id_of
from harness.errors import ConfigError

__all__ = [
    "By",
    "EffectSource",
    "FileLines",
    "Found",
    "Observation",
    "SQLiteRows",
    "StreamLines",
    "effect_from_json",
    "file_lines",
    "load_named",
    "parse_by",
    "parse_effect",
    "sources_of",
    "sqlite_rows",
    "stderr_lines",
    "stdout_lines",
]

Stream = Literal["stdout", "stderr"]
_SINK_CHARS: Final = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, slots=True)
class Found:
    """One output found at the drain: the record it is an effect of (None: none)."""

    record_id: str | None
    key: str | None = None


class Observation(Protocol):
    """What a door hands a source at the drain."""

    def lines(self, stream: Stream) -> list[str]:
        """The complete lines written to ``stream`` by every instance, in order."""
        ...

    def path(self, original: str) -> Path:
        """Where the application's path ``original`` (absolute) really is in this run."""
        ...


class EffectSource(Protocol):
    """One place an application's effects land (see the module docstring)."""

    @property
    def sink(self) -> str:
        """The history's sink name."""
        ...

    @property
    def paths(self) -> tuple[str, ...]:
        """The absolute paths the application names that each run redirects."""
        ...

    def describe(self) -> str: ...

    def observe(self, seen: Observation) -> list[Found]: ...

    def to_json(self) -> dict[str, Any]: ...


def _as_written(pattern: str) -> str:
    """``pattern`` quoted as the user wrote it: ``repr`` would double every backslash, and a
    report saying ``(\\\\d+)`` names another regular expression than ``(\\d+)``."""
    for quote in ("'", '"'):
        if quote not in pattern and pattern.isprintable():
            return f"{quote}{pattern}{quote}"
    return repr(pattern)


@dataclass(frozen=True, slots=True)
class By:
    """How a line or row names its input record(s): one of ``column``, ``pattern`` and
    ``function`` (``module:function`` or a module-level function), or none (the default)."""

    column: str | None = None
    pattern: str | None = None
    function: str | Callable[[Any], Any] | None = None
    _regex: re.Pattern[str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        given = [n for n in ("column", "pattern", "function") if getattr(self, n) is not None]
        if len(given) > 1:
            raise ConfigError(f"attribute effects by one rule, got {given}; keep one")
        if self.pattern is not None:
            try:
                object.__setattr__(self, "_regex", re.compile(self.pattern))
            except (re.error, TypeError) as exc:
                raise ConfigError(
                    f"bad effect pattern {shown(self.pattern)}: {exc}; give a Python regular "
                    "expression whose first group (or whole match) is the record id"
                ) from None
        if self.column is not None and (not isinstance(self.column, str) or not self.column):
            raise ConfigError(f"an effect column must be a column name, got {shown(self.column)}")

    def _function(self) -> Callable[[Any], Any]:
        function = self.function
        if callable(function):
            return function
        assert isinstance(function, str)
        found = load_named(function, "effect function")
        if not callable(found):
            raise ConfigError(f"effect function {shown(function)} is not callable")
        return found  # type: ignore[no-any-return]

    def ids(self, item: str | Mapping[str, Any]) -> list[str | None]:
        """The record ids ``item`` (a line or a row) names under this rule."""
        if self.function is not None:
            result = self._function()(item)
            if result is None:
                return []
            values = [result] if isinstance(result, (str, int)) else list(result)
            return [record_id_of(v) for v in values]
        texts = [item] if isinstance(item, str) else [_text(v) for v in item.values()]
        if self.column is not None:
            if not isinstance(item, Mapping):
                raise ConfigError(f"By(column={self.column!r}) applies to SQLite rows only")
            if self.column not in item:
                raise ConfigError(
                    f"the table has no column {shown(self.column)} (its columns: "
                    f"{list(item)}); name the column that holds the record id"
                )
            return [record_id_of(item[self.column])]
        found: list[str | None] = []
        for text in texts:
            if self._regex is not None:
                for match in self._regex.finditer(text):
                    found.append(record_id_of(match.group(1) if match.groups() else match.group(0)))
            else:
                found.extend(ids_in(text.encode()))
        return list(dict.fromkeys(found))

    def describe(self) -> str:
        if self.column is not None:
            return f"column {self.column!r}"
        if self.pattern is not None:
            return f"pattern {_as_written(self.pattern)}"
        if self.function is not None:
            function = self.function
            name = function if isinstance(function, str) else _qualified(function)
            return f"function {name}"
        return "r<N> tokens"

    def to_json(self) -> dict[str, Any]:
        function = self.function
        if function is not None and not isinstance(function, str):
            function = _qualified(function)
        data = {"column": self.column, "pattern": self.pattern, "function": function}
        return {k: v for k, v in data.items() if v is not None}


def load_named(name: str, what: str) -> Any:
    """The object ``module:qualname`` names; a :class:`ConfigError` naming ``what`` if none."""
    try:
        found = named_object(name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"cannot load the {what} {shown(name)}: {exc}; give module:name, importable from "
            "here (on PYTHONPATH)"
        ) from None
    return found


def _qualified(function: Callable[..., Any]) -> str:
    module = getattr(function, "__module__", "?")
    return f"{module}:{getattr(function, '__qualname__', repr(function))}"


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _absolute(path: str | os.PathLike[str], what: str) -> str:
    try:
        text = os.fspath(path)
    except TypeError:
        raise ConfigError(f"{what} must be a path, got {shown(path)}") from None
    if not isinstance(text, str) or not text or "\0" in text:
        raise ConfigError(f"{what} must be a non-empty path, got {shown(path)}")
    return os.path.abspath(text)


def _sink_name(prefix: str, name: str) -> str:
    return f"{prefix}-{_SINK_CHARS.sub('_', name)[:80] or 'x'}"


@dataclass(frozen=True, slots=True)
class StreamLines:
    """The lines the application wrote to its standard output or error.

    ``buffered=False`` (the default) counts a line once its newline is written, as with a
    terminal, ``python -u`` or ``PYTHONUNBUFFERED=1`` (what container logs usually run with);
    ``buffered=True`` counts text only once the stream is flushed (``flush=True``,
    ``sys.stdout.flush()``, 8 KiB written, or the process ending normally), as with a pipe.
    Either way a crash loses what was not counted yet."""

    stream: Stream = "stdout"
    by: By = By()
    buffered: bool = False

    @property
    def sink(self) -> str:
        return self.stream

    @property
    def paths(self) -> tuple[str, ...]:
        return ()

    def describe(self) -> str:
        mode = ", block-buffered" if self.buffered else ""
        return f"{self.stream} lines{mode}, by {self.by.describe()}"

    def observe(self, seen: Observation) -> list[Found]:
        return [Found(rid) for line in seen.lines(self.stream) for rid in self.by.ids(line)]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.stream, "by": self.by.to_json()}
        if self.buffered:
            data["buffered"] = True
        return data


@dataclass(frozen=True, slots=True)
class FileLines:
    """The lines of a file the application writes, or of every file under a directory it
    writes (in name order). ``path`` as the application names it; each run redirects it."""

    path: str
    by: By = By()

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _absolute(self.path, "file_lines path"))

    @property
    def sink(self) -> str:
        return _sink_name("file", Path(self.path).name)

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self) -> str:
        return f"lines of {self.path}, by {self.by.describe()}"

    def observe(self, seen: Observation) -> list[Found]:
        where = seen.path(self.path)
        files = sorted(p for p in where.rglob("*") if p.is_file()) if where.is_dir() else [where]
        found: list[Found] = []
        for file in files:
            if not file.is_file():
                continue
            text = file.read_bytes().decode("utf-8", "replace")
            for line in text.splitlines():
                found.extend(Found(rid) for rid in self.by.ids(line))
        return found

    def to_json(self) -> dict[str, Any]:
        return {"kind": "file", "path": self.path, "by": self.by.to_json()}


@dataclass(frozen=True, slots=True)
class SQLiteRows:
    """The rows of ``table`` in the SQLite database file ``path`` (as the application names
    it; each run redirects it), read after the drain: what was committed."""

    path: str
    table: str
    by: By = By()

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", _absolute(self.path, "sqlite_rows path"))
        if not isinstance(self.table, str) or not self.table:
            raise ConfigError(f"sqlite_rows needs a table name, got {shown(self.table)}")

    @property
    def sink(self) -> str:
        return _sink_name("sqlite", self.table)

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,)

    def describe(self) -> str:
        return f"rows of table {self.table!r} in {self.path}, by {self.by.describe()}"

    def observe(self, seen: Observation) -> list[Found]:
        return [
            Found(rid)
            for row in self._rows(seen.path(self.path))
            for rid in (self.by.ids(row) or [None])
        ]

    def _rows(self, file: Path) -> Iterator[dict[str, Any]]:
        if not file.is_file():
            return
        quoted = '"' + self.table.replace('"', '""') + '"'
        db = sqlite3.connect(f"{file.as_uri()}?mode=ro", uri=True)
        try:
            try:
                cursor = db.execute(f"SELECT * FROM {quoted}")
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return
                raise
            names = [d[0] for d in cursor.description]
            for row in cursor:
                yield dict(zip(names, row, strict=True))
        finally:
            db.close()

    def to_json(self) -> dict[str, Any]:
        return {"kind": "sqlite", "path": self.path, "table": self.table, "by": self.by.to_json()}


def stdout_lines(
    *,
    pattern: str | None = None,
    function: Callable[[str], Any] | str | None = None,
    buffered: bool = False,
) -> StreamLines:
    """Lines printed to standard output are the effects (see :class:`StreamLines`)."""
    return StreamLines("stdout", By(None, pattern, function), buffered)


def stderr_lines(
    *,
    pattern: str | None = None,
    function: Callable[[str], Any] | str | None = None,
    buffered: bool = False,
) -> StreamLines:
    """Lines written to standard error (logging's default) are the effects."""
    return StreamLines("stderr", By(None, pattern, function), buffered)


def file_lines(
    path: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    function: Callable[[str], Any] | str | None = None,
) -> FileLines:
    """Lines of the file (or the files under the directory) ``path`` are the effects."""
    return FileLines(os.fspath(path), By(None, pattern, function))


def sqlite_rows(
    path: str | os.PathLike[str],
    table: str,
    *,
    column: str | None = None,
    pattern: str | None = None,
    function: Callable[[dict[str, Any]], Any] | str | None = None,
) -> SQLiteRows:
    """Committed rows of ``table`` in the SQLite file ``path`` are the effects."""
    return SQLiteRows(os.fspath(path), table, By(column, pattern, function))


_KINDS: Final = ("stdout", "stderr", "file:PATH", "sqlite:PATH:TABLE")


def parse_by(spec: str) -> By:
    """``column=NAME``, ``pattern=REGEX`` or ``function=MODULE:FUNCTION`` (the CLI's ``--by``)."""
    name, eq, value = spec.partition("=")
    if not eq or name not in ("column", "pattern", "function") or not value:
        raise ConfigError(
            f"bad --by {shown(spec)}: give column=NAME, pattern=REGEX or function=MODULE:FUNCTION"
        )
    if name == "column":
        return By(column=value)
    return By(pattern=value) if name == "pattern" else By(function=value)


def parse_effect(spec: str, by: By | None = None) -> EffectSource:
    """The CLI's ``--effect``: ``stdout``, ``stderr``, ``file:PATH`` or ``sqlite:PATH:TABLE``."""
    kind, _, rest = spec.partition(":")
    by = by or By()
    if kind in ("stdout", "stderr") and not rest:
        if by.column is not None:
            raise ConfigError(f"--by column=... applies to sqlite effects, not {kind}")
        return StreamLines(kind, by)  # type: ignore[arg-type]
    if kind == "file" and rest:
        return FileLines(rest, by)
    if kind == "sqlite" and ":" in rest:
        path, _, table = rest.rpartition(":")
        if path and table:
            return SQLiteRows(path, table, by)
    raise ConfigError(f"bad --effect {shown(spec)}: give one of {', '.join(_KINDS)}")


def effect_from_json(data: Mapping[str, Any]) -> EffectSource:
    """A source from its :meth:`~EffectSource.to_json` form (replay files)."""
    try:
        by = By(**dict(data.get("by") or {}))
        kind = data["kind"]
        if kind in ("stdout", "stderr"):
            return StreamLines(kind, by, bool(data.get("buffered", False)))
        if kind == "file":
            return FileLines(data["path"], by)
        if kind == "sqlite":
            return SQLiteRows(data["path"], data["table"], by)
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"bad effect in replay file {shown(dict(data))}: {exc}") from None
    raise ConfigError(f"unknown effect kind {shown(kind)} in replay file")


def sources_of(items: Iterable[EffectSource]) -> tuple[EffectSource, ...]:
    """Check a list of sources: each a source, sink names distinct."""
    chosen = tuple(items)
    seen: set[str] = set()
    for item in chosen:
        if not hasattr(item, "observe") or not hasattr(item, "sink"):
            raise ConfigError(
                f"an effect must be stdout_lines(), stderr_lines(), file_lines(...) or "
                f"sqlite_rows(...), got {shown(item)}"
            )
        if item.sink in seen:
            raise ConfigError(f"two effects observe the same place {item.sink!r}; keep one")
        seen.add(item.sink)
    return chosen
