"""Client configuration: every librdkafka property name, and the values of the properties
whose semantics decide correctness, validated as librdkafka does.

An unknown (or misspelt) property is an error, as in librdkafka (``No such configuration
property``). A property that is known but changes behaviour the doubles do not model raises
:class:`NotModelled`. Every other known property (brokers, timeouts, TLS, ...) is accepted
and has no effect on a simulated run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from harness._usage import close_matches
from harness.kafka._errors import NotModelled

__all__ = ["ClientConfig", "parse_config"]

_GLOBAL: Final = """
builtin.features client.id metadata.broker.list bootstrap.servers message.max.bytes
message.copy.max.bytes receive.message.max.bytes max.in.flight.requests.per.connection
max.in.flight topic.metadata.refresh.interval.ms metadata.max.age.ms
topic.metadata.refresh.fast.interval.ms topic.metadata.refresh.fast.cnt
topic.metadata.refresh.sparse topic.metadata.propagation.max.ms topic.blacklist debug
socket.timeout.ms socket.blocking.max.ms socket.send.buffer.bytes socket.receive.buffer.bytes
socket.keepalive.enable socket.nagle.disable socket.max.fails broker.address.ttl
broker.address.family socket.connection.setup.timeout.ms connections.max.idle.ms
reconnect.backoff.jitter.ms reconnect.backoff.ms reconnect.backoff.max.ms
statistics.interval.ms enabled_events error_cb throttle_cb stats_cb log_cb log_level
log.queue log.thread.name enable.random.seed log.connection.close background_event_cb
socket_cb connect_cb closesocket_cb open_cb resolve_cb opaque default_topic_conf
internal.termination.signal api.version.request api.version.request.timeout.ms
api.version.fallback.ms broker.version.fallback allow.auto.create.topics security.protocol
ssl.cipher.suites ssl.curves.list ssl.sigalgs.list ssl.key.location ssl.key.password
ssl.key.pem ssl_key ssl.certificate.location ssl.certificate.pem ssl_certificate
ssl.ca.location ssl.ca.pem ssl_ca ssl.ca.certificate.stores ssl.crl.location
ssl.keystore.location ssl.keystore.password ssl.providers ssl.engine.location ssl.engine.id
ssl_engine_callback_data enable.ssl.certificate.verification
ssl.endpoint.identification.algorithm ssl.certificate.verify_cb sasl.mechanisms
sasl.mechanism sasl.kerberos.service.name sasl.kerberos.principal sasl.kerberos.kinit.cmd
sasl.kerberos.keytab sasl.kerberos.min.time.before.relogin sasl.username sasl.password
sasl.oauthbearer.config enable.sasl.oauthbearer.unsecure.jwt oauthbearer_token_refresh_cb
sasl.oauthbearer.method sasl.oauthbearer.client.id sasl.oauthbearer.client.secret
sasl.oauthbearer.scope sasl.oauthbearer.extensions sasl.oauthbearer.token.endpoint.url
plugin.library.paths interceptors client.dns.lookup enable.metrics.push client.rack
retry.backoff.ms retry.backoff.max.ms
"""
_CONSUMER: Final = """
group.id group.instance.id partition.assignment.strategy session.timeout.ms
heartbeat.interval.ms group.protocol.type group.protocol group.remote.assignor
coordinator.query.interval.ms max.poll.interval.ms enable.auto.commit auto.commit.interval.ms
enable.auto.offset.store queued.min.messages queued.max.messages.kbytes fetch.wait.max.ms
fetch.queue.backoff.ms fetch.message.max.bytes max.partition.fetch.bytes fetch.max.bytes
fetch.min.bytes fetch.error.backoff.ms offset.store.method isolation.level consume_cb
rebalance_cb offset_commit_cb enable.partition.eof check.crcs auto.commit.enable
auto.offset.reset offset.store.path offset.store.sync.interval.ms
consume.callback.max.messages on_commit
"""
_PRODUCER: Final = """
transactional.id transaction.timeout.ms enable.idempotence enable.gapless.guarantee
queue.buffering.max.messages queue.buffering.max.kbytes queue.buffering.max.ms linger.ms
message.send.max.retries retries queue.buffering.backpressure.threshold compression.codec
compression.type batch.num.messages batch.size delivery.report.only.error dr_cb dr_msg_cb
sticky.partitioning.linger.ms request.required.acks acks request.timeout.ms
message.timeout.ms delivery.timeout.ms queuing.strategy produce.offset.report partitioner
partitioner_cb msg_order_cmp compression.level on_delivery
"""
_PYTHON: Final = "logger oauth_cb default.topic.config"

PROPERTIES: Final = frozenset((_GLOBAL + _CONSUMER + _PRODUCER + _PYTHON).split())
"""Every property name librdkafka (and the Python client on top of it) accepts."""

_RESET: Final = {
    "smallest": "earliest",
    "earliest": "earliest",
    "beginning": "earliest",
    "largest": "latest",
    "latest": "latest",
    "end": "latest",
    "error": "error",
}
_TRUE: Final = frozenset({"true", "1", "t"})
_FALSE: Final = frozenset({"false", "0", "f"})


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """The properties whose semantics the doubles model, with librdkafka's defaults."""

    group_id: str | None = None
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    enable_auto_offset_store: bool = True
    auto_offset_reset: str = "latest"
    """``earliest``, ``latest`` or ``error`` (aliases folded)."""
    isolation_level: str = "read_committed"
    enable_partition_eof: bool = False
    transactional_id: str | None = None
    enable_idempotence: bool = False
    delivery_report_only_error: bool = False
    on_delivery: object = None
    on_commit: object = None


class ConfigProblem(Exception):
    """A bad property: the message is librdkafka's; the caller raises its client error."""


def _bool(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigProblem(
        f'Invalid value "{value}" for configuration property "{name}": expected true or false'
    )


def _int(name: str, value: object, low: int, high: int) -> int:
    try:
        number = int(str(value).strip()) if not isinstance(value, bool) else -1
    except ValueError:
        number = low - 1
    if not low <= number <= high:
        raise ConfigProblem(
            f'Invalid value "{value}" for configuration property "{name}": '
            f"expected an integer in {low}..{high}"
        )
    return number


def _choice(name: str, value: object, choices: Mapping[str, str]) -> str:
    text = str(value).strip()
    if text not in choices:
        raise ConfigProblem(
            f'Invalid value "{value}" for configuration property "{name}": '
            f"expected one of {', '.join(sorted(choices))}"
        )
    return choices[text]


def _unknown(name: str) -> ConfigProblem:
    close = close_matches(name, sorted(PROPERTIES))
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    return ConfigProblem(f'No such configuration property: "{name}"{hint}')


def parse_config(conf: object, kwargs: Mapping[str, object], client: str) -> ClientConfig:
    """Validate ``conf`` (plus keyword properties) like librdkafka; :class:`ConfigProblem`
    for a bad one, :class:`NotModelled` for a known one whose semantics are not modelled."""
    if conf is None:
        conf = {}
    if not isinstance(conf, Mapping):
        raise TypeError(f"expected configuration dict, got {type(conf).__name__}")
    props = {**conf, **kwargs}
    for name in props:
        if not isinstance(name, str) or name not in PROPERTIES:
            raise _unknown(str(name))
    if "default.topic.config" in props:
        nested = props.pop("default.topic.config")
        if not isinstance(nested, Mapping):
            raise ConfigProblem('"default.topic.config" must be a dict')
        for name, value in nested.items():
            if name not in PROPERTIES:
                raise _unknown(str(name))
            props.setdefault(name, value)
    if str(props.get("offset.store.method", "broker")) != "broker":
        raise NotModelled(f"{client}(offset.store.method={props['offset.store.method']!r})")
    values: dict[str, object] = {}
    if "group.id" in props:
        values["group_id"] = str(props["group.id"])
    for alias in ("auto.commit.enable", "enable.auto.commit"):
        if alias in props:
            values["enable_auto_commit"] = _bool(alias, props[alias])
    for name, field in (
        ("enable.auto.offset.store", "enable_auto_offset_store"),
        ("enable.partition.eof", "enable_partition_eof"),
        ("enable.idempotence", "enable_idempotence"),
        ("delivery.report.only.error", "delivery_report_only_error"),
    ):
        if name in props:
            values[field] = _bool(name, props[name])
    if "auto.commit.interval.ms" in props:
        values["auto_commit_interval_ms"] = _int(
            "auto.commit.interval.ms", props["auto.commit.interval.ms"], 0, 86_400_000
        )
    if "auto.offset.reset" in props:
        values["auto_offset_reset"] = _choice(
            "auto.offset.reset", props["auto.offset.reset"], _RESET
        )
    if "isolation.level" in props:
        level = {"read_committed": "read_committed", "read_uncommitted": "read_uncommitted"}
        values["isolation_level"] = _choice("isolation.level", props["isolation.level"], level)
    if props.get("transactional.id") not in (None, ""):
        values["transactional_id"] = str(props["transactional.id"])
        values["enable_idempotence"] = True  # a transactional producer is idempotent
    for name, field in (("on_delivery", "on_delivery"), ("on_commit", "on_commit")):
        if name in props:
            if not callable(props[name]):
                raise ConfigProblem(f'"{name}" must be callable, got {props[name]!r}')
            values[field] = props[name]
    return ClientConfig(**values)  # type: ignore[arg-type]
