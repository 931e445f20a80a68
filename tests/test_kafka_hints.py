"""What a Kafka application's failure report says beyond the verdict: the application's own
name and arguments in its header, hints (a regex subscription that matched no topic, a
processor error on the default payload's shape) and an INVALID verdict's processor errors
shown as such, not as reasons for an unknown verdict. Regex subscriptions of each client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import harness
from harness import Produce, Run, Schedule
from harness.check import Anomaly, AnomalyKind, Guarantee, Status, Verdict, Witness
from harness.effects import EffectSource, stdout_lines
from harness.kafka import KafkaApp, NotModelled, text_values
from harness.kafka.command import main
from harness.kafka.hints import payload_hint
from harness.kafka.payloads import template
from harness.report import render_text
from harness.report.subject import ProcessorError

pytest_plugins = ["pytester"]

APPS = Path(__file__).parent / "kafka_apps" / "subscriptions.py"
PRINTED = ["--effect", "stdout", "--by", r"pattern=handled (\S+)"]


def _command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, function: str, *extra: str
) -> tuple[int, str]:
    code = main(
        [
            f"{APPS}:{function}", "--guarantee", "at-least-once", "--input", "orders",
            "--max-problems", "1", "--profile", "dev", "--seed", "1",
            "--failures-dir", str(tmp_path), *extra,
        ]
    )  # fmt: skip
    return code, capsys.readouterr().out


# -- regex subscriptions -------------------------------------------------------------------


@pytest.mark.parametrize("function", ["confluent_regex", "kafka_python_regex", "aiokafka_regex"])
def test_a_regex_subscription_reads_the_input_topics_it_matches(function: str) -> None:
    app = KafkaApp(f"{APPS}:{function}", inputs=["orders"], effects=[_printed()], argv=["^ord.*"])
    _, verdict = harness.run_once(
        app, Schedule([Produce(count=3), Run(calls=30)]), "at-least-once", topology=app.topology
    )
    assert verdict.status is Status.VALID, verdict.summary()
    assert verdict.stats["observed_outputs"] == 3
    assert app.notes == set()


def test_a_regex_matching_an_output_topic_is_not_modelled() -> None:
    app = KafkaApp(
        f"{APPS}:confluent_regex", inputs=["orders"], outputs=["ordered"], argv=["^ord.*"]
    )
    with pytest.raises(NotModelled, match=r"matching topic 'ordered'.*input topics only"):
        harness.run_once(app, Schedule([Run(calls=5)]), "at-least-once", topology=app.topology)


def test_a_pattern_matching_no_topic_is_named_with_the_topics_there_are(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _command(
        capsys, tmp_path, "confluent_regex", "--unchecked-topic", "audit", *PRINTED,
        "--", "^order-.*",
    )  # fmt: skip
    assert code == 1
    assert (
        "hint: the application subscribed to the pattern '^order-.*', which matched no topic, "
        "so it read nothing; the cluster's topics are audit, orders (its input topics, "
        "--input: orders)"
    ) in out.splitlines()


@pytest.mark.parametrize("function", ["kafka_python_regex", "aiokafka_regex"])
def test_a_pattern_matching_no_topic_is_noted_for_every_client(function: str) -> None:
    app = KafkaApp(f"{APPS}:{function}", inputs=["orders"], effects=[_printed()], argv=["x.*"])
    _, verdict = harness.run_once(
        app, Schedule([Produce(count=1), Run(calls=30)]), "at-least-once", topology=app.topology
    )
    assert verdict.status is Status.INVALID
    assert [h.split(",")[0] for h in app.hints(object())] == [
        "hint: the application subscribed to the pattern 'x.*'"
    ]


def _printed() -> EffectSource:
    return stdout_lines(pattern=r"handled (\S+)")


# -- the header names the application --------------------------------------------------------


def test_the_failure_header_names_the_application_and_its_arguments(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _command(capsys, tmp_path, "confluent_regex", *PRINTED, "--", "^order-.*")
    assert code == 1
    header = f"at-least-once does NOT hold for {APPS}:confluent_regex -- '^order-.*' "
    assert f"{header}(memory backend): INVALID" in out.splitlines()
    assert "harness.kafka.command" not in out
    assert "seed: 1  (--seed 1 repeats this search)" in out.splitlines()  # this door's words
    (replay_file,) = tmp_path.glob("*.json")
    assert replay_file.name.startswith("confluent_regex-")
    assert json.loads(replay_file.read_text())["processor"] == header.split(" for ")[1].strip()


def test_the_application_names_itself_in_api_failures() -> None:
    app = KafkaApp(f"{APPS}:order_ids", inputs=["orders"], effects=[_printed()], argv=["-v"])
    with pytest.raises(harness.CounterexampleFound) as found:
        harness.explore(
            app, guarantee="at-least-once", topology=app.topology, max_examples=5,
            failures_dir=None,
        )  # fmt: skip
    assert found.value.failure.processor == f"{APPS}:order_ids -- -v"


# -- a processor error on the default payload ------------------------------------------------


def test_a_key_error_on_the_default_payload_hints_at_value_template(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _command(capsys, tmp_path, "order_ids", *PRINTED)
    assert code == 2
    hints = [line for line in out.splitlines() if line.startswith("hint: ")]
    assert len(hints) == 1
    assert "looked up 'order_id' in an input value" in hints[0]
    assert "--value-template '{\"order_id\": {n}}'" in hints[0]
    assert "encode=harness.kafka.payloads.template(...)" in hints[0]


def test_the_json_output_carries_the_same_hint_in_the_problem_it_is_about(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _command(capsys, tmp_path, "order_ids", *PRINTED, "--json")
    assert code == 2
    (problem,) = json.loads(out)["problems"]
    (hint,) = problem["hints"]
    assert hint.startswith("the application looked up 'order_id' in an input value"), hint
    assert problem["verdict"]["status"] == "unknown" and problem["replay_file"] is not None


def test_with_a_template_the_application_reads_its_field_and_no_hint_is_given(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out = _command(
        capsys, tmp_path, "order_ids", *PRINTED, "--value-template", '{"order_id": "{id}"}'
    )
    # it runs: what is left is its real bug (auto-commit of the offset poll() stored, before
    # the print), which is no payload's fault
    assert code == 1, out
    assert "KeyError" not in out and "processor error" not in out
    assert "hint:" not in out


def test_the_payload_hint_reads_the_errors_of_indexing_a_default_payload() -> None:
    def errors(*texts: str) -> list[ProcessorError]:
        return [ProcessorError(text, ()) for text in texts]

    json_default = harness.kafka.json_values
    assert payload_hint(errors("KeyError: 'customer'"), json_default) is not None
    assert payload_hint(errors("KeyError: 'value'"), json_default) is None  # it has that one
    assert payload_hint(errors("ValueError: bad"), json_default) is None
    indexing = "TypeError: string indices must be integers, not 'str'"
    assert payload_hint(errors("ValueError: bad", indexing), json_default) is not None
    assert payload_hint(errors("TypeError: 'int' object is not subscriptable"), json_default)
    text_json = "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)"
    assert payload_hint(errors(text_json), text_values) is not None
    assert payload_hint(errors(text_json), json_default) is None
    # the user gave the payload's shape: their KeyError is their own
    assert payload_hint(errors("KeyError: 'customer'"), template('{"n": {n}}')) is None


# -- an INVALID verdict's processor error --------------------------------------------------


def test_an_invalid_verdicts_processor_error_is_not_a_reason_it_is_unknown() -> None:
    reason = "processor error: KeyError: 'x' (at app.py:3 in handle)"
    lost = Anomaly(AnomalyKind.LOST, 1, (Witness(("r0",), (2,), "no log sink shows it"),))
    verdict = Verdict(Status.INVALID, Guarantee.AT_LEAST_ONCE, (lost,), reasons=(reason,))
    assert verdict.summary().splitlines() == [
        "INVALID under at-least-once",
        "  lost x1: records [r0] events [2]: no log sink shows it",
        f"  {reason}",
    ]
    text = render_text(verdict)
    assert "unknown because" not in text
    assert f"also found:\n  {reason}\n" in text
    unknown = Verdict(Status.UNKNOWN, Guarantee.AT_LEAST_ONCE, reasons=(reason,))
    assert unknown.summary().splitlines()[1] == f"  unknown because: {reason}"
    assert f"unknown because:\n  {reason}\n" in render_text(unknown)


def test_the_pytest_fixture_shows_the_hints(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_app=f"""
        def test_order_ids(harness_kafka):
            from harness.effects import stdout_lines

            harness_kafka({str(APPS) + ":order_ids"!r}, guarantee="at-least-once",
                          inputs=["orders"], effects=[stdout_lines()], max_examples=10,
                          max_problems=1)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*hint: the application looked up 'order_id'*"])
