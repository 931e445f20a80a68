"""Crash points of an unchanged job's query run, shared by the processes Spark runs it in.

Before each query run of a job (:mod:`harness.spark.streaming.job`) the harness writes a
:class:`Gate` into the run's gate directory (``gate.json``). The code that sees each
micro-batch point reads it: the Kafka source (Spark's source-runner process) as Spark plans a
batch (``before-write``) and as it plans the next one after a commit (``after-commit``); the
``foreachBatch`` wrapper (the driver) and the Kafka sink's ``commit`` after the batch's write
(``after-write``). Those are different processes, so what they must share is kept in files
of the directory: ``last`` (the number of the run's last batch, once the source planned it),
``written`` (one line per batch written in the run) and ``fired`` (the crash that fired, as
JSON). A crash asked for batch ``b`` fires at ``b``, or at the run's last batch when the run
has fewer. ``kill`` gates report ``fired <point> <batch> <rows>`` on the runner's FIFO and
block until the SIGKILL; the others raise :class:`~harness.spark.streaming.runner.InjectedCrash`.
A ``FailTask`` run's gate names a batch one of whose tasks fails once after its work
(:meth:`Gate.task_done`, note ``task-failed``): the Kafka source's read task, or the Kafka
sink's write task after appending its rows (Spark's own Kafka producer's at-least-once
window). This module imports no pyspark.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from harness.faults.streams import CrashPoint
from harness.spark.streaming.runner import InjectedCrash

__all__ = ["GATE_FILE", "Gate", "InjectedTaskFailure"]

GATE_FILE: Final = "gate.json"


class InjectedTaskFailure(InjectedCrash):
    """Raised by one task of a ``FailTask`` run once its work is done (Spark may retry it)."""


@dataclass(frozen=True, slots=True)
class Gate:
    """One query run's crash point; ``directory`` holds the gate and its notes."""

    directory: str
    point: str | None = None
    """A :class:`CrashPoint` value, or None: no crash in this run."""
    batch: int = 0
    kill: bool = False
    signal: str | None = None
    stop_after: int | None = None
    """The source reports no new data once this many batches were planned in the run."""
    task: int | None = None
    """``FailTask``: the batch one of whose tasks fails once (None: no task fails)."""
    task_at: str = "read"
    """Where that task fails, once its work is done: ``read`` (a Kafka source's read task,
    its partition read) or ``write`` (a Kafka sink's write task, its rows appended)."""

    def save(self) -> None:
        Path(self.directory).mkdir(parents=True, exist_ok=True)
        _write(Path(self.directory) / GATE_FILE, json.dumps(asdict(self)))

    @classmethod
    def load(cls, directory: str | None) -> Gate | None:
        if not directory:
            return None
        path = Path(directory) / GATE_FILE
        if not path.exists():
            return None
        return cls(**json.loads(path.read_text(encoding="utf-8")))

    # -- notes ---------------------------------------------------------------------------

    def _note(self, name: str) -> Path:
        return Path(self.directory) / name

    def last(self) -> int | None:
        path = self._note("last")
        return int(path.read_text(encoding="utf-8")) if path.exists() else None

    def fired(self) -> dict[str, Any] | None:
        path = self._note("fired")
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def note_planned(self, batch: int, *, last: bool) -> None:
        if last:
            _write(self._note("last"), str(batch))

    def _hits(self, batch: int, point: CrashPoint) -> bool:
        if self.point != point.value:
            return False
        if batch == self.batch:
            return True
        return batch < self.batch and self.last() == batch

    def task_failed(self) -> dict[str, Any] | None:
        path = self._note("task-failed")
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def note_reading(self, batch: int) -> None:
        """A read task of batch ``batch`` started: the run's current batch (a query runs
        its batches one after the other), which a write task of the same batch reads."""
        _write(self._note("reading"), str(batch))

    # -- the points ----------------------------------------------------------------------

    def task_done(self, at: str, batch: int | None) -> None:
        """A task at ``at`` (``read``, ``write``) did its work in batch ``batch`` (None: the
        batch being read); it raises :class:`InjectedTaskFailure`, once per run, when it is
        the gate's task (of batch :attr:`task`, or of the run's last batch when it has
        fewer). The note ``task-failed`` says which; Spark retries the task or fails."""
        if self.task is None or at != self.task_at:
            return
        if batch is None:
            reading = self._note("reading")
            batch = int(reading.read_text(encoding="utf-8")) if reading.exists() else 0
        if batch != self.task and not (batch < self.task and self.last() == batch):
            return
        try:
            note = os.open(self._note("task-failed"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return  # once per run: the retried attempt does its work
        with os.fdopen(note, "w", encoding="utf-8") as out:
            out.write(json.dumps({"batch": batch, "at": at}))
        raise InjectedTaskFailure(f"injected task failure ({at}) in batch {batch} of this run")

    def before_write(self, batch: int) -> None:
        """The source plans batch ``batch`` of the run (it is in the offset log)."""
        if self._hits(batch, CrashPoint.BEFORE_WRITE):
            self._fire(CrashPoint.BEFORE_WRITE, batch, None)

    def after_commit(self, batch: int) -> None:
        """The checkpoint committed batch ``batch`` of the run; the next is being planned."""
        if self._hits(batch, CrashPoint.AFTER_COMMIT):
            self._fire(CrashPoint.AFTER_COMMIT, batch, None)

    def after_write(self, rows: int | None) -> None:
        """A batch's output is written (``rows`` when known); the checkpoint has not
        committed it."""
        path = self._note("written")
        with path.open("a", encoding="utf-8") as notes:
            notes.write("w\n")
        batch = len(path.read_text(encoding="utf-8").splitlines()) - 1
        if self._hits(batch, CrashPoint.AFTER_WRITE):
            self._fire(CrashPoint.AFTER_WRITE, batch, rows)

    def _fire(self, point: CrashPoint, batch: int, rows: int | None) -> None:
        _write(
            self._note("fired"), json.dumps({"point": point.value, "batch": batch, "rows": rows})
        )
        if self.kill and self.signal is not None:
            with open(self.signal, "w", encoding="utf-8") as fifo:
                fifo.write(f"fired {point.value} {batch} {-1 if rows is None else rows}\n")
            threading.Event().wait()  # until the parent's SIGKILL
        raise InjectedCrash(f"injected crash {point.value} batch {batch} of this run")


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
