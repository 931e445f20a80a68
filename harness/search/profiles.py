"""Search budgets by name: how hard ``explore`` looks before it says a processor holds.

One vocabulary for every front door (the CLI's ``--profile``, the pytest plugin's
``--harness-profile``, the scenario matrix): ``dev`` is quick feedback while editing, ``ci``
is what a merge gate runs, ``nightly`` is the long soak. ``HARNESS_PROFILE`` picks the default.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final

from harness._budget import DEFAULT_RUN_BUDGET, RunBudget
from harness._shown import shown
from harness._usage import did_you_mean
from harness.errors import ConfigError

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "profile"]


@dataclass(frozen=True, slots=True)
class Profile:
    """A named search budget."""

    name: str
    max_examples: int
    """Schedules drawn per exploration (before shrinking)."""
    max_steps: int
    """The longest schedule drawn."""
    description: str
    detect_seeds: int = 1
    """Searches (each with its own seed) per buggy variant in the scenario matrix, whose
    median time to detect it reports."""
    run_budget: RunBudget = DEFAULT_RUN_BUDGET
    """What one simulated run may spend (calls, seconds) before it ends UNKNOWN."""


PROFILES: Final = {
    p.name: p
    for p in (
        Profile("dev", 300, 30, "quick feedback while editing (about a second per processor)", 1),
        Profile("ci", 1000, 30, "a merge gate: the default", 3),
        Profile("nightly", 10000, 60, "a long soak: ten times the schedules, twice as long", 20),
    )
}

DEFAULT_PROFILE: Final = "ci"


def profile(name: str | Profile | None = None) -> Profile:
    """The profile called ``name`` (default: ``$HARNESS_PROFILE``, else ``ci``)."""
    if isinstance(name, Profile):
        return name
    if name is None:
        name = os.environ.get("HARNESS_PROFILE") or DEFAULT_PROFILE
    try:
        return PROFILES[name]
    except KeyError:
        raise ConfigError(
            f"unknown harness profile {shown(name)}{did_you_mean(str(name), PROFILES)}; choose "
            f"one of {', '.join(PROFILES)}"
        ) from None
