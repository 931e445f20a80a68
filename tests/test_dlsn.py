"""DLSN: DistributedLog's test vectors, its byte form (version 0) and its order, which is the
order of its bytes; bad values and bad bytes are refused with the problem named."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.errors import HarnessError, InvalidDLSN
from harness.log import DLSN

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def test_initial_dlsn_matches_distributedlog_vector() -> None:
    assert DLSN.INITIAL == DLSN(1, 0, 0)
    assert DLSN.INITIAL.serialize() == "AQAAAAAAAAABAAAAAAAAAAAAAAAAAAAAAA=="
    assert DLSN.INITIAL.serialize_bytes().hex() == "01" + "0000000000000001" + "00" * 16


def test_99_88_77_matches_distributedlog_vector() -> None:
    assert DLSN(99, 88, 77).serialize() == "AQAAAAAAAABjAAAAAAAAAFgAAAAAAAAATQ=="
    assert DLSN.deserialize("AQAAAAAAAABjAAAAAAAAAFgAAAAAAAAATQ==") == DLSN(99, 88, 77)


def test_baddlsn_is_rejected_with_the_value_in_the_message() -> None:
    with pytest.raises(InvalidDLSN, match=r"'baddlsn' is not a serialized DLSN") as info:
        DLSN.deserialize("baddlsn")
    assert isinstance(info.value, HarnessError)
    assert isinstance(info.value, ValueError)


def test_constants_and_neighbours() -> None:
    assert DLSN.NON_INCLUSIVE_LOWER_BOUND == DLSN(1, 0, -1)
    assert DLSN.INVALID == DLSN(0, -1, -1)
    assert DLSN(3, 4, 5).next() == DLSN(3, 4, 6)
    assert DLSN(3, 4, 5).position_on_next_segment() == DLSN(4, 0, 0)
    assert str(DLSN.INITIAL) == "DLSN{logSegmentSequenceNo=1, entryId=0, slotId=0}"


def test_order_is_segment_then_entry_then_slot() -> None:
    ordered = [DLSN(1, 0, 0), DLSN(1, 0, 1), DLSN(1, 1, 0), DLSN(2, 0, 0)]
    assert sorted(reversed(ordered)) == ordered
    assert len({DLSN(1, 2, 3), DLSN(1, 2, 3)}) == 1


def test_version0_form_is_200_bytes_and_round_trips() -> None:
    data = DLSN(7, 8, 9).serialize_bytes(0)
    assert len(data) == 200 and data[0] == 0 and data[25:] == bytes(175)
    assert DLSN.deserialize_bytes(data) == DLSN(7, 8, 9)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty bytes are not a DLSN"),
        (b"\x01" + bytes(23), "DLSN version 1 needs 25 bytes, got 24"),
        (b"\x00" + bytes(24), "DLSN version 0 needs 200 bytes, got 25"),
        (b"\x07" + bytes(24), "unknown DLSN version byte 7"),
    ],
)
def test_bad_bytes_name_the_problem(data: bytes, message: str) -> None:
    with pytest.raises(InvalidDLSN, match=message):
        DLSN.deserialize_bytes(data)


def test_fields_must_be_int64() -> None:
    with pytest.raises(
        InvalidDLSN, match=r"DLSN segment must be a signed 64-bit int, got 9223372036854775808"
    ):
        DLSN.from_json({"segment": 2**63, "entry": 0, "slot": 0})
    with pytest.raises(InvalidDLSN, match=r"DLSN slot must be a signed 64-bit int, got '1'"):
        DLSN(1, 0, "1")  # type: ignore[arg-type]


@given(INT64, INT64, INT64)
def test_round_trips_and_byte_order_matches_value_order(a: int, b: int, c: int) -> None:
    dlsn = DLSN(a, b, c)
    assert DLSN.deserialize(dlsn.serialize()) == dlsn
    assert DLSN.deserialize_bytes(dlsn.serialize_bytes()) == dlsn
    assert DLSN.from_json(dlsn.to_json()) == dlsn


@given(st.tuples(INT64, INT64, INT64), st.tuples(INT64, INT64, INT64))
def test_comparison_is_lexicographic(x: tuple[int, int, int], y: tuple[int, int, int]) -> None:
    assert (DLSN(*x) < DLSN(*y)) == (x < y)
