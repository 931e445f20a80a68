"""Every error a newcomer meets names what was meant: flags, commands, scenarios, sink kinds,
faults and choices get a "did you mean"; no option is taken by an abbreviation; under
``--json`` every usage error is a JSON error object on stdout too (so ``> out.json`` is JSON).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness._usage import UsageError, UsageParser, close_matches, did_you_mean, wants_json
from harness.cli import main
from harness.errors import ConfigError

PROCESSOR = "harness.catalogue.toys:process_then_commit"


def _fails(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[str, str]:
    """Run the CLI, which must refuse ``argv`` (exit 2) without a traceback."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return out, err


def test_the_closest_choice_is_named_and_nothing_far_is() -> None:
    assert did_you_mean("tik", ["crash", "tick", "zombie"]) == " (did you mean 'tick'?)"
    assert did_you_mean("meteor", ["crash", "tick"]) == ""
    assert close_matches("Exactly_Once", ["at-least-once", "exactly-once"]) == ["exactly-once"]


def test_a_parser_takes_no_abbreviation_and_names_the_option_meant() -> None:
    parser = UsageParser(prog="p")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--guarantee", choices=["at-least-once", "exactly-once"])
    with pytest.raises(UsageError, match="unrecognized arguments: --al; --al: did you mean --all"):
        parser.parse_args(["--al"])
    with pytest.raises(UsageError, match="'exactly' \\(did you mean 'exactly-once'\\?\\)") as bad:
        parser.parse_args(["--guarantee", "exactly"])
    assert bad.value.suggestions == ("exactly-once",)
    assert isinstance(bad.value, ConfigError) and bad.value.usage.startswith("usage: p ")


def test_wants_json_reads_only_the_commands_own_words() -> None:
    assert wants_json(["check", "h.jsonl", "--json"])
    assert not wants_json(["kafka", "app.py", "--", "--json"])


def test_a_mistyped_flag_gets_the_commands_usage_and_the_flag_meant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, err = _fails(capsys, ["check", "h.jsonl", "--guarantee", "exactly-once", "--gaurantee", "x"])
    assert "usage: python -m harness check " in err
    assert "python -m harness check: error: unrecognized arguments: --gaurantee x" in err
    assert "did you mean --guarantee?" in err
    _, err = _fails(capsys, ["check", "h.jsonl", "--gaurantee", "exactly-once"])
    assert "--gaurantee: did you mean --guarantee?" in err


def test_a_mistyped_command_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    _, err = _fails(capsys, ["chek", "h.jsonl"])
    assert "invalid choice: 'chek' (did you mean 'check'?)" in err


def test_an_option_before_any_command_says_where_options_go(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, err = _fails(capsys, ["--guarantee", "exactly-once"])
    assert "a command's options go after its name: python -m harness COMMAND --guarantee" in err


def test_an_abbreviated_flag_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    out, err = _fails(capsys, ["run", "--al"])
    assert out == "" and "did you mean --all?" in err


def test_a_dotted_processor_name_is_shown_as_module_function(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, err = _fails(capsys, ["run", "batcher.batched_copy"])
    assert "MODULE:FUNCTION" in err and "'batcher:batched_copy'" in err
    assert "dlog-reader-offsets" not in err  # not every scenario
    _, err = _fails(capsys, ["run", "dlog-reader-offset"])
    assert "(did you mean 'dlog-reader-offsets'?)" in err
    _, err = _fails(capsys, ["run", "dlog-reader-offsets:reader-with-offset"])
    assert "(did you mean 'reader-with-offsets'?)" in err


def test_a_sink_kind_typo_names_the_kinds_not_the_topology(
    capsys: pytest.CaptureFixture[str],
) -> None:
    topology = '{"partitions": 1, "keys": 2, "sinks": {"out": {"kind": "lgo"}}}'
    argv = ["run", PROCESSOR, "--guarantee", "at-least-once", "--topology", topology]
    _, err = _fails(capsys, argv)
    assert "unknown sink kind 'lgo' (did you mean 'log'?); choose from log, table" in err
    assert "ValueError" not in err and "partitions" not in err


def test_a_fault_typo_names_the_fault(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["run", PROCESSOR, "--guarantee", "at-least-once", "--faults", "crash,tik"]
    _, err = _fails(capsys, argv)
    assert "unknown fault, got 'tik'" in err and "(did you mean 'tick'?)" in err


def test_the_spark_sink_spec_names_the_kind_meant() -> None:
    from harness.spark.streaming.job import JobSink

    with pytest.raises(ConfigError, match=r"\(did you mean 'sqlite'\?\)"):
        JobSink.parse("sqlit:/x.db:t")


@pytest.mark.parametrize(
    "argv",
    [
        ["chek", "h.jsonl"],
        ["check", "h.jsonl", "--gaurantee", "exactly-once"],
        ["check", "h.jsonl", "--guarantee", "exactly"],
        ["run", "--al"],
        ["run", "batcher.batched_copy"],
        ["run", PROCESSOR, "--guarantee", "at-least-once", "--faults", "tik"],
        ["replay", "--run-second", "2", "x.json"],
        ["list", "--jsn"],
        ["check-spark", "h.parquet", "--guarantee", "exactly"],
        ["kafka", "app.py", "--guarante", "at-least-once", "--input", "t"],
        ["kafka", "app.py", "--guarantee", "at-least-once", "--input", "t", "--db", "x"],
        ["spark-job", "job.py", "--guarante", "exactly-once", "--input", "t"],
    ],
)
def test_every_usage_error_under_json_is_a_json_error_object(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from test_report import _schema_errors

    from harness.report.schema import OUTPUT_SCHEMA

    out, err = _fails(capsys, [*argv, "--json"])
    printed: dict[str, Any] = json.loads(out)
    assert _schema_errors(printed, OUTPUT_SCHEMA, OUTPUT_SCHEMA, "") == []
    assert (printed["command"], printed["status"]) == ("error", "unknown")
    assert printed["for_command"] == (None if argv[0] == "chek" else argv[0])
    assert printed["summary"] in err  # the same line as on stderr
    if printed["error_type"] == "UsageError":
        assert printed["usage"].startswith("usage: python -m harness")


def test_a_marker_fault_typo_names_the_fault() -> None:
    from harness.settings import BadSetting, Layer, resolve

    with pytest.raises(BadSetting, match=r"unknown fault, got 'tik'.*\(did you mean 'tick'\?\)"):
        resolve(Layer("marker", {"faults": ["crash", "tik"]}))


def test_a_profile_typo_names_the_profile(capsys: pytest.CaptureFixture[str]) -> None:
    _, err = _fails(capsys, ["run", "--all", "--profile", "nightlly"])
    assert "invalid choice: 'nightlly' (did you mean 'nightly'?)" in err
