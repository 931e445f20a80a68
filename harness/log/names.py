"""Log-name validation, following DistributedLog's ``DLUtils.validateAndNormalizeName``."""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from harness._shown import shown
from harness.errors import InvalidStreamName

__all__ = ["validate_log_name"]

MAX_NAME_BYTES: Final = 255
"""Not a DistributedLog rule: on the LevelDB backend a name becomes one directory name,
percent-encoded (``urllib.parse.quote(name, safe="")``), and file systems allow 255 bytes per
name. The limit applies to the encoded form, on every backend, so a name valid in memory is
valid on LevelDB: ``"é" * 43`` (86 bytes of UTF-8, 258 once encoded) is rejected."""

_FORBIDDEN_CHARS: Final = frozenset("\0<> ")


def _bad_unit(code: int) -> bool:
    # DistributedLog checks UTF-16 code units with exclusive bounds (so it lets 0x1F, 0x7F
    # and 0x9F through); we close the bounds so that every control character is rejected.
    # Every character outside the BMP is a surrogate pair in UTF-16, so it is rejected too.
    return code <= 0x1F or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xF8FF or code >= 0xFFF0


def validate_log_name(name: object) -> str:
    """Return the normalized name (a leading ``/`` stripped) or raise :class:`InvalidStreamName`.

    Rejected, each with the name and the reason in the message: non-strings, empty
    names, names starting with ``.`` or ``<`` (reserved), a trailing ``/``, ``//``,
    a path component ``.`` or ``..``, NUL, ``<``, ``>``, space and control characters.
    DistributedLog itself fails on an empty name with StringIndexOutOfBoundsException;
    here it is an InvalidStreamName like every other bad name.
    """
    if not isinstance(name, str):
        raise InvalidStreamName(f"log name must be a str, got {type(name).__name__}: {shown(name)}")
    normalized = name[1:] if name.startswith("/") else name

    def bad(reason: str) -> InvalidStreamName:
        return InvalidStreamName(
            f"invalid log name {shown(name)}: {reason}; use letters, digits and -_:. (not "
            "leading), "
            "with '/' only between non-empty components"
        )

    if not normalized:
        raise bad("the name is empty")
    if len(normalized) > MAX_NAME_BYTES:  # first: a 100 MB name is refused without a scan
        raise bad(
            f"it is at least {len(normalized):,} bytes once percent-encoded as a directory "
            f"name, more than {MAX_NAME_BYTES}"
        )
    if normalized[0] in ".<":
        raise bad(f"names starting with {shown(normalized[0])} are reserved")
    if normalized.endswith("/"):
        raise bad("it ends with '/'")
    if "//" in normalized:
        raise bad("it contains '//'")
    for component in normalized.split("/"):
        if component in (".", ".."):
            raise bad(f"path component {shown(component)} is not allowed")
    for index, char in enumerate(normalized):
        if char in _FORBIDDEN_CHARS or _bad_unit(ord(char)):
            raise bad(
                f"character {shown(char)} (U+{ord(char):04X}) at index {index} is not allowed"
            )
    encoded = len(quote(normalized, safe=""))
    if encoded > MAX_NAME_BYTES:
        raise bad(
            f"it is {encoded} bytes once percent-encoded as a directory name, more than "
            f"{MAX_NAME_BYTES} (each non-ASCII UTF-8 byte, '/' and ':' take 3)"
        )
    return normalized
