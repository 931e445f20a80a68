"""Every error the harness raises, rooted in one :class:`HarnessError`.

The log errors keep DistributedLog's names (without the ``Exception`` suffix)
and its numeric codes, so a user who knows DistributedLog recognises them, and
``except HarnessError`` catches everything the harness itself decided to raise.
Messages name the bad value (through :func:`harness._shown.shown`, so that a huge or hostile
value is shown cut short) and say what to do about it.
"""

from __future__ import annotations

__all__ = [
    "AlreadyClosed",
    "AlreadyTruncatedTransaction",
    "BrokenPromise",
    "ConfigError",
    "CorruptData",
    "DLException",
    "EndOfStream",
    "Fenced",
    "HarnessError",
    "InvalidDLSN",
    "InvalidStreamName",
    "LockingException",
    "LogEmpty",
    "LogExists",
    "LogNotFound",
    "LogReadException",
    "LogRecordTooLong",
    "MissingDependency",
    "OwnershipAcquireFailed",
    "StorageFailed",
    "StoreLocked",
    "TransactionIdOutOfOrder",
    "UnsupportedURI",
    "WriteCancelled",
    "WriteException",
]


class HarnessError(Exception):
    """Root of every error raised on purpose by the harness."""


class ConfigError(HarnessError, ValueError):
    """An argument or configuration value is invalid; the message names it and the fix."""


class UnsupportedURI(ConfigError):
    """A namespace URI whose scheme or shape the harness does not support."""


class InvalidDLSN(HarnessError, ValueError):
    """Bytes or text that do not decode to a DLSN (DistributedLog's IllegalArgumentException)."""


class CorruptData(HarnessError):
    """Stored bytes that cannot be decoded; the message names the store and the key."""


class DLException(HarnessError):
    """Base of the errors that mirror DistributedLog's ``DLException`` hierarchy.

    ``code`` is DistributedLog's numeric status code for the same condition.
    """

    code: int = 600


class AlreadyClosed(DLException):
    """The namespace, manager, writer, reader or store was closed; open a new one."""

    code = 502


class AlreadyTruncatedTransaction(DLException):
    """A reader was positioned inside data that truncation removed."""

    code = 511


class EndOfStream(DLException):
    """The log is sealed by ``mark_end_of_stream``: no writes after it, reads stop at it."""

    code = 512


class InvalidStreamName(DLException, ValueError):
    """A log name DistributedLog would reject (the message says why)."""

    code = 602


class LockingException(DLException):
    """A lock could not be taken (base of the ownership and LevelDB lock errors)."""

    code = 504


class OwnershipAcquireFailed(LockingException):
    """Another writer (in this process or another one) owns the log."""

    code = 302


class StorageFailed(HarnessError):
    """The storage under a log or offset store failed (an I/O error, a full disk); the
    message names the directory and what LevelDB or the file system said."""


class StoreLocked(LockingException):
    """A LevelDB directory is held open by another process (LevelDB allows one process)."""


class Fenced(LockingException):
    """A write by an instance that lost its ownership: a zombie after a takeover."""


class LogEmpty(DLException):
    """The log exists but holds no committed record."""

    code = 509


class LogExists(DLException):
    """The log already exists (kept for DistributedLog parity; create_log is idempotent)."""

    code = 522


class LogNotFound(DLException):
    """The log does not exist (or was deleted)."""

    code = 510


class LogReadException(DLException):
    """A reader failed for a reason other than corruption (e.g. the log was deleted)."""

    code = 1001


class LogRecordTooLong(DLException, ValueError):
    """A payload above the 1,040,364-byte limit."""

    code = 413


class TransactionIdOutOfOrder(DLException):
    """A txid is negative, reserved, or smaller than the last one written.

    ``txid`` is the rejected id; ``last_txid`` the one it was compared with
    (-999 when there was none, as in DistributedLog).
    """

    code = 513

    def __init__(self, message: str, *, txid: int, last_txid: int = -999) -> None:
        super().__init__(message)
        self.txid = txid
        self.last_txid = last_txid


class WriteException(DLException):
    """A writer failed, or was failed earlier (writer errors are sticky)."""

    code = 514


class WriteCancelled(DLException):
    """A buffered write was cancelled because an earlier one failed."""

    code = 516


class BrokenPromise(HarnessError, AssertionError):
    """A component under one of the harness's conformance suites broke a promise.

    ``checks`` names the failed check(s); the message says what differed. An
    ``AssertionError`` too, so that pytest reports it as a failed assertion.
    """

    def __init__(self, message: str, *, checks: tuple[str, ...]) -> None:
        super().__init__(message)
        self.checks = checks


class MissingDependency(HarnessError, ImportError):
    """An optional package a feature needs is not installed; the message names the pip command."""
