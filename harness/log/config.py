"""Configuration of a namespace and, through overrides, of one log."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, final

from harness._shown import shown
from harness.errors import ConfigError

__all__ = ["LogConfig", "TxidCheck"]


class TxidCheck(enum.Enum):
    """When the writer enforces non-decreasing transaction ids.

    ``EVERY_RECORD`` is what DistributedLog's documentation promises (and the
    default here): every record's txid must be >= the previous one.
    ``SEGMENT_START`` is what its code does: only the first txid of a new log
    segment is compared with the stored maximum; a decrease inside a segment is
    accepted. Either way negative txids and ``MAX_TXID`` are rejected.
    """

    EVERY_RECORD = "every-record"
    SEGMENT_START = "segment-start"


@final
@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of a log. Every field is validated when the config is built.

    - ``segment_max_records`` / ``segment_max_bytes``: a log segment is completed and a
      new one started (before the next write) once it holds this many user records or
      payload bytes, so DLSNs cross segments.
    - ``output_buffer_size``: buffered records are transmitted as one entry once they
      exceed this many bytes (DistributedLog's ``writerOutputBufferSize``; 0 means one
      entry per record). Transmitted is not visible: only ``commit`` makes records visible.
      DistributedLog's default is 1024, sized for BookKeeper packets; here each entry is
      one LevelDB value, and 8 KiB entries append about twice as fast. Set 1024 to get
      DistributedLog's entry boundaries (and so its DLSNs) exactly.
    - ``max_id_sanity_check`` and ``txid_check``: see :class:`TxidCheck`.
    - ``durable_commit``: on LevelDB, ``commit`` is an fsynced write (survives a machine
      crash); when False it survives a process crash only.
    - ``create_stream_if_not_exists``: opening a writer creates a missing log.
    - ``first_segment_sequence_number``: the segment number of the first DLSN (1).
    """

    segment_max_records: int = 10_000
    segment_max_bytes: int = 256 * 1024 * 1024
    output_buffer_size: int = 8192
    max_id_sanity_check: bool = True
    txid_check: TxidCheck = TxidCheck.EVERY_RECORD
    durable_commit: bool = True
    create_stream_if_not_exists: bool = True
    first_segment_sequence_number: int = 1

    def __post_init__(self) -> None:
        for name in ("segment_max_records", "segment_max_bytes", "first_segment_sequence_number"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ConfigError(f"LogConfig.{name} must be an int >= 1, got {shown(value)}")
        if type(self.output_buffer_size) is not int or self.output_buffer_size < 0:
            raise ConfigError(
                "LogConfig.output_buffer_size must be an int >= 0, got "
                f"{shown(self.output_buffer_size)}"
            )
        for name in ("max_id_sanity_check", "durable_commit", "create_stream_if_not_exists"):
            value = getattr(self, name)
            if type(value) is not bool:
                raise ConfigError(f"LogConfig.{name} must be True or False, got {shown(value)}")
        txid_check: object = self.txid_check
        if not isinstance(txid_check, TxidCheck):
            try:  # a string value such as "segment-start" is accepted too
                object.__setattr__(self, "txid_check", TxidCheck(txid_check))
            except ValueError:
                choices = ", ".join(repr(c.value) for c in TxidCheck)
                raise ConfigError(
                    f"LogConfig.txid_check must be one of {choices}, got {shown(self.txid_check)}"
                ) from None

    def with_overrides(self, overrides: dict[str, Any]) -> LogConfig:
        """A copy with ``overrides`` applied; an unknown key raises :class:`ConfigError`."""
        known = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ConfigError(
                f"unknown log configuration key(s) {', '.join(map(repr, unknown))}; "
                f"valid keys are {', '.join(sorted(known))}"
            )
        return dataclasses.replace(self, **overrides)
