"""The built-in Structured Streaming variants as catalogue subjects: ``STREAM_SUBJECTS``.

The harness's own four streaming queries (``harness.spark.streaming.runner.Variant``: the
dlog source into a Parquet sink, an appending and an idempotent ``foreachBatch``, a stateful
count) are systems under test like an unchanged job: ``python -m harness spark-job
variant:NAME`` searches one through the same door (the engine's loop over a
``VariantSystem``, its progress, ``--json``, exit codes and replay files). Each
:class:`StreamSubject` names the variant, the guarantee it claims (the door's default
``--guarantee``: a catalogue subject names its own claim, as a scenario does) and what a
search under a stronger claim must find. The catalogue sits below Spark in the layers, so
the variants are named here as data; ``harness.spark.streaming.variantsearch`` maps a name
to its ``Variant``. ``docs/streaming.md`` gives the verdicts and how they were measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from harness._shown import shown
from harness._usage import did_you_mean
from harness.check import AnomalyKind, Guarantee
from harness.errors import ConfigError

__all__ = ["STREAM_SUBJECTS", "VARIANT_PREFIX", "StreamSubject", "stream_subject"]

VARIANT_PREFIX: Final = "variant:"
"""How a door and a replay file name a built-in variant: ``variant:parquet``."""


@dataclass(frozen=True, slots=True)
class StreamSubject:
    """A built-in streaming variant under test: its ``name`` (a ``Variant`` value), the
    ``guarantee`` it claims (it holds it: the variants are correct at their claim) and, per
    stronger guarantee, the anomaly kinds a search under it must find (``fails``)."""

    name: str
    guarantee: Guarantee
    story: str
    fails: Mapping[Guarantee, frozenset[AnomalyKind]] = field(
        default_factory=lambda: MappingProxyType({})
    )

    @property
    def target(self) -> str:
        """The name the door takes: ``variant:<name>``."""
        return f"{VARIANT_PREFIX}{self.name}"

    def expected(self, guarantee: Guarantee) -> frozenset[AnomalyKind]:
        """The anomaly kinds a search under ``guarantee`` must find (empty: it must hold)."""
        return self.fails.get(guarantee, frozenset())


STREAM_SUBJECTS: Final = (
    StreamSubject(
        "parquet",
        Guarantee.EXACTLY_ONCE,
        "Parquet file sink with a checkpoint, read back through its _spark_metadata log.",
    ),
    StreamSubject(
        "foreach-batch-append",
        Guarantee.AT_LEAST_ONCE,
        "foreachBatch appending each batch to a file, ignoring the batch id: a batch run "
        "again after a crash after the write writes its rows again.",
        MappingProxyType({Guarantee.EXACTLY_ONCE: frozenset({AnomalyKind.DUPLICATE})}),
    ),
    StreamSubject(
        "foreach-batch-idempotent",
        Guarantee.EXACTLY_ONCE,
        "foreachBatch writing each batch to batch-<id> (a replay overwrites it).",
    ),
    StreamSubject(
        "stateful-count",
        Guarantee.EXACTLY_ONCE,
        "groupBy(key).count() in update mode, each batch's counts written per batch id.",
    ),
)
"""The four built-in variants, in the order the docs list them."""


def stream_subject(target: str) -> StreamSubject:
    """The subject ``variant:NAME`` (or ``NAME``) names; a :class:`ConfigError` naming the
    known ones, and the one probably meant, for any other."""
    name = target.removeprefix(VARIANT_PREFIX)
    for subject in STREAM_SUBJECTS:
        if subject.name == name:
            return subject
    names = [subject.name for subject in STREAM_SUBJECTS]
    raise ConfigError(
        f"unknown built-in streaming variant {shown(name)}{did_you_mean(name, names)}; the "
        f"variants are {', '.join(VARIANT_PREFIX + n for n in names)}"
    )
