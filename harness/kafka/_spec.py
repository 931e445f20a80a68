"""A :class:`~harness.kafka.KafkaApp` as plain data, for replay files: what the application is,
its topics, arguments and environment, how its inputs look and its effects are read.

The engine writes :meth:`KafkaApp.replay_spec` into a failure's replay file and, to replay it,
calls :func:`from_spec` on it (named in the file, so the engine imports no door). The
environment kept is the variables given with ``env=`` and those the application read during
the run (their values then), so a replay sees what the run saw; mind that a replay file then
holds those values.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from harness._shown import shown
from harness.effects.sources import effect_from_json, load_named
from harness.errors import ConfigError
from harness.kafka._broker import json_values, text_values
from harness.kafka.payloads import Payloads

if TYPE_CHECKING:
    from harness.kafka.app import KafkaApp

__all__ = ["FACTORY", "from_spec", "to_spec"]

FACTORY: Final = "harness.kafka._spec:from_spec"


def _importable(function: Callable[..., Any] | None) -> str | None:
    """``module:qualname`` of a module-level function that can be imported again."""
    if function is None:
        return None
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", "")
    if not module or module == "__main__" or "<" in qualname:
        return None
    return f"{module}:{qualname}"


def _encoder(encode: Any) -> dict[str, Any] | None:
    if encode is json_values:
        return {"kind": "json"}
    if encode is text_values:
        return {"kind": "text"}
    if isinstance(encode, Payloads):
        return {"kind": "payloads", **encode.to_json()}
    name = _importable(encode)
    return None if name is None else {"kind": "function", "name": name}


def to_spec(app: KafkaApp, env_read: set[str]) -> dict[str, Any] | None:
    """``app`` as JSON-able data; None when a part of it cannot be named again (a lineage or
    encoder function that is not importable, a lambda)."""
    wiring = app.wiring
    encode = _encoder(wiring.encode)
    lineage = _importable(wiring.lineage)
    if encode is None or (wiring.lineage is not None and lineage is None):
        return None
    target = app._target
    if target.module.startswith("_harness_app_") or target.module == "__main__":
        where = target.file if target.attribute is None else f"{target.file}:{target.attribute}"
    else:
        where = f"{target.module}:{target.attribute}"
    env = {name: os.environ[name] for name in sorted(env_read) if name in os.environ}
    env.update(app.env)
    return {
        "target": where,
        "name": app.__qualname__,
        "inputs": list(wiring.inputs),
        "outputs": list(wiring.outputs),
        "unchecked": list(wiring.unchecked),
        "partitions": wiring.partitions,
        "argv": list(app.app_args),
        "env": env,
        "group": wiring.group,
        "lineage": lineage,
        "encode": encode,
        "effects": [source.to_json() for source in wiring.effects],
        "backlog_owed": wiring.backlog_owed,
        **({"transactional_input": True} if app.topology.transactional_input else {}),
    }


def _decoder(data: Mapping[str, Any]) -> Any:
    kind = data.get("kind")
    if kind == "json":
        return json_values
    if kind == "text":
        return text_values
    if kind == "payloads":
        return Payloads.from_json(data)
    if kind == "function" and isinstance(data.get("name"), str):
        return load_named(data["name"], "input encoder")
    raise ConfigError(f"unknown input encoding {shown(dict(data))} in the replay file")


def from_spec(data: Mapping[str, Any]) -> KafkaApp:
    """The application :func:`to_spec` described."""
    from harness.kafka.app import KafkaApp

    if not isinstance(data, Mapping):
        raise ConfigError(f"a Kafka application spec is an object, got {shown(data)}")
    try:
        lineage = data.get("lineage")
        return KafkaApp(
            data["target"],
            inputs=data["inputs"],
            outputs=data.get("outputs", ()),
            unchecked=data.get("unchecked", ()),
            partitions=data.get("partitions", 1),
            argv=data.get("argv", ()),
            env=data.get("env") or {},
            group=data.get("group"),
            lineage=None if lineage is None else load_named(lineage, "lineage function"),
            encode=_decoder(data.get("encode") or {"kind": "json"}),
            effects=[effect_from_json(e) for e in data.get("effects", ())],
            backlog_owed=data.get("backlog_owed", True),
            transactional_input=data.get("transactional_input", False),
            name=data.get("name"),
        )
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"bad Kafka application spec in the replay file: {exc!r}") from None
