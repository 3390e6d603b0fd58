"""The dashboard's diagnosis section (docs/diagnosis.md): the pure text of each part, the widget
hidden while there is nothing to say, the answer's line for F3, and the simulator's GPU page that
the demo reads under a thermal drift."""

from __future__ import annotations

from dataclasses import replace

import pytest
from tests.support.fake_views import (
    NO_CONTEXT,
    NO_QUALITY,
    NO_SAVING,
    QUIET_THERMAL,
    session_view,
)
from tests.support.ui_fakes import FakePort, screen_text
from tests.support.waiting import wait_for_app
from textual.app import App, ComposeResult
from textual.content import Content
from textual.widgets import DataTable

from specmon.core.canary import CanaryView
from specmon.core.diagnosis.context_cliff import ContextBinView, ContextCliffView
from specmon.core.diagnosis.quality import QualityVerdict
from specmon.core.diagnosis.seconds_saved import AnswerSaving, SecondsSavedView
from specmon.core.diagnosis.state import DiagnosisView
from specmon.core.diagnosis.thermal import PowerLimitView
from specmon.core.server_timing import TtftSplit
from specmon.sim.drift import GpuState
from specmon.sim.gpu_page import gpu_page
from specmon.sources.gpu.dcgm import parse_dcgm_page
from specmon.ui.app import SpecmonApp
from specmon.ui.screens.dialogs import AnswersScreen
from specmon.ui.widgets.answer import AnswerView
from specmon.ui.widgets.diagnosis_panel import (
    DiagnosisSection,
    answer_diagnosis,
    canary_lines,
    context_chart,
    context_lines,
    diagnosis_content,
    quality_lines,
    saved_cell,
    saved_lines,
    seconds_text,
    thermal_lines,
)


def _bins(*als: tuple[int, int | None, int, float]) -> tuple[ContextBinView, ...]:
    return tuple(ContextBinView(lo, hi, steps, round(al * steps), al) for lo, hi, steps, al in als)


def _styles(content: Content) -> set[str]:
    return {str(span.style) for span in content.spans}


def _plain(lines: list[Content]) -> str:
    return "\n".join(line.plain for line in lines)


def test_context_cliff_summary_and_a_bar_per_bin():
    bins = _bins(
        (0, 2048, 40, 3.4), (2048, 4096, 40, 3.3), (4096, 8192, 30, 2.0), (8192, None, 30, 1.6)
    )
    view = ContextCliffView(
        bins=bins, steps=140, detected=True, summary="AL 3.4 below 4k, 1.6 past 8k"
    )
    lines = context_lines(view)
    assert lines[0].plain == "AL 3.4 below 4k, 1.6 past 8k"
    assert "$warning" in _styles(lines[0])
    assert lines[1].plain == f"ctx    0 {context_chart(bins)} 8k+  AL 3.4→1.6"
    chart = context_chart(bins)
    assert chart == "██▄▃"  # fixed scale 1..the highest bin AL (3.4)


def test_context_says_nothing_with_one_bin():
    view = ContextCliffView(bins=_bins((0, 2048, 40, 3.4)), steps=40, detected=False)
    assert context_lines(view) == []


def test_thermal_attribution_on_two_lines_and_a_power_limit_that_differs():
    view = replace(
        QUIET_THERMAL,
        slow=True,
        cause="clock",
        summary="the GPU clock fell 1725→1365 MHz at 91 °C (70% of the slowdown; acceptance 20%)",
        power_limits=(
            PowerLimitView(0, 450.0, 300.0, 450.0, True),
            PowerLimitView(1, 450.0, 450.0, 450.0, False),
        ),
    )
    lines = thermal_lines(view)
    assert _plain(lines) == (
        "the GPU clock fell 1725→1365 MHz at 91 °C\n"
        "  (70% of the slowdown; acceptance 20%)\n"
        "GPU 0 power limit 300 W enforced, 450 W requested"
    )
    assert "$error" in _styles(lines[0])
    assert thermal_lines(QUIET_THERMAL) == []


def test_seconds_saved_total_and_the_last_answer_that_cost_time_with_its_reason():
    recent = (
        AnswerSaving("a", 1.0, 200, 2.0, 4.0, 2.0, False),
        AnswerSaving("b", 2.0, 200, 5.0, 4.2, -0.8, True, "AL 1.1 did not pay for the drafts"),
    )
    view = SecondsSavedView(50.0, 2, 1, 1.2, 7.0, 8.2, recent)
    lines = saved_lines(view)
    assert _plain(lines) == (
        "saved +1.2 s this session (2 answers, 1 cost time; vanilla 50 tok/s)\n"
        "last answer cost 0.8 s (AL 1.1 did not pay for the drafts)"
    )
    assert "bold $error" in _styles(lines[1])
    assert saved_lines(NO_SAVING) == []


def test_quality_flags_show_the_evidence_literally():
    hostile = "repeats \x1b[31m[bold]the same words[/bold]"
    verdict = QualityVerdict("r1", 1.0, "loop", 300, 8.8, 5.1, 0.9, hostile)
    lines = quality_lines(replace(NO_QUALITY, checked=9, loops=1, flagged=(verdict,)))
    text = _plain(lines)
    assert text.startswith("quality: 1 loop, 0 garbled of 9 answers\nloop: repeats ")
    assert "\x1b" not in text and "[bold]the same words[/bold]" in text
    assert quality_lines(NO_QUALITY) == []


def _canary(status: str, **kw: object) -> CanaryView:
    fields: dict[str, object] = dict(
        source="http://127.0.0.1:8000",
        status=status,
        diagnosis="steady",
        probes=12,
        learned_probes=5,
        learn_probes=5,
        acceptance_length=3.1,
        expected_al=3.2,
        tolerance=0.3,
        deviation=-0.1,
        live_acceptance_length=None,
        live_reference=None,
        consecutive_drift=0,
        advice=None,
        error=None,
    )
    fields.update(kw)
    return CanaryView(**fields)  # type: ignore[arg-type]


def test_canary_status_al_vs_expected_and_advice():
    drifted = _canary(
        "drifted", acceptance_length=1.6, advice="the engine drifted: restart the server"
    )
    lines = canary_lines([_canary("ok"), drifted], name_servers=False)
    assert _plain(lines) == (
        "canary ok AL 3.10 vs 3.20 ± 0.30 expected\n"
        "canary drifted AL 1.60 vs 3.20 ± 0.30 expected\n"
        "  the engine drifted: restart the server"
    )
    assert "$success" in _styles(lines[0]) and "bold $error" in _styles(lines[1])
    learning = canary_lines([_canary("learning", learned_probes=2)], name_servers=True)
    assert learning[0].plain == "canary http://127.0.0.1:8000 learning 2/5 probes"


def test_a_canary_note_shows_whatever_the_status():
    """A note on a probe that did not fail (the stored baseline was refused and is learned
    again) is shown too, as a warning; a failed probe's error stays red."""
    note = "stored canary baseline refused, learned again"
    lines = canary_lines([_canary("learning", learned_probes=0, error=note)], name_servers=False)
    assert _plain(lines) == "canary learning 0/5 probes\n  " + note
    assert "$warning" in _styles(lines[1])
    failed = canary_lines([_canary("failed", error="HTTP 500")], name_servers=False)
    assert failed[1].plain == "  HTTP 500" and "$error" in _styles(failed[1])


def test_answer_line_saved_flag_and_ttft_split():
    view = session_view()
    row = view.rows[-1]
    split = TtftSplit(client_ttft_s=0.120, server_ttft_s=0.040, queue_s=0.0, outside_s=0.080)
    verdict = QualityVerdict(row.request_id, 1.0, "garbled", 200, 1.1, -3.5, None, "62% pieces")
    saving = AnswerSaving(row.request_id, 1.0, 200, 5.0, 4.2, -0.8, True, "vanilla speed")
    diagnosis = DiagnosisView(
        NO_CONTEXT,
        QUIET_THERMAL,
        replace(NO_SAVING, baseline_tok_s=50.0, answers=1, recent=(saving,)),
        replace(NO_QUALITY, flagged=(verdict,)),
    )
    view = replace(
        view, rows=(*view.rows[:-1], replace(row, ttft_split=split)), diagnosis=diagnosis
    )
    line = answer_diagnosis(view, row.request_id).plain
    assert line == (
        "cost 0.8 s (vanilla speed) · garbled: 62% pieces · "
        "TTFT 120 ms (engine 40 ms, outside 80 ms)"
    )
    assert answer_diagnosis(view, view.rows[0].request_id).plain == ""


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield DiagnosisSection()


async def test_section_hidden_until_it_has_something_to_say():
    quiet = replace(
        session_view(), diagnosis=DiagnosisView(NO_CONTEXT, QUIET_THERMAL, NO_SAVING, NO_QUALITY)
    )
    assert diagnosis_content(quiet).plain == ""
    drifted = _canary("drifted", advice="restart the server")
    app = _Host()
    async with app.run_test(size=(60, 12)) as pilot:
        section = app.query_one(DiagnosisSection)
        section.show(quiet)
        await pilot.pause()
        assert not section.display
        section.show(replace(quiet, canaries=(drifted,)))
        await pilot.pause()
        assert section.display
        assert "restart the server" in section.render().plain  # type: ignore[union-attr]
        section.show(quiet)
        await pilot.pause()
        assert not section.display


def test_sim_gpu_page_reads_back_as_a_simulated_throttled_gpu():
    hot = GpuState(temperature_c=91.0, sm_clock_mhz=1365.0, power_w=420.0)
    sample = parse_dcgm_page(
        gpu_page(hot, "NVIDIA H100", running=1), t=1.0, source="http://127.0.0.1/sim/gpu"
    )
    (gpu,) = sample.gpus
    assert gpu.name == "simulated NVIDIA H100"
    assert (gpu.temperature_c, gpu.sm_clock_mhz, gpu.power_w) == (91.0, 1365.0, 420.0)
    assert gpu.clock_event_reasons == ("sw_thermal_slowdown",)
    cool = GpuState(temperature_c=45.0, sm_clock_mhz=1725.0, power_w=90.0)
    (idle,) = parse_dcgm_page(gpu_page(cool, "x", running=0), t=2.0, source="s").gpus
    assert idle.clock_event_reasons == ("gpu_idle",)


def test_answers_table_saved_cell():
    assert saved_cell(None) == "—"
    assert saved_cell(AnswerSaving("a", 1.0, 200, 2.0, 4.8, 2.8, False)) == "+2.8 s"
    assert saved_cell(AnswerSaving("b", 1.0, 200, 5.0, 4.2, -0.8, True, "why")) == "-0.8 s cost"
    # a cost that rounds to nothing: "0.0 s", not "-0.0 s cost"
    assert saved_cell(AnswerSaving("c", 1.0, 200, 4.22, 4.2, -0.02, True, "why")) == "0.0 s"
    assert saved_cell(AnswerSaving("d", 1.0, 200, 4.2, 4.22, 0.02, False)) == "0.0 s"
    # the panel's total likewise: no sign on what rounds to zero
    assert [seconds_text(s) for s in (-0.04, 0.0, 0.04, 2.75, -0.8)] == [
        "0.0 s",
        "0.0 s",
        "0.0 s",
        "+2.8 s",
        "-0.8 s",
    ]


@pytest.mark.slow
async def test_answer_status_f3_and_f4_show_the_answers_saving_and_ttft_split():
    port = FakePort(answers=[["a"]] * 10)
    base = session_view(prefix="r")  # the same ids as the fake port's answers
    row = base.rows[5]
    split = TtftSplit(client_ttft_s=0.120, server_ttft_s=0.040, queue_s=0.0, outside_s=0.080)
    saving = AnswerSaving(row.request_id, 1.0, 200, 5.0, 4.2, -0.8, True, "vanilla speed")
    diagnosis = DiagnosisView(
        NO_CONTEXT,
        QUIET_THERMAL,
        replace(NO_SAVING, baseline_tok_s=50.0, answers=1, answers_cost=1, recent=(saving,)),
        NO_QUALITY,
    )
    rows = (*base.rows[:5], replace(row, ttft_split=split), *base.rows[6:])
    port.fake_view = replace(base, rows=rows, diagnosis=diagnosis)
    app = SpecmonApp(port)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_app(pilot, lambda: getattr(app.screen, "connection", None) is not None)
        for i in range(6):
            app.screen.send(f"q{i}")
            await wait_for_app(pilot, lambda n=i: len(app.screen.query(AnswerView)) == n + 1)
            await wait_for_app(pilot, lambda n=i: list(app.screen.query(AnswerView))[n].finished)
        sixth = list(app.screen.query(AnswerView))[5]

        def status() -> str:
            return str(sixth.query_one(".answer-status").content)

        await wait_for_app(pilot, lambda: "TTFT 120 ms (engine 40 ms, outside 80 ms)" in status())
        assert "cost 0.8 s (vanilla speed)" in status()
        assert status().count("TTFT") == 1  # once, with its split, not "TTFT 120 ms · … TTFT"
        await wait_for_app(pilot, lambda: app.screen.last_numbers.request_id == row.request_id)
        await pilot.press("f3")
        await pilot.pause()
        notice = str(app.screen.query(".notice").last().content)
        assert notice.startswith("why: ") and notice.endswith(
            "cost 0.8 s (vanilla speed) · TTFT 120 ms (engine 40 ms, outside 80 ms)"
        )
        # the answer's own cost, not a saving (the panel's session total, 0 s in this fake
        # view, reads "saved 0.0 s" and is not the answer's)
        assert "saved" not in status() and "saved" not in notice
        await pilot.press("f4")
        await wait_for_app(pilot, lambda: isinstance(app.screen, AnswersScreen))
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels[-1] == "saved"
        cells = [str(table.get_row_at(i)[-1]) for i in range(table.row_count)]
        assert cells[5] == "-0.8 s cost" and cells[0] == "—"


@pytest.mark.parametrize("width", [100, 108, 116, 124])
async def test_the_numbers_line_wraps_between_values_only(width):
    """Under an answer, a narrow screen wraps the numbers line between values: the TTFT value
    with its split is whole on one screen line, never "(engine 40" / "ms, outside 80 ms)"."""
    port = FakePort(answers=[["a"]])
    base = session_view(prefix="r")
    row = base.rows[0]
    split = TtftSplit(client_ttft_s=0.366, server_ttft_s=0.033, queue_s=0.0, outside_s=0.333)
    saving = AnswerSaving(row.request_id, 1.0, 200, 5.0, 4.2, -0.8, True, "vanilla speed")
    diagnosis = DiagnosisView(
        NO_CONTEXT,
        QUIET_THERMAL,
        replace(NO_SAVING, baseline_tok_s=50.0, answers=1, answers_cost=1, recent=(saving,)),
        NO_QUALITY,
    )
    port.fake_view = replace(
        base, rows=(replace(row, ttft_split=split), *base.rows[1:]), diagnosis=diagnosis
    )
    app = SpecmonApp(port)
    async with app.run_test(size=(width, 40)) as pilot:
        await wait_for_app(pilot, lambda: getattr(app.screen, "connection", None) is not None)
        app.screen.send("q0")
        answer = await wait_for_app(pilot, lambda: next(iter(app.screen.query(AnswerView)), None))
        status = answer.query_one(".answer-status")
        value = "TTFT 366 ms (engine 33 ms, outside 333 ms)"
        await wait_for_app(pilot, lambda: value in str(status.content))
        await pilot.pause()
        assert str(status.content).count("TTFT") == 1
        region = status.content_region
        lines = screen_text(app).splitlines()[region.y : region.bottom]
        shown = [line[region.x : region.right].rstrip() for line in lines]
        assert any(value in line for line in shown), shown
        assert all(not line.endswith(("(engine", "ms,", "outside")) for line in shown), shown
