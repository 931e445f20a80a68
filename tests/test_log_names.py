"""Log names are validated and normalised as DistributedLog does: valid ones kept, invalid ones
refused with the name and the reason, and no name reaches outside its namespace directory."""

from __future__ import annotations

import pytest

from harness.errors import InvalidStreamName
from harness.log import Namespace
from harness.log.names import validate_log_name


@pytest.mark.parametrize("name", ["a", "orders-2024", "team/orders", "x.y", "a_b:c", "ü", "a.."])
def test_valid_names_are_kept(name: str) -> None:
    assert validate_log_name(name) == name


def test_a_leading_slash_is_stripped() -> None:
    assert validate_log_name("/orders") == "orders"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "the name is empty"),
        ("/", "the name is empty"),
        (".hidden", "names starting with '.' are reserved"),
        ("<default>", "names starting with '<' are reserved"),
        ("a/", "it ends with '/'"),
        ("a//b", "it contains '//'"),
        ("a/../b", "path component '..' is not allowed"),
        ("a/./b", "path component '.' is not allowed"),
        ("..", "names starting with '.' are reserved"),
        ("a b", r"character ' ' \(U\+0020\) at index 1"),
        ("a>b", r"character '>' \(U\+003E\) at index 1"),
        ("a\x00", r"\(U\+0000\) at index 1"),
        ("tab\there", r"\(U\+0009\) at index 3"),
        ("del\x7f", r"\(U\+007F\) at index 3"),
        ("nel\x85", r"\(U\+0085\) at index 3"),
        ("emoji\U0001f600", r"\(U\+1F600\) at index 5"),
        ("x" * 256, "256 bytes once percent-encoded as a directory name, more than 255"),
        ("é" * 43, "258 bytes once percent-encoded"),
        ("a/" * 64 + "a", "257 bytes once percent-encoded"),
    ],
)
def test_invalid_names_raise_with_the_name_and_the_reason(name: str, reason: str) -> None:
    with pytest.raises(InvalidStreamName, match=reason) as info:
        validate_log_name(name)
    assert repr(name)[:60] in str(info.value)


def test_non_string_names_are_rejected() -> None:
    with pytest.raises(InvalidStreamName, match="log name must be a str, got bytes: b'a'"):
        validate_log_name(b"a")


@pytest.mark.parametrize("name", ["../escape", "..", "a/../../etc", ""])
def test_namespace_operations_reject_bad_names(namespace: Namespace, name: str) -> None:
    for operation in (namespace.create_log, namespace.open_log, namespace.log_exists):
        with pytest.raises(InvalidStreamName, match="invalid log name"):
            operation(name)
    assert namespace.get_logs() == []


def test_slashes_stay_inside_the_namespace_directory(tmp_path: object) -> None:
    from pathlib import Path

    from harness.log import leveldb_uri, open_namespace

    root = Path(str(tmp_path)) / "ns"
    with open_namespace(leveldb_uri(root)) as namespace:
        namespace.create_log("team/orders")
        namespace.create_log("/plain")
        assert namespace.get_logs() == ["plain", "team/orders"]
        assert namespace.log_exists("/team/orders")
    created = {p.name for p in (root / "logs").iterdir()}
    assert created == {"team%2Forders", "plain"}
    assert sorted(p.name for p in root.iterdir()) == ["NAMESPACE", "logs"]
