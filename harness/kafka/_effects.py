"""The Kafka door's side of :mod:`harness.effects`: which run and process is writing, and the
standard streams an application's prints go through while it runs."""

from __future__ import annotations

import io
from typing import Any

import greenlet

from harness.effects import EffectSession, Process
from harness.kafka._broker import _RUNTIMES

__all__ = ["Capture", "lookup"]


def lookup() -> tuple[EffectSession, Process] | None:
    """The effect session and process of the application code running now, if any."""
    rt = _RUNTIMES.get(greenlet.getcurrent())
    if rt is None or rt.broker.effects is None:
        return None
    return rt.broker.effects, rt.inst


class Capture(io.TextIOBase):
    """``sys.stdout`` / ``sys.stderr`` during a run: what the application writes is counted
    by its run's effect session (if it observes that stream) and goes on to ``fallback`` (the
    real stream with ``show_output``, else a buffer kept for error messages)."""

    def __init__(self, name: str, fallback: Any) -> None:
        super().__init__()
        self.name = name
        self.fallback = fallback

    encoding = "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        found = lookup()
        if found is not None:
            found[0].write(self.name, found[1], str(text))  # type: ignore[arg-type]
        self.fallback.write(text)
        return len(text)

    def flush(self) -> None:
        found = lookup()
        if found is not None:
            found[0].flush(self.name, found[1])  # type: ignore[arg-type]
        self.fallback.flush()

    def getvalue(self) -> str:
        """What was written, when the fallback keeps it ('' otherwise)."""
        value = getattr(self.fallback, "getvalue", None)
        return value() if callable(value) else ""
