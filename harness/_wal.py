"""LevelDB's log format (write-ahead logs and manifests): where LevelDB forgives damage.

LevelDB writes its write-ahead logs (``*.log``) and its manifests (``MANIFEST-*``) as blocks
of 32 KiB holding records ``crc32c-masked:4 | length:2 (little-endian) | type:1 | payload``;
the checksum covers the type and the payload, not the length. Its reader reports a record
whose checksum fails, even without ``paranoid_checks`` turning that into a failed open, with
one exception: in the last, partial block of a file, a record whose length runs past the
end of the file is taken for a write torn by a crash and silently dropped, with every
record after it. A crash does leave such a record; but so does one flipped bit in the length
field of any record of that block, and then committed (even synced) records vanish quietly.

:func:`damaged_length` tells the two apart without any record kept outside the file: a torn
record lacks bytes, so its checksum matches none of its shorter prefixes (but by a 2**-32
chance per prefix), whereas a record whose length field was damaged is whole, and its
checksum matches the payload at the length it was written with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["BLOCK_SIZE", "HEADER_SIZE", "crc32c", "damaged_length", "masked_crc"]

BLOCK_SIZE: Final = 32768
"""LevelDB's log block size (``log_format.h``)."""
HEADER_SIZE: Final = 7
"""checksum (4), length (2), type (1)."""
_MASK_DELTA: Final = 0xA282EAD8


def _table() -> tuple[int, ...]:
    entries = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        entries.append(crc)
    return tuple(entries)


_TABLE: Final = _table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``, as LevelDB's ``crc32c::Value``."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc(crc: int) -> int:
    """LevelDB's ``crc32c::Mask``: the form in which a checksum is stored."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def damaged_length(path: Path) -> str | None:
    """Why the log-format file at ``path`` holds a record LevelDB would drop as torn although
    it is whole (its length field is damaged), or ``None`` when it holds none.

    Only the last, partial block is read: everywhere else LevelDB reports a bad length. A file
    that cannot be read is left to LevelDB (``None``).
    """
    try:
        size = path.stat().st_size
        start = size - size % BLOCK_SIZE
        if start == size:
            return None
        with open(path, "rb") as stream:
            stream.seek(start)
            block = stream.read()
    except OSError:
        return None
    position = 0
    while len(block) - position >= HEADER_SIZE:
        length = block[position + 4] | (block[position + 5] << 8)
        kind = block[position + 6]
        end = position + HEADER_SIZE + length
        if end <= len(block):
            if kind == 0 and length == 0:
                return None  # LevelDB stops at preallocated zeros
            position = end
            continue
        # LevelDB drops this record and everything after it as a torn write.
        stored = int.from_bytes(block[position : position + 4], "little")
        written = _whole_length(block[position + 6 :], stored)
        if written is None:
            return None
        return (
            f"the record at byte {start + position} claims {length} payload bytes, more than "
            f"the file holds, but its checksum matches its first {written}: its length field "
            "is damaged, and LevelDB would silently drop it and every record after it"
        )
    return None


def _whole_length(typed: bytes, stored: int) -> int | None:
    """The payload length at which ``typed`` (a record's type byte, then what follows it in
    the file) matches the stored checksum, or ``None``: CRC-32C of every prefix in one pass."""
    rotated = (stored - _MASK_DELTA) & 0xFFFFFFFF
    # the running register that finalizes to the unmasked checksum
    wanted = (((rotated >> 17) | (rotated << 15)) & 0xFFFFFFFF) ^ 0xFFFFFFFF
    crc = 0xFFFFFFFF
    table = _TABLE
    for index, byte in enumerate(typed):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
        if crc == wanted:
            return index  # the type byte, then ``index`` payload bytes
    return None
