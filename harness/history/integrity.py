"""Checksums of history files: what the writers record and the readers check.

A damaged history must never read as a different history (a checker would judge events that
never happened), so every file the writers produce carries a SHA-256 of what it holds, and
the readers recompute it from what they decoded:

* **JSONL** (schema version 2 on): the last line is ``{"checksum":{"sha256":"<hex>"}}``, the
  SHA-256 of the UTF-8 bytes of every line before it, each ended by ``"\\n"`` whatever line
  ending the file uses (so a checkout that turns ``"\\n"`` into ``"\\r\\n"`` stays valid). A
  version-2 file without that line is refused: it was cut short.
* **Parquet**: the key-value metadata key :data:`CHECKSUM_KEY` holds
  ``{"algorithm":"sha256-columns","header":"<hex>","row_groups":["<hex>", ...]}``: the
  SHA-256 of the header's bytes (the :data:`~harness.history.io.PARQUET_METADATA_KEY` value)
  and, per row group, :func:`row_group_digest` of its decoded columns. Metadata only: the
  columns, and Spark's reading of them, are unchanged.

Files without a checksum (version-1 JSONL, Parquet written by Spark or another tool) are read
*unverified* unless the reader is asked to require one (:data:`ChecksumPolicy`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, Final, Literal

from harness.errors import ConfigError, CorruptData
from harness.history.events import EVENT_FIELDS, INT_FIELDS

__all__ = [
    "CHECKSUM_KEY",
    "CHECKSUM_POLICIES",
    "PARQUET_ALGORITHM",
    "ChecksumPolicy",
    "JsonlDigest",
    "TRAILER_KEY",
    "check_jsonl_trailer",
    "checked_policy",
    "damaged",
    "jsonl_trailer",
    "parquet_checksum",
    "read_parquet_checksum",
    "row_group_digest",
    "unreadable",
    "unverified",
]

ChecksumPolicy = Literal["verify", "require", "ignore"]
"""What a reader does with checksums: ``"verify"`` (the default) checks a file's checksum and
reads a file without one unverified; ``"require"`` also refuses a file without one;
``"ignore"`` checks nothing (to read a damaged or hand-edited file deliberately)."""

CHECKSUM_POLICIES: Final = ("verify", "require", "ignore")
CHECKSUM_KEY: Final = b"harness.history.checksum"
"""Key of the checksum JSON in the key-value metadata of a history Parquet file."""
PARQUET_ALGORITHM: Final = "sha256-columns"
TRAILER_KEY: Final = "checksum"
"""The one key of a JSONL history's last line."""
_HEX: Final = re.compile("[0-9a-f]{64}")
_INT_NAMES: Final = frozenset({"index", *INT_FIELDS})
_RESTORE: Final = "restore it from a backup or write it again from its source"
_TO_DO: Final = (
    f"{_RESTORE}; to read it anyway (after editing it by hand, say), pass checksum='ignore' "
    "to read_history (or check_parquet), and write_history gives it a new checksum"
)


def checked_policy(checksum: object) -> ChecksumPolicy:
    """``checksum`` if it is one of :data:`CHECKSUM_POLICIES`, else :class:`ConfigError`."""
    if checksum == "verify" or checksum == "require" or checksum == "ignore":
        return checksum
    raise ConfigError(
        f"checksum must be one of {', '.join(map(repr, CHECKSUM_POLICIES))}, got "
        f"{str(checksum)[:60]!r}"
    )


def damaged(source: str, what: str) -> CorruptData:
    """The error of a history whose checksum does not match what it holds."""
    return CorruptData(f"{source}: {what}: the file is damaged; {_TO_DO}")


def unreadable(source: str, what: str) -> CorruptData:
    """The error of a history file whose bytes cannot be decoded at all."""
    return CorruptData(f"{source}: {what}: the file is damaged or not a history; {_RESTORE}")


def unverified(source: str) -> CorruptData:
    """The error of ``checksum="require"`` on a file without a checksum."""
    return CorruptData(
        f"{source}: the history carries no checksum (written by schema version 1, by hand or "
        "by another tool), so damage to it cannot be told from data, and checksum='require' "
        "refuses it; write it again with write_history to give it one, or read it with "
        "checksum='verify' to accept it unverified"
    )


class JsonlDigest:
    """The running SHA-256 of a JSONL history's lines (see the module docstring)."""

    __slots__ = ("_digest",)

    def __init__(self) -> None:
        self._digest = hashlib.sha256()

    def add(self, line: bytes) -> None:
        """Add one line as read or written (its ending, if any, normalized to ``"\\n"``)."""
        if line.endswith(b"\r\n"):
            line = line[:-2] + b"\n"
        elif not line.endswith(b"\n"):
            line += b"\n"
        self._digest.update(line)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def jsonl_trailer(digest: JsonlDigest) -> str:
    """The last line of a JSONL history whose lines ``digest`` has seen."""
    return f'{{"{TRAILER_KEY}":{{"sha256":"{digest.hexdigest()}"}}}}\n'


def check_jsonl_trailer(value: object, digest: JsonlDigest, where: str, source: str) -> None:
    """Check the value of a trailer line's ``"checksum"`` key against ``digest``."""
    stored = value.get("sha256") if isinstance(value, dict) else None
    if not isinstance(value, dict) or set(value) != {"sha256"} or not isinstance(stored, str):
        raise damaged(where, 'the checksum line is not {"checksum":{"sha256":"<64 hex>"}}')
    actual = digest.hexdigest()
    if stored != actual:
        raise damaged(
            source,
            f"its lines hash to SHA-256 {actual[:16]}..., but its checksum line says "
            f"{stored[:16]}...",
        )


def row_group_digest(pa: Any, pc: Any, batches: Sequence[Any]) -> str:
    """SHA-256 of the decoded columns of one row group (Arrow record batches, in order).

    Each column of :data:`EVENT_FIELDS` is three streams, each hashed on its own (so batch
    boundaries do not matter): one byte per row (1 valid, 0 null); the values, int64
    little-endian for the integer columns (0 for a null), or for the string columns the int32
    little-endian UTF-8 length of each value (0 for a null); and the string columns' UTF-8
    bytes, back to back (empty for integer columns). The digest is the SHA-256 of the 45
    streams' SHA-256 digests, column by column in :data:`EVENT_FIELDS` order, streams in that
    order. Every step runs in
    Arrow's C++ kernels and hashlib: it costs a few per cent of decoding the rows into events.
    """
    # (column, stream) -> digest: validity, values (or lengths), string bytes
    digests = {(name, part): hashlib.sha256() for name in EVENT_FIELDS for part in range(3)}
    for batch in batches:
        for name in EVENT_FIELDS:
            column = batch.column(name)
            _feed(digests[name, 0], pc.cast(pc.is_valid(column), pa.int8()), 1)
            if name in _INT_NAMES:
                _feed(digests[name, 1], pc.fill_null(pc.cast(column, pa.int64()), 0), 8)
                continue
            text = pc.cast(column, pa.string())
            _feed(digests[name, 1], pc.fill_null(pc.binary_length(text), 0), 4)
            offsets, data = text.buffers()[1:3]
            if data is not None and len(text):
                ends = memoryview(offsets).cast("i")
                start, end = ends[text.offset], ends[text.offset + len(text)]
                digests[name, 2].update(memoryview(data)[start:end])
    combined = hashlib.sha256()
    for digest in digests.values():
        combined.update(digest.digest())
    return combined.hexdigest()


def _feed(digest: Any, array: Any, width: int) -> None:
    """Hash the values of a fixed-width ``array`` (its validity aside), ``width`` bytes each."""
    if len(array):
        values = memoryview(array.buffers()[1])
        digest.update(values[array.offset * width : (array.offset + len(array)) * width])


def parquet_checksum(header: bytes, row_groups: Sequence[str]) -> bytes:
    """The :data:`CHECKSUM_KEY` value of a file with ``header`` and these row-group digests."""
    value = {
        "algorithm": PARQUET_ALGORITHM,
        "header": hashlib.sha256(header).hexdigest(),
        "row_groups": list(row_groups),
    }
    return json.dumps(value, separators=(",", ":")).encode("ascii")


def read_parquet_checksum(
    metadata: dict[bytes, bytes], header: bytes, groups: int, source: str
) -> list[str] | None:
    """The row-group digests the checksum of a Parquet file's ``metadata`` expects, after
    checking the header's; ``None`` when the file carries no checksum."""
    raw = metadata.get(CHECKSUM_KEY)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        value = None
    digests = value.get("row_groups") if isinstance(value, dict) else None
    if (
        not isinstance(value, dict)
        or set(value) != {"algorithm", "header", "row_groups"}
        or value["algorithm"] != PARQUET_ALGORITHM
        or not isinstance(value["header"], str)
        or not isinstance(digests, list)
        or not all(isinstance(d, str) and _HEX.fullmatch(d) for d in digests)
    ):
        raise damaged(source, f"its {CHECKSUM_KEY.decode()} metadata is not a checksum")
    if hashlib.sha256(header).hexdigest() != value["header"]:
        raise damaged(source, "its header does not match its checksum")
    if len(digests) != groups:
        raise damaged(
            source, f"it has {groups} row group(s), but its checksum lists {len(digests)}"
        )
    return digests
