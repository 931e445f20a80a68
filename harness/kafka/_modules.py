"""The module objects put in ``sys.modules`` for a run: ``confluent_kafka``, ``kafka`` and
``aiokafka``, and the guard that turns an import of anything else of theirs into one
:class:`NotModelled` line naming it and what is modelled (never a bare ``ImportError``)."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any, Final

from harness.kafka._errors import NotModelled

__all__ = ["double_modules"]

_CACHE: dict[str, types.ModuleType] = {}
_DOC: Final = "The harness's in-process double of {name} (see harness.kafka)."
_CLIENTS: Final = ("confluent_kafka", "kafka", "aiokafka")


def _module(name: str, source: object, names: Sequence[str]) -> types.ModuleType:
    module = types.ModuleType(name, _DOC.format(name=name))
    for attr in names:
        setattr(module, attr, getattr(source, attr))
    module.__all__ = list(names)  # type: ignore[attr-defined]
    return module


_HINTS: Final = {
    "confluent_kafka.schema_registry": "Schema Registry serializers (Avro, JSON Schema, "
    "Protobuf) have no in-process registry here",
    "confluent_kafka.avro": "the legacy Avro clients need a Schema Registry, not modelled here",
}


def _modelled(name: str) -> str:
    top = name.partition(".")[0]
    names = sorted(n for n in _CACHE if n == top or n.startswith(top + "."))
    hint = next((h for m, h in _HINTS.items() if name == m or name.startswith(m + ".")), "")
    return (f"{hint}; " if hint else "") + f"the modelled modules of {top} are {', '.join(names)}"


def _missing(module: types.ModuleType) -> Callable[[str], Any]:
    """A module ``__getattr__``: a public name the double lacks is not modelled."""

    def __getattr__(name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        public = sorted(
            k
            for k, v in vars(module).items()
            if not k.startswith("_") and not isinstance(v, types.ModuleType)
        )
        raise NotModelled(
            f"{module.__name__}.{name}", f"{module.__name__} has {', '.join(public) or 'nothing'}"
        )

    return __getattr__


class _Guard(importlib.abc.MetaPathFinder):
    """While a run's doubles are in ``sys.modules``: an import of another module of a client
    package raises :class:`NotModelled` (the application is told once, at startup, instead
    of crashing on a ``ModuleNotFoundError`` that looks like a broken install)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top not in _CLIENTS or fullname in _CACHE:
            return None
        if sys.modules.get(top) is not _CACHE.get(top):
            return None  # not during a run: the real package, if installed, is imported
        raise NotModelled(f"import {fullname}", _modelled(fullname))


_GUARD: Final = _Guard()


_ERRORS: Final = (
    "ConsumeError", "ProduceError", "KeyDeserializationError", "ValueDeserializationError",
    "KeySerializationError", "ValueSerializationError",
)  # fmt: skip
_TOP_ADMIN: Final = (
    "TopicCollection",
    "TopicPartitionInfo",
    "Node",
    "ConsumerGroupTopicPartitions",
)


def _confluent() -> dict[str, types.ModuleType]:
    from harness.kafka import admin, confluent, confluent_aio, serializing

    ck = _module("confluent_kafka", confluent, list(confluent.__all__))
    for name in ("SerializingProducer", "DeserializingConsumer"):
        setattr(ck, name, getattr(serializing, name))
    for name in _TOP_ADMIN:
        setattr(ck, name, getattr(admin, name))
    ck.__all__ += ["SerializingProducer", "DeserializingConsumer", *_TOP_ADMIN]  # type: ignore[attr-defined]
    ck.__path__ = []  # a package: its submodules import
    error = _module("confluent_kafka.error", confluent, ["KafkaError", "KafkaException"])
    for name in (*_ERRORS, "SerializationError"):
        setattr(error, name, getattr(serializing, name))
    serialization = _module(
        "confluent_kafka.serialization",
        serializing,
        [
            n
            for n in serializing.__all__
            if n not in (*_ERRORS, "SerializingProducer", "DeserializingConsumer")
        ],
    )
    return {
        "confluent_kafka": ck,
        "confluent_kafka.error": error,
        "confluent_kafka.admin": _module("confluent_kafka.admin", admin, admin.__all__),
        "confluent_kafka.serialization": serialization,
        "confluent_kafka.aio": _module("confluent_kafka.aio", confluent_aio, confluent_aio.__all__),
    }


def _kafka_python() -> dict[str, types.ModuleType]:
    from harness.kafka import kafka_python, kafka_python_admin

    found = kafka_python.modules()
    found.update(kafka_python_admin.modules())
    for error in kafka_python_admin.ERRORS:
        setattr(found["kafka.errors"], error.__name__, error)
    found["kafka"].KafkaAdminClient = kafka_python_admin.KafkaAdminClient  # type: ignore[attr-defined]
    return found


def double_modules() -> dict[str, types.ModuleType]:
    """``{module name: double}`` for every client module an application may import."""
    if _CACHE:
        return _CACHE
    from harness.kafka import aio, aio_admin

    _CACHE.update(_confluent())
    _CACHE.update(_kafka_python())
    _CACHE.update(aio.modules())
    _CACHE.update(aio_admin.modules())
    for name, module in _CACHE.items():
        parent, _, child = name.rpartition(".")
        if parent in _CACHE:
            setattr(_CACHE[parent], child, module)
        module.__getattr__ = _missing(module)  # type: ignore[method-assign]
    if _GUARD not in sys.meta_path:
        sys.meta_path.insert(0, _GUARD)
    return _CACHE
