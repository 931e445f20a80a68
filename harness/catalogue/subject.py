"""What the catalogue lists: a processor under test with its claim, its expected anomalies and
the faults its bug is known to need; and the scenarios that group them.

A :class:`Subject` is the one description of "a processor the harness must judge": the toys
(:mod:`harness.catalogue.toys`), the seed scenarios (``harness.scenarios``) and the matrix
(:mod:`harness.cli.matrix`) all use it. A correct subject (no ``expected`` anomalies)
must pass every schedule within its ``scope``; a buggy one must be caught, with one of its
``expected`` anomaly kinds, by a search that is *not* told which faults it ``needs``
(``needs`` documents the bug and names the matrix's secondary, narrowed search).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness._shown import shown
from harness._usage import did_you_mean
from harness.check import AnomalyKind, Guarantee
from harness.errors import ConfigError
from harness.faults.kinds import ALL_FAULTS, Fault
from harness.sim.simulator import Processor
from harness.sim.topology import Topology

__all__ = ["Scenario", "Subject"]


@dataclass(frozen=True, slots=True)
class Subject:
    """A processor under test, the guarantee it claims and what the harness must find."""

    name: str
    processor: Processor
    guarantee: Guarantee
    topology: Topology = field(default_factory=Topology)
    expected: frozenset[AnomalyKind] = frozenset()
    """The anomaly kinds its bug shows as (at least one must be reported; which ones depends
    on the schedule found). Empty for a correct subject."""
    needs: frozenset[Fault] = frozenset()
    """For a buggy subject, the faults its bug is known to need (documentation, and the
    matrix's narrowed search); a search with default faults must find it without them."""
    scope: frozenset[Fault] = ALL_FAULTS
    """The faults the claim is made under (default: every fault); a correct subject must pass
    every schedule drawn from them."""
    twin: str | None = None
    """For a buggy subject, the name of its correct twin in the same catalogue."""

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigError(f"a catalogue subject needs a name, got {self.name!r}")
        if not callable(self.processor):
            raise ConfigError(
                f"subject {self.name!r}: processor {self.processor!r} is not callable"
            )
        if self.expected and not self.needs <= self.scope:
            raise ConfigError(
                f"subject {self.name!r} needs {sorted(f.value for f in self.needs - self.scope)},"
                " which its scope excludes; widen scope or drop them from needs"
            )

    @property
    def correct(self) -> bool:
        return not self.expected

    @property
    def story(self) -> str:
        """The first paragraph of the processor's docstring."""
        doc = (self.processor.__doc__ or "").strip()
        return " ".join(doc.split("\n\n")[0].split())


@dataclass(frozen=True, slots=True)
class Scenario:
    """A situation from a seed document: subjects that share a guarantee and a world."""

    name: str
    title: str
    seed: str
    """The seed document it comes from (a file name in ``shared/seeds``)."""
    variants: tuple[Subject, ...]

    def __post_init__(self) -> None:
        if not self.variants:
            raise ConfigError(f"scenario {self.name!r} has no variants")
        names = [v.name for v in self.variants]
        if len(set(names)) != len(names):
            raise ConfigError(f"scenario {self.name!r} has duplicate variant names: {names}")
        first = self.variants[0]
        if any(
            (v.guarantee, v.topology) != (first.guarantee, first.topology) for v in self.variants
        ):
            raise ConfigError(
                f"scenario {self.name!r}: its variants must share one guarantee and topology"
            )

    @property
    def guarantee(self) -> Guarantee:
        return self.variants[0].guarantee

    @property
    def topology(self) -> Topology:
        return self.variants[0].topology

    def variant(self, name: str) -> Subject:
        for variant in self.variants:
            if variant.name == name:
                return variant
        names = [v.name for v in self.variants]
        raise ConfigError(
            f"scenario {self.name!r} has no variant {shown(name)}{did_you_mean(name, names)}; "
            f"its variants are {', '.join(names)}"
        )
