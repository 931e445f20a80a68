"""A held-out practice: ten buggy processors with fixed twins, written against the public API
only, as different engineers would write them, and kept out of the search's tuning loop.

``HELDOUT`` lists them as catalogue subjects (``harness.Subject``); ``measure.py`` runs
``explore()`` with default arguments on three seeds each.
"""

from heldout.processors import HELDOUT

__all__ = ["HELDOUT"]
