"""Replay files: everything needed to run one failing schedule again, without Hypothesis.

A :class:`Replay` is the processor (by ``module:name``, its source file, or the factory a
door's application is made by), the guarantee, the topology, the backend, the schedule and
the seed; :meth:`Replay.save` writes it whole into the failures directory, :meth:`Replay.keep`
falls back to a temporary directory so a counterexample is never lost to a bad directory, and
:meth:`Replay.load` reads one back (or the replay JSON itself, given inline).

Another system's replay file (an unchanged Spark job's, a built-in streaming variant's) names
the reader that makes it a :class:`SystemReplay` in its ``system`` key (``module:qualname``,
imported by name as a door's ``factory`` is: the engine imports no system's module);
:func:`load_replay` reads either kind, and :func:`harness.engine.replay` runs either.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from harness._json import parse_json
from harness._lazy import named_object
from harness._output import writable, write_atomic
from harness._shown import shown
from harness.check import Guarantee
from harness.errors import ConfigError
from harness.faults.schedule import Schedule
from harness.sim.topology import Topology
from harness.sim.world import BACKENDS, Backend

if TYPE_CHECKING:
    from harness.check import Verdict
    from harness.faults.streams import StreamSchedule
    from harness.history.events import History
    from harness.sim.budget import RunBudget

__all__ = [
    "DEFAULT_FAILURES_DIR",
    "LEGACY_SYSTEM_READERS",
    "REPLAY_VERSION",
    "SYSTEM_KEY",
    "Replay",
    "SystemReplay",
    "load_replay",
]

REPLAY_VERSION: Final = 1
DEFAULT_FAILURES_DIR: Final = Path(".harness") / "failures"
FALLBACK_FAILURES_DIR: Final = Path(tempfile.gettempdir()) / "harness-failures"
"""Where a replay file goes when the failures directory cannot be written."""


@dataclass(frozen=True, slots=True)
class Replay:
    """Everything needed to run one schedule again: the content of a replay file."""

    processor: str
    guarantee: Guarantee
    topology: Topology
    backend: Backend
    schedule: Schedule
    processor_file: str | None = None
    seed: int | None = None
    factory: Mapping[str, Any] | None = None
    """How to make the processor again when it is not importable by name (a door's
    application: ``{"factory": "module:function", "args": {...}}``, see
    :func:`make_processor`); written only when set."""

    def to_json(self) -> dict[str, Any]:
        data = {
            "harness_replay": REPLAY_VERSION,
            "processor": self.processor,
            "processor_file": self.processor_file,
            "guarantee": self.guarantee.value,
            "backend": self.backend,
            "seed": self.seed,
            "topology": self.topology.to_json(),
            "schedule": self.schedule.to_json(),
        }
        if self.factory is not None:
            data["factory"] = dict(self.factory)
        return data

    @classmethod
    def from_json(cls, data: object, where: str = "replay file") -> Replay:
        if _system_reader_name(data) is not None:
            raise ConfigError(
                f"{where} is a spark-job replay file, which runs a Spark job rather than a "
                "processor; replay it with harness.replay(FILE), pytest --harness-replay FILE "
                "or python -m harness replay FILE (or report FILE)"
            )
        if not isinstance(data, Mapping) or "harness_replay" not in data:
            raise ConfigError(
                f"{where} is not a replay file (no 'harness_replay' key); pass the file a "
                "failing run saved under .harness/failures/"
            )
        version = data["harness_replay"]
        if type(version) is not int or version != REPLAY_VERSION:
            raise ConfigError(
                f"{where} has replay version {shown(version)}; this harness reads "
                f"version {REPLAY_VERSION}"
            )
        try:
            guarantee = Guarantee(data["guarantee"])
        except (KeyError, ValueError, TypeError):
            raise ConfigError(
                f"{where}: guarantee must be one of {[g.value for g in Guarantee]}, got "
                f"{shown(data.get('guarantee'))}"
            ) from None
        backend = data.get("backend", "memory")
        if not isinstance(backend, str) or backend not in BACKENDS:
            raise ConfigError(f"{where}: backend must be one of {BACKENDS}, got {shown(backend)}")
        processor = data.get("processor")
        if not isinstance(processor, str) or (":" not in processor and "factory" not in data):
            raise ConfigError(f"{where}: processor must be 'module:name', got {shown(processor)}")
        file, seed = data.get("processor_file"), data.get("seed")
        if file is not None and not isinstance(file, str):
            raise ConfigError(f"{where}: processor_file must be a path or null, got {shown(file)}")
        if seed is not None and type(seed) is not int:
            raise ConfigError(f"{where}: seed must be an integer or null, got {shown(seed)}")
        factory = data.get("factory")
        if factory is not None and (
            not isinstance(factory, Mapping)
            or not isinstance(factory.get("factory"), str)
            or not isinstance(factory.get("args"), Mapping)
        ):
            raise ConfigError(
                f"{where}: factory must be an object with 'factory' ('module:function') and "
                f"'args', got {shown(factory)}"
            )
        return cls(
            processor=processor,
            guarantee=guarantee,
            topology=Topology.from_json(data.get("topology") or {}),
            backend=backend,
            schedule=Schedule.from_json(data.get("schedule")),
            processor_file=file,
            seed=seed,
            factory=factory,
        )

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Replay:
        """Read a replay file; a string that starts with ``{`` is the replay JSON itself."""
        data, where = _read(path)
        return cls.from_json(data, where)

    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the replay file into ``directory`` (created if missing), whole or not at all
        (a ``ConfigError`` says why not)."""
        directory = writable(directory, "the failures directory", directory=True)
        text = json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"
        name = hashlib.sha256(text.encode()).hexdigest()[:12]
        tail = self.processor.split(" -- ")[0].rpartition(":")[2].rpartition("/")[2]
        stem = re.sub(r"[^\w.-]+", "_", tail.removesuffix(".py"))[:100]
        return write_atomic(directory / f"{stem}-{name}.json", text, "the replay file")

    def keep(self, directory: str | os.PathLike[str]) -> tuple[Path | None, str | None]:
        """Save the replay file in ``directory``, else in :data:`FALLBACK_FAILURES_DIR`: a
        counterexample is never lost to a bad directory. Returns the file (None if neither
        could be written) and a note saying where it went instead, if it did."""
        try:
            return self.save(directory), None
        except ConfigError as exc:
            why = str(exc)
        try:
            path = self.save(FALLBACK_FAILURES_DIR)
        except ConfigError as again:
            return None, f"{why}; nor in {FALLBACK_FAILURES_DIR} ({again}): see the replay JSON"
        return path, f"{why}; saved in {FALLBACK_FAILURES_DIR} instead"


SYSTEM_KEY: Final = "system"
"""The key of a system's replay file that names its reader: ``module:qualname`` of a
callable ``(data, where) -> SystemReplay``."""
LEGACY_SYSTEM_READERS: Final = {
    "harness_spark_job_replay": "harness.spark.streaming.jobsearch:JobReplay.read",
}
"""The readers of files written before they named one (``system``), by their version key:
an unchanged Spark job's (and a built-in variant's) files of versions 1 and 2."""


class SystemReplay(Protocol):
    """Another system's replay file, read back (a Spark job's ``JobReplay``): what it names
    and a way to run its schedule again, judged."""

    @property
    def processor(self) -> str:
        """What the file replays (the job's app, ``variant:NAME``)."""
        ...

    @property
    def guarantee(self) -> Guarantee: ...

    @property
    def schedule(self) -> StreamSchedule: ...

    @property
    def seed(self) -> int | None: ...

    def run_again(self, *, budget: RunBudget | None = None) -> tuple[History, Verdict]:
        """Run the schedule again and judge it (``budget``: where the system bounds a run)."""
        ...


def load_replay(path: str | os.PathLike[str]) -> Replay | SystemReplay:
    """Read any replay file (or its JSON, given inline): the simulator's :class:`Replay`, or
    the :class:`SystemReplay` the reader its file names makes (the engine imports that
    reader by name, as a door's factory)."""
    data, where = _read(path)
    reader = _system_reader_name(data)
    if reader is None:
        return Replay.from_json(data, where)
    replayed: SystemReplay = _import(reader, where)(data, where)
    return replayed


def _read(path: str | os.PathLike[str]) -> tuple[object, str]:
    fix = "pass a replay file a failing run saved under .harness/failures/"
    if isinstance(path, str) and path.lstrip().startswith("{"):
        return parse_json(path, what="the replay JSON", fix=fix), "the replay JSON"
    where = f"replay file {shown(os.fspath(path))}"
    try:
        text = Path(path).read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ConfigError(f"cannot read {where}: {reason}; {fix}") from None
    return parse_json(text, what=where, fix=fix), where


def _system_reader_name(data: object) -> str | None:
    """The reader a system's replay file names (or its version key implies), else None."""
    if not isinstance(data, Mapping):
        return None
    named = data.get(SYSTEM_KEY)
    if isinstance(named, str) and "harness_replay" not in data:
        return named
    return next((LEGACY_SYSTEM_READERS[key] for key in LEGACY_SYSTEM_READERS if key in data), None)


def _import(name: str, where: str) -> Any:
    """``module:qualname`` imported (a ``ConfigError`` naming the file when it cannot be)."""
    try:
        found = named_object(name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ConfigError(
            f"{where} names the reader {shown(name)}, which cannot be loaded ({exc}); replay it "
            "with the harness that wrote it"
        ) from None
    if not callable(found):
        raise ConfigError(f"{where} names the reader {shown(name)}, which is not callable")
    return found
