"""Log-name validation, following DistributedLog's ``DLUtils.validateAndNormalizeName``."""

from __future__ import annotations

from typing import Final

from harness.errors import InvalidStreamName

__all__ = ["validate_log_name"]

MAX_NAME_BYTES: Final = 200
"""Not a DistributedLog rule: names become directory names on the LevelDB backend."""

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
        raise InvalidStreamName(f"log name must be a str, got {type(name).__name__}: {name!r}")
    normalized = name[1:] if name.startswith("/") else name

    def bad(reason: str) -> InvalidStreamName:
        return InvalidStreamName(
            f"invalid log name {name!r}: {reason}; use letters, digits and -_:. (not leading), "
            "with '/' only between non-empty components"
        )

    if not normalized:
        raise bad("the name is empty")
    if normalized[0] in ".<":
        raise bad(f"names starting with {normalized[0]!r} are reserved")
    if normalized.endswith("/"):
        raise bad("it ends with '/'")
    if "//" in normalized:
        raise bad("it contains '//'")
    for component in normalized.split("/"):
        if component in (".", ".."):
            raise bad(f"path component {component!r} is not allowed")
    for index, char in enumerate(normalized):
        if char in _FORBIDDEN_CHARS or _bad_unit(ord(char)):
            raise bad(f"character {char!r} (U+{ord(char):04X}) at index {index} is not allowed")
    if len(normalized.encode("utf-8")) > MAX_NAME_BYTES:
        raise bad(f"it is longer than {MAX_NAME_BYTES} bytes in UTF-8")
    return normalized
