"""Does ``forward`` deliver at-least-once, whatever crashes? (See docs/pytest.md.)"""

import pytest
from processor import forward


@pytest.mark.harness(faults=["crash"])  # crash the processor anywhere, restart it
def test_forward_delivers_at_least_once(harness_explore):
    harness_explore(forward, guarantee="at-least-once")
