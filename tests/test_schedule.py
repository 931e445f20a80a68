"""Schedules as plain data (JSON round trip, errors) and the strategies that draw them."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from harness.errors import ConfigError
from harness.faults import (
    SCHEDULE_VERSION,
    STEP_TYPES,
    Crash,
    Duplicate,
    LoseAck,
    Produce,
    Reorder,
    Resend,
    Restart,
    Run,
    RunZombie,
    Schedule,
    Step,
    Takeover,
    Tick,
    Truncate,
)
from harness.faults.kinds import ALL_FAULTS, Fault
from harness.faults.streams import StreamSchedule
from harness.sim import Topology
from harness.strategies import schedules, steps

KNOWN_OPS = (
    "crash, duplicate, lose-ack, produce, reorder, resend, restart, run, run-zombie, takeover, "
    "tick, truncate"
)
FAULT_NAMES = (
    "['crash', 'duplicate', 'lose-ack', 'machine-crash', 'producer-crash', 'reorder', "
    "'resend', 'restart', 'tick', 'truncate', 'zombie']"
)

# One step of every type, with non-default values, and its exact JSON form.
EVERY_STEP: list[tuple[Step, dict[str, Any]]] = [
    (
        Produce(partition=2, count=3, ack=False),
        {"op": "produce", "partition": 2, "count": 3, "ack": False},
    ),
    (Run(calls=7), {"op": "run", "calls": 7}),
    (Crash(machine=True, keep=2), {"op": "crash", "machine": True, "keep": 2}),
    (Restart(), {"op": "restart"}),
    (Duplicate(), {"op": "duplicate"}),
    (LoseAck(), {"op": "lose-ack"}),
    (Reorder(pick=4), {"op": "reorder", "pick": 4}),
    (Tick(), {"op": "tick"}),
    (Takeover(), {"op": "takeover"}),
    (RunZombie(calls=5), {"op": "run-zombie", "calls": 5}),
    (Truncate(partition=1, upto=9), {"op": "truncate", "partition": 1, "upto": 9}),
    (Resend(partition=2, count=3), {"op": "resend", "partition": 2, "count": 3}),
]


def fault_of(step: Step) -> Fault | None:
    """The fault a drawn step exercises (None for the always-drawn harmless steps)."""
    if isinstance(step, Run):
        return None
    if isinstance(step, Produce):
        return None if step.ack else Fault.PRODUCER_CRASH
    if isinstance(step, Crash):
        return Fault.MACHINE_CRASH if step.machine else Fault.CRASH
    if isinstance(step, Takeover | RunZombie):
        return Fault.ZOMBIE
    return {
        Restart: Fault.RESTART,
        Duplicate: Fault.DUPLICATE,
        LoseAck: Fault.LOSE_ACK,
        Reorder: Fault.REORDER,
        Tick: Fault.TICK,
        Truncate: Fault.TRUNCATE,
        Resend: Fault.RESEND,
    }[type(step)]


def config_error(*parts: str) -> str:
    """A ``match`` pattern requiring every part, in order, literally."""
    return ".*".join(re.escape(part) for part in parts)


# -- JSON round trip ------------------------------------------------------------------------


def test_every_step_type_is_covered() -> None:
    assert {type(step) for step, _ in EVERY_STEP} == set(STEP_TYPES.values())
    assert {data["op"] for _, data in EVERY_STEP} == set(STEP_TYPES)


@pytest.mark.parametrize(("step", "data"), EVERY_STEP, ids=[d["op"] for _, d in EVERY_STEP])
def test_step_json_round_trip(step: Step, data: dict[str, Any]) -> None:
    schedule = Schedule((step,))
    assert schedule.to_json() == {"version": 1, "drain": True, "steps": [data]}
    assert Schedule.from_json(schedule.to_json()) == schedule
    assert Schedule.loads(schedule.dumps()) == schedule
    assert Schedule.from_json(json.loads(json.dumps(schedule.to_json()))) == schedule


@pytest.mark.parametrize("step", [type(step)() for step, _ in EVERY_STEP])
def test_missing_step_fields_take_their_defaults(step: Step) -> None:
    assert Schedule.loads(json.dumps({"steps": [{"op": step.op}]})).steps == (step,)


def test_round_trip_of_a_schedule_with_every_step_and_no_drain() -> None:
    schedule = Schedule(tuple(step for step, _ in EVERY_STEP), drain=False)
    assert Schedule.loads(schedule.dumps()) == schedule
    assert Schedule.loads(schedule.dumps().encode()) == schedule
    assert Schedule.loads(schedule.dumps()).drain is False


def test_dumps_is_compact_stable_text() -> None:
    schedule = Schedule((Produce(1, 2, ack=False), Run(3)))
    text = (
        '{"version":1,"drain":true,"steps":[{"op":"produce","partition":1,"count":2,'
        '"ack":false},{"op":"run","calls":3}]}'
    )
    assert schedule.dumps() == text
    # equal schedules, however built, print the same text
    assert Schedule([Produce(1, 2, False), Run(3)]).dumps() == text  # type: ignore[arg-type]
    assert Schedule.loads(text).dumps() == text
    assert Schedule().dumps() == '{"version":1,"drain":true,"steps":[]}'


def test_a_list_of_steps_is_frozen_into_a_tuple() -> None:
    schedule = Schedule([Run(1), Tick()])  # type: ignore[arg-type]
    assert schedule.steps == (Run(1), Tick())
    assert len(schedule) == 2
    assert schedule.version == SCHEDULE_VERSION == 1


def test_describe_is_exact() -> None:
    schedule = Schedule((Produce(1, 2, ack=False), Run(3), Crash(True, 1), Tick()), drain=False)
    assert schedule.describe() == (
        "  0. Produce(partition=1, count=2, ack=False)\n"
        "  1. Run(calls=3)\n"
        "  2. Crash(machine=True, keep=1)\n"
        "  3. Tick()\n"
        "     (no drain)"
    )
    assert Schedule((Truncate(0, 4),)).describe() == (
        "  0. Truncate(partition=0, upto=4)\n     drain"
    )
    assert Schedule().describe() == "     drain"


def test_from_json_takes_a_mapping_text_or_bytes() -> None:
    expected = Schedule((Run(2),), drain=False)
    data = {"version": 1, "drain": False, "steps": [{"op": "run", "calls": 2}]}
    assert Schedule.from_json(data) == expected
    assert Schedule.from_json(json.dumps(data)) == expected
    assert Schedule.from_json(json.dumps(data).encode()) == expected
    assert Schedule.from_json({"steps": ({"op": "run", "calls": 2},), "drain": False}) == expected
    assert Schedule.from_json({}) == Schedule()


# -- ConfigErrors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ('{"steps": [', ("schedule is not JSON (Expecting value at line 1 column 12)",)),
        ("", ("schedule is not JSON (Expecting value at line 1 column 1)",)),
        ("[1, 2]", ("a schedule is a JSON object with 'steps', got [1, 2]",)),
        ('"run"', ("a schedule is a JSON object with 'steps', got 'run'",)),
        ("null", ("a schedule is a JSON object with 'steps', got None",)),
        (
            '{"version": 2}',
            ("schedule version 2 is not supported; this harness reads version 1", "upgrade"),
        ),
        ('{"version": "1"}', ("schedule version '1' is not supported",)),
        (
            '{"steps": [], "extra": 1}',
            ("schedule has unknown field(s) ['extra']; known: drain, steps, version",),
        ),
        ('{"steps": {"op": "run"}}', ("schedule 'steps' must be a list, got {'op': 'run'}",)),
        ('{"steps": "run"}', ("schedule 'steps' must be a list, got 'run'",)),
        ('{"steps": 3}', ("schedule 'steps' must be a list, got 3",)),
        ('{"drain": 1}', ("schedule 'drain' must be true or false, got 1",)),
        ('{"drain": "yes"}', ("schedule 'drain' must be true or false, got 'yes'",)),
        ('{"drain": null}', ("schedule 'drain' must be true or false, got None",)),
        ('{"steps": [5]}', ("step 0 must be a JSON object such as {'op': 'run'}, got 5",)),
        (
            '{"steps": [{"op": "run"}, {"op": "explode"}]}',
            ("step 1 has unknown op 'explode'; known ops: " + KNOWN_OPS,),
        ),
        ('{"steps": [{}]}', ("step 0 has unknown op None; known ops: ",)),
        ('{"steps": [{"op": 3}]}', ("step 0 has unknown op 3; known ops: ",)),
        ('{"steps": [{"op": "RUN"}]}', ("step 0 has unknown op 'RUN'",)),
        (
            '{"steps": [{"op": "run", "calls": 1, "x": 2, "a": 0}]}',
            ("step 0 (run) has unknown field(s) ['a', 'x']; run takes ['calls']",),
        ),
        (
            '{"steps": [{"op": "tick", "pick": 1}]}',
            ("step 0 (tick) has unknown field(s) ['pick']; tick takes none",),
        ),
        (
            '{"steps": [{"op": "run", "calls": "1"}]}',
            ("step 0 (run) field 'calls' must be an integer in [0, 1000000], got '1'",),
        ),
        (
            '{"steps": [{"op": "run", "calls": 1.0}]}',
            ("step 0 (run) field 'calls' must be an integer in [0, 1000000], got 1.0",),
        ),
        (
            '{"steps": [{"op": "run", "calls": null}]}',
            ("step 0 (run) field 'calls' must be an integer in [0, 1000000], got None",),
        ),
        (
            '{"steps": [{"op": "run-zombie", "calls": true}]}',
            ("step 0 (run-zombie) field 'calls' must be an integer in [0, 1000000], got True",),
        ),
        (
            '{"steps": [{"op": "reorder", "pick": false}]}',
            ("step 0 (reorder) field 'pick' must be an integer in [0, 1000000], got False",),
        ),
        (
            '{"steps": [{"op": "produce", "ack": 1}]}',
            ("step 0 (produce) field 'ack' must be true or false, got 1",),
        ),
        (
            '{"steps": [{"op": "crash", "machine": "true"}]}',
            ("step 0 (crash) field 'machine' must be true or false, got 'true'",),
        ),
        (
            '{"steps": [{"op": "run", "calls": -1}]}',
            ("step 0 (run) field 'calls' must be an integer in [0, 1000000], got -1",),
        ),
        (
            '{"steps": [{"op": "produce", "partition": 1001}]}',
            ("step 0 (produce) field 'partition' must be an integer in [0, 1000], got 1001",),
        ),
        (
            '{"steps": [{"op": "produce", "count": 100001}]}',
            ("step 0 (produce) field 'count' must be an integer in [0, 100000], got 100001",),
        ),
        (
            '{"steps": [{"op": "crash", "keep": 1000001}]}',
            ("step 0 (crash) field 'keep' must be an integer in [0, 1000000], got 1000001",),
        ),
        (
            '{"steps": [{"op": "truncate", "upto": 10000001}]}',
            ("step 0 (truncate) field 'upto' must be an integer in [0, 10000000], got 10000001",),
        ),
    ],
)
def test_loads_errors(text: str, parts: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match=config_error(*parts)):
        Schedule.loads(text)


def test_bad_json_error_names_the_position_and_has_no_cause() -> None:
    with pytest.raises(ConfigError) as info:
        Schedule.loads('{"steps": []}\n{')
    assert str(info.value) == (
        "schedule is not JSON (Extra data at line 2 column 1); pass the JSON printed "
        "by a failing run"
    )
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__


def test_errors_from_a_mapping_too() -> None:
    with pytest.raises(ConfigError, match=config_error("a schedule is a JSON object")):
        Schedule.from_json(42)
    with pytest.raises(ConfigError, match=config_error("step 0 (run) field 'calls'")):
        Schedule.from_json({"steps": [{"op": "run", "calls": True}]})


def test_long_values_are_cut_in_messages() -> None:
    with pytest.raises(ConfigError) as info:
        Schedule.from_json(list(range(1000)))
    message = str(info.value)
    assert message == (
        "a schedule is a JSON object with 'steps', got [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, ...]"
    )


@pytest.mark.parametrize("bad", ["run", 3, None, Run, {"op": "run"}])
def test_schedule_of_a_non_step_raises_config_error(bad: object) -> None:
    with pytest.raises(
        ConfigError,
        match=config_error(f"schedule step 1 is {bad!r}, not a step; use Produce, Run, Crash"),
    ):
        Schedule((Run(), bad))  # type: ignore[arg-type]


def test_loads_rejects_an_unknown_run_field() -> None:
    with pytest.raises(ConfigError, match=config_error("unknown field(s) ['run']")):
        Schedule.loads('{"steps": [], "run": {"calls": 5}}')


@pytest.mark.parametrize("version", ["true", "1.0"])
def test_version_must_be_an_int(version: str) -> None:
    with pytest.raises(ConfigError, match=config_error("schedule version")):
        Schedule.loads(f'{{"version": {version}, "steps": []}}')


def test_loads_non_utf8_bytes_raises_config_error() -> None:
    with pytest.raises(
        ConfigError,
        match=config_error("schedule is not JSON (not UTF-8: invalid start byte at byte 13)"),
    ):
        Schedule.loads(b'{"steps": []}\xff')


@pytest.mark.parametrize("kwargs", [{"drain": "yes"}, {"version": 2}], ids=["drain", "version"])
def test_constructor_rejects_what_loads_rejects(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Schedule((Run(),), **kwargs)


# -- strategies -------------------------------------------------------------------------------

TOPOLOGY = Topology(partitions=3, upstream_resends=True)


@given(schedules(TOPOLOGY))
def test_drawn_schedules_round_trip_through_json(schedule: Schedule) -> None:
    assert Schedule.loads(schedule.dumps()) == schedule
    assert Schedule.from_json(schedule.to_json()) == schedule
    assert Schedule.loads(schedule.dumps()).dumps() == schedule.dumps()
    assert schedule.drain is True


@given(st.sets(st.sampled_from(Fault)), st.data())
def test_schedules_draw_only_enabled_faults(faults: set[Fault], data: st.DataObject) -> None:
    schedule = data.draw(schedules(TOPOLOGY, faults))
    assert {fault_of(step) for step in schedule.steps} <= {None, *faults}


@given(steps(TOPOLOGY, faults=[]))
def test_no_faults_draws_only_run_and_acknowledged_produce(step: Step) -> None:
    assert isinstance(step, Run | Produce)
    assert fault_of(step) is None


@given(steps(TOPOLOGY, faults=[Fault.MACHINE_CRASH]))
def test_machine_crash_alone_draws_only_machine_crashes(step: Step) -> None:
    assert isinstance(step, Run | Produce | Crash)
    assert fault_of(step) in (None, Fault.MACHINE_CRASH)


@given(steps(TOPOLOGY, faults=["crash"]))
def test_crash_alone_draws_only_process_crashes(step: Step) -> None:
    assert fault_of(step) in (None, Fault.CRASH)


@given(steps(Topology(partitions=2, upstream_resends=True), max_calls=3, max_records=2))
def test_drawn_parameters_stay_in_bounds(step: Step) -> None:
    if isinstance(step, Produce | Truncate | Resend):
        assert 0 <= step.partition < 2
    if isinstance(step, Produce | Resend):
        assert 1 <= step.count <= 2
    if isinstance(step, Run | RunZombie):
        assert 1 <= step.calls <= 3
    if isinstance(step, Crash):
        assert 0 <= step.keep <= 3
    if isinstance(step, Reorder):
        assert 1 <= step.pick <= 3
    if isinstance(step, Truncate):
        assert 1 <= step.upto <= 12


@given(schedules(Topology(partitions=3), max_steps=60))
def test_no_resend_is_drawn_for_an_upstream_that_does_not_resend(schedule: Schedule) -> None:
    assert not any(isinstance(step, Resend) for step in schedule.steps)


@given(schedules(min_steps=2, max_steps=4))
def test_drawn_schedule_lengths(schedule: Schedule) -> None:
    assert 2 <= len(schedule) <= 4


@pytest.mark.parametrize("fault", sorted(ALL_FAULTS))
def test_every_enabled_fault_can_be_drawn(fault: Fault) -> None:
    found = find(steps(TOPOLOGY, faults=[fault]), lambda step: fault_of(step) is fault)
    assert fault_of(found) is fault


def test_shrinking_goes_to_the_mildest_schedule() -> None:
    assert find(schedules(), lambda s: len(s) >= 1) == Schedule((Run(1),))
    assert find(schedules(), lambda s: any(isinstance(x, Crash) for x in s.steps)) == Schedule(
        (Crash(machine=False, keep=0),)
    )


@pytest.mark.parametrize("make", [steps, schedules])
def test_unknown_fault_name_raises_config_error(make: Any) -> None:
    with pytest.raises(
        ConfigError, match=config_error(f"unknown fault 'explode'; choose from {FAULT_NAMES}")
    ):
        make(TOPOLOGY, faults=[Fault.CRASH, "explode"])


@pytest.mark.parametrize(
    ("min_steps", "max_steps"),
    [(3, 2), (-1, 5), (0, -1), (0, True), (0, 2.0), (0, None)],
)
def test_step_count_bounds_errors(min_steps: Any, max_steps: Any) -> None:
    with pytest.raises(
        ConfigError,
        match=config_error(
            f"need 0 <= min_steps <= max_steps, got min_steps={min_steps!r}, "
            f"max_steps={max_steps!r}"
        ),
    ):
        schedules(min_steps=min_steps, max_steps=max_steps)


def test_non_int_min_steps_raises_config_error() -> None:
    with pytest.raises(ConfigError, match=config_error("need 0 <= min_steps <= max_steps")):
        schedules(min_steps="1")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[" * 200 + "]" * 200, "is not JSON (arrays or objects nest too deeply"),
        ('{"steps": 3}', "'steps' must be a list, got 3"),
        ('{"extra": 1}', "has unknown field(s) ['extra']; known: drain, steps, version"),
        ('{"drain": 1}', "'drain' must be true or false, got 1"),
        ('{"version": 9}', "version 9 is not supported; this harness reads version 1"),
        ("[1]", "is a JSON object with 'steps', got [1]"),
    ],
)
def test_both_schedule_kinds_read_their_json_form_alike(text: str, message: str) -> None:
    for cls, what in ((Schedule, "schedule"), (StreamSchedule, "stream schedule")):
        with pytest.raises(ConfigError) as refused:
            cls.from_json(text)
        assert what in str(refused.value) and message in str(refused.value)
