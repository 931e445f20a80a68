"""The module objects put in ``sys.modules`` for a run: ``confluent_kafka`` and ``kafka``."""

from __future__ import annotations

import types
from typing import Final

__all__ = ["double_modules"]

_CACHE: dict[str, types.ModuleType] = {}
_DOC: Final = "The harness's in-process double of {name} (see harness.kafka)."


def _module(name: str, source: types.ModuleType, names: list[str]) -> types.ModuleType:
    module = types.ModuleType(name, _DOC.format(name=name))
    for attr in names:
        setattr(module, attr, getattr(source, attr))
    module.__all__ = list(names)  # type: ignore[attr-defined]
    return module


def double_modules() -> dict[str, types.ModuleType]:
    """``{module name: double}`` for every client module an application may import."""
    if _CACHE:
        return _CACHE
    from harness.kafka import confluent

    ck = _module("confluent_kafka", confluent, list(confluent.__all__))
    ck.__path__ = []  # a package: its submodules import
    error = _module("confluent_kafka.error", confluent, ["KafkaError", "KafkaException"])
    ck.error = error  # type: ignore[attr-defined]
    _CACHE.update({"confluent_kafka": ck, "confluent_kafka.error": error})
    try:
        from harness.kafka import kafka_python
    except ImportError:  # pragma: no cover - while kafka-python's double is being written
        return _CACHE
    _CACHE.update(kafka_python.modules())
    return _CACHE
