"""A property-based correctness harness for at-least-once and exactly-once stream processing."""

from harness.errors import HarnessError
from harness.log import DLSN

__all__ = ["DLSN", "HarnessError"]
