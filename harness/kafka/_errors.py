"""Errors of the Kafka doubles that are the harness's, not the client's."""

from __future__ import annotations

from harness.errors import ConfigError

__all__ = ["NotModelled", "OutsideRun"]


class NotModelled(ConfigError):
    """A client call (or setting) whose semantics the doubles do not model: the run stops
    rather than approximate. The message names the call."""

    def __init__(self, call: str, why: str = "") -> None:
        detail = f": {why}" if why else ""
        super().__init__(
            f"{call} is not modelled by the harness's Kafka doubles{detail}; the run stops "
            "rather than guess (see docs/kafka.md for what is modelled)"
        )
        self.call = call


class OutsideRun(ConfigError):
    """A double was used outside a harness run (there is no simulated cluster to talk to)."""
