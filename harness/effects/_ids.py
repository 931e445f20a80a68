"""Record ids found in bytes or text: the ``r<N>`` tokens input records are named by.

Shared by every lineage rule that reads an id out of what an application wrote (a Kafka
output's value, a printed line, a row): tokens ``r<N>`` standing alone, case-insensitive, in
the data as it is and, when the data looks like base64, in its decoding.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final

__all__ = ["ids_in", "record_id_of"]

_TOKEN: Final = re.compile(rb"(?<![A-Za-z0-9_])[rR](\d{1,12})(?![A-Za-z0-9_])")
_BASE64: Final = re.compile(rb"^[A-Za-z0-9+/=\s]{4,}$")


def ids_in(data: bytes) -> list[str]:
    """The record ids named in ``data``, in order (repeats kept)."""
    found = [f"r{int(m.group(1))}" for m in _TOKEN.finditer(data)]
    if found or not _BASE64.match(data):
        return found
    try:
        decoded = base64.b64decode(b"".join(data.split()), validate=True)
    except (binascii.Error, ValueError):
        return []
    return [f"r{int(m.group(1))}" for m in _TOKEN.finditer(decoded)]


def record_id_of(value: object) -> str | None:
    """A record id from one value an application stored for a record: an integer ``n`` (or
    its digits) is ``r<n>``, a string naming an id token is that id, any other string is
    taken as it is (an id the run never produced is then reported as ``unexpected``);
    None stays None."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"r{value}"
    text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    stripped = text.strip()
    if stripped.isdigit():
        return f"r{int(stripped)}"
    ids = ids_in(stripped.encode())
    return ids[0] if ids else stripped
