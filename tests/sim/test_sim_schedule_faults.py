"""Schedule and fault-spec parsing: every form, and a clear one-line error for bad input."""

from __future__ import annotations

import json

import pytest

from specmon.sim.faults import (
    NO_FAULTS,
    FaultError,
    Faults,
    corrupt_metrics_page,
    parse_faults,
)
from specmon.sim.schedule import ScheduleError, parse_schedule


def phases(schedule, n: int) -> str:
    return "".join(schedule.entry_for(i).phase for i in range(1, n + 1))


def test_seed_cycle_repeats_per_request() -> None:
    schedule = parse_schedule("cycle:5f,1t,3d,1r")
    assert phases(schedule, 20) == "ffffftdddr" * 2


def test_cycle_counts_default_to_one_and_carry_faults() -> None:
    schedule = parse_schedule("cycle:f,2d+drop-after=20+error=503")
    assert phases(schedule, 6) == "fddfdd"
    assert schedule.entry_for(1).faults == NO_FAULTS
    assert schedule.entry_for(2).faults == Faults(drop_after=20, error_status=503)


def test_drop_at_holds_degraded_from_request_n() -> None:
    assert phases(parse_schedule("drop-at:4"), 9) == "fffdddddd"
    assert phases(parse_schedule("drop-at:1"), 3) == "ddd"


def test_json_file_schedule(tmp_path) -> None:
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {"mode": "hold", "requests": ["f", "t stall=2@5", {"phase": "d", "faults": "restart"}]}
        )
    )
    schedule = parse_schedule(f"file:{path}")
    assert phases(schedule, 5) == "ftddd"
    assert schedule.entry_for(2).faults == Faults(stall_s=2.0, stall_after=5)
    assert schedule.entry_for(5).faults.restart
    # a bare list cycles, and a path ending in .json needs no file: prefix
    path.write_text(json.dumps(["f", "d"]))
    assert phases(parse_schedule(str(path)), 4) == "fdfd"


def test_text_file_schedule(tmp_path) -> None:
    path = tmp_path / "s.txt"
    path.write_text("# warm\nf\nf metrics=truncated\n\nd  # slow one\n")
    schedule = parse_schedule(f"file:{path}")
    assert phases(schedule, 6) == "ffdffd"
    assert schedule.entry_for(2).faults.metrics == "truncated"
    path.write_text("mode: hold\nf\nd\n")
    assert phases(parse_schedule(str(path)), 4) == "fddd"


@pytest.mark.parametrize(
    "spec",
    [
        "cycle:",
        "cycle:5x",
        "cycle:0f",
        "cycle:5f,,1d",
        "cycle:2f+bogus=1",
        "drop-at:0",
        "drop-at:x",
        "sometimes",
        "file:/nonexistent/schedule.json",
    ],
)
def test_bad_schedules_give_one_line_errors(spec) -> None:
    with pytest.raises(ScheduleError) as err:
        parse_schedule(spec)
    message = str(err.value)
    assert "\n" not in message
    assert message


def test_drop_at_a_huge_request_number_is_refused_not_allocated() -> None:
    # drop-at:N used to build a tuple of N entries: a billion took gigabytes before failing
    with pytest.raises(ScheduleError, match=r"1\.\.100000"):
        parse_schedule("drop-at:1000000000000")
    assert phases(parse_schedule("drop-at:100000"), 1) == "f"


def test_malformed_schedule_error_names_the_valid_forms() -> None:
    with pytest.raises(ScheduleError, match=r"cycle:.*drop-at:N.*file:PATH"):
        parse_schedule("sometimes")


def test_bad_json_file_is_reported(tmp_path) -> None:
    path = tmp_path / "s.json"
    path.write_text('{"requests": ["f", ')
    with pytest.raises(ScheduleError, match="invalid JSON"):
        parse_schedule(str(path))
    path.write_text('{"requests": ["q"]}')
    with pytest.raises(ScheduleError, match="unknown phase"):
        parse_schedule(str(path))


def test_fault_items() -> None:
    assert parse_faults("drop-after=20") == Faults(drop_after=20)
    assert parse_faults("error=503") == Faults(error_status=503)
    assert parse_faults("stall=1.5") == Faults(stall_s=1.5, stall_after=1)
    assert parse_faults("stall=0.5@30; restart") == Faults(
        stall_s=0.5, stall_after=30, restart=True
    )
    assert parse_faults("metrics=malformed, drop-after=0") == Faults(
        metrics="malformed", drop_after=0
    )
    assert parse_faults("") == NO_FAULTS


@pytest.mark.parametrize(
    "spec",
    ["drop-after=x", "drop-after=-1", "error=200", "stall=nan", "stall=-1", "metrics=x", "boom"],
)
def test_bad_faults(spec) -> None:
    with pytest.raises(FaultError):
        parse_faults(spec)


def test_merge_lays_the_second_over_the_first() -> None:
    merged = Faults(drop_after=5, error_status=500).merged(Faults(drop_after=9, restart=True))
    assert merged == Faults(drop_after=9, error_status=500, restart=True)


PAGE = (
    b"# HELP vllm:generation_tokens_total x\n# TYPE vllm:generation_tokens_total counter\n"
    + b"".join(
        f'vllm:generation_tokens_total{{engine="{i}",model_name="m"}} {i}.0\n'.encode()
        for i in range(12)
    )
)


def test_truncated_page_ends_mid_line() -> None:
    page = corrupt_metrics_page(PAGE, "truncated")
    assert PAGE.startswith(page) and len(page) < len(PAGE)
    assert not page.endswith(b"\n")


def test_malformed_page_has_unparseable_samples() -> None:
    page = corrupt_metrics_page(PAGE, "malformed")
    assert b"not-a-number" in page
    assert b"vllm:garbage_without_value" in page
    from prometheus_client.parser import text_string_to_metric_families

    with pytest.raises(ValueError):
        list(text_string_to_metric_families(page.decode()))
