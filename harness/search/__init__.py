"""How hard and where a search looks: named budgets (:mod:`harness.search.profiles`).

Light to import (no Hypothesis, no simulator): the pytest plugin and the CLI read the
profiles before any engine module loads.
"""

from harness.search.profiles import DEFAULT_PROFILE, PROFILES, Profile, profile

__all__ = ["DEFAULT_PROFILE", "PROFILES", "Profile", "profile"]
