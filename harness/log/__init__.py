"""The reference log: DistributedLog's core API with memory and LevelDB storage."""

from harness.log.dlsn import DLSN

__all__ = ["DLSN"]
