"""How every error message shows a value: its repr, cut short, never raising.

One helper, so that a 100 MB bad value, a list nested ten thousand deep, an int of a million
digits, a lone surrogate or an object whose ``__repr__`` raises all become a short, printable
piece of a one-line message. :func:`describe_exception` does the same for an exception a
processor (or a user's module) raised.
"""

from __future__ import annotations

import reprlib
from typing import Final

__all__ = ["SHOWN_CHARS", "counted", "describe_exception", "one_line", "shown", "type_name"]

SHOWN_CHARS: Final = 200
"""How many characters of a bad value an error message shows at most."""

_REPR = reprlib.Repr()
_REPR.maxlevel = 4
_REPR.maxstring = _REPR.maxother = _REPR.maxlong = SHOWN_CHARS
_REPR.maxdict = _REPR.maxlist = _REPR.maxtuple = _REPR.maxset = 12


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message: at most about ``limit`` characters, never raising.

    A long string or bytes value is cut before it is converted (a 100 MB value costs nothing)
    and says how long it was; containers are shown a few items and levels deep; a value whose
    ``repr`` raises is shown by its type. Lone surrogates come out escaped, so the message
    can always be printed and encoded.
    """
    if isinstance(value, str | bytes | bytearray):
        if len(value) <= limit:
            return repr(value)
        unit = "characters" if isinstance(value, str) else "bytes"
        return f"{repr(value[:limit])[:limit]}... ({len(value):,} {unit})"
    if isinstance(value, int) and value.bit_length() > limit * 3:
        # repr() refuses ints of more than 4,300 digits; the size is what matters here
        return f"<an int of about {int(value.bit_length() * 0.30103):,} digits>"
    try:
        text = _REPR.repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        name = type_name(value)
        if name.startswith("<"):
            return "<an object of a type with a failing repr>"
        return f"<{name} object with a failing repr>"
    return text if len(text) <= limit else f"{text[:limit]}..."


_MESSAGE_CHARS: Final = 1000
_NAME_CHARS: Final = 100


def type_name(value: object) -> str:
    """The name of ``value``'s type, never raising: cut to about 100 characters, and
    ``"<an exception type>"`` (or ``"<a type>"``) when the type will not give a string name
    (a metaclass of a processor's that raises)."""
    try:
        name = type(value).__name__
    except Exception:
        name = None
    if not isinstance(name, str):
        return "<an exception type>" if isinstance(value, BaseException) else "<a type>"
    if len(name) > _NAME_CHARS:
        name = f"{name[:_NAME_CHARS]}... ({len(name):,} characters)"
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def describe_exception(exc: BaseException) -> str:
    """``"TypeName: message"`` for any exception, never raising.

    A ``__str__`` that raises is named instead of propagating, a type name that cannot be
    read or is huge is shown as :func:`type_name` does; the message is cut to
    1,000 characters; lone surrogates are escaped (``\\udc80``), so the text can be printed,
    written as UTF-8 and embedded in a report; control characters (line breaks, ANSI escape
    sequences) are escaped too (``\\n``, ``\\x1b``), so the message is one line that cannot
    pass itself off as the harness's own output.
    """
    name = type_name(exc)
    try:
        text = str(exc)
    # whatever it raised (a processor's SystemExit or KeyboardInterrupt too, which once ended
    # the command silently or as a Ctrl-C), the crash is what to report
    except BaseException as failure:
        text = f"<its __str__ raised {type(failure).__name__}>"
    if len(text) > _MESSAGE_CHARS:
        text = f"{text[:_MESSAGE_CHARS]}... ({len(text):,} characters)"
    if not text:
        return name
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return f"{name}: {text.translate(_CONTROLS)}"


_ESCAPES: Final = {9: "\\t", 10: "\\n", 13: "\\r"}
_CONTROLS: Final = {
    code: _ESCAPES.get(code, f"\\x{code:02x}") for code in (*range(0x20), *range(0x7F, 0xA0))
}
"""Control characters as escapes: a processor's message must not move the terminal's cursor,
clear the screen or start a line that reads as a verdict (``"...\\nVALID under ..."``)."""


def one_line(text: object, limit: int = _MESSAGE_CHARS) -> str:
    """``str(text)`` as one line of at most about ``limit`` characters, never raising: each
    run of whitespace that holds a line break becomes one space (a library's message, such
    as pyarrow's, may span several lines; an error message must not)."""
    try:
        text = str(text)
    except Exception as failure:
        text = f"<its __str__ raised {type(failure).__name__}>"
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text):,} characters)"
    if "\n" in text or "\r" in text:
        text = " ".join(part.strip() for part in text.splitlines() if part.strip())
    return text


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless one: ``1 schedule``, ``7 schedules``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
