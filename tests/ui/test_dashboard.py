"""The side panel's text from deterministic views: fixed scales, fixed-width numbers, — for
missing values, GPU and no-GPU, flags and the cycle report."""

from __future__ import annotations

import re
from dataclasses import replace

from tests.support.fake_views import SEED_SPEEDS, session_view

from specmon.ui.answer_numbers import AnswerNumbers
from specmon.ui.widgets.side_panel import (
    GRAPH_SECONDS,
    bar,
    panel_sections,
    spark,
    speed_section,
)


def _sections(view, answer=None, **kwargs) -> dict[str, str]:
    return {name: text.plain for name, text in panel_sections(view, answer, **kwargs)}


def _every_second(values, *, until: float = 100.0) -> tuple[tuple[float, ...], list]:
    """A history with one point a second, the last at `until` (oldest first)."""
    t = tuple(until - len(values) + 1 + i for i in range(len(values)))
    return t, list(values)


def test_graph_scales_are_fixed_not_fitted_to_the_data() -> None:
    # The same value draws the same height whatever else is in the window.
    quiet = spark(*_every_second([2.0] * 60), 100.0, 1.0, 9.0)
    noisy = spark(*_every_second([2.0] * 30 + [2.05] * 30), 100.0, 1.0, 9.0)
    assert quiet[0] == noisy[0] == "▂"
    assert set(noisy) == {"▂"}  # 2.00 vs 2.05 on a 1..9 scale is no visible change
    assert spark(*_every_second([1.0] * 60), 100.0, 1.0, 9.0) == "▁" * 20
    assert spark(*_every_second([9.0] * 60), 100.0, 1.0, 9.0) == "█" * 20
    assert spark(*_every_second([20.0]), 100.0, 1.0, 9.0)[-1] == "█"  # clipped, never rescaled


def test_missing_values_are_blank_and_the_newest_is_at_the_right() -> None:
    line = spark(*_every_second([None] * 57 + [5.0, 5.0, 5.0]), 100.0, 1.0, 9.0)
    assert line[:-1] == " " * 19 and line[-1] != " "
    assert spark((), (), 100.0, 0.0, 1.0) == " " * 20


def test_the_graph_buckets_the_history_by_time_and_a_gap_without_scrapes_is_blank() -> None:
    # A scrape a second from 41 to 70 and from 91 to 100; none in between (the server was down).
    t = tuple(float(x) for x in [*range(41, 71), *range(91, 101)])
    values = [0.5] * len(t)
    line = spark(t, values, 100.0, 0.0, 1.0)  # 3 s a character: (40, 43], (43, 46], ...
    assert line == "▅" * 10 + " " * 6 + "▅" * 4  # 91 falls in (88, 91]
    # Points older than the last minute are left out; the line moves left as time passes.
    assert spark(t, values, 130.0, 0.0, 1.0) == " " * 6 + "▅" * 4 + " " * 10
    assert spark(t, values, 100.0 + GRAPH_SECONDS, 0.0, 1.0) == " " * 20
    # Scrapes 10 s apart: each value stands until the next scrape (no dotted line), but a gap of
    # more than 3 scrape intervals (50 -> 90) is still blank.
    t10 = (30.0, 40.0, 50.0, 90.0, 100.0)
    assert spark(t10, [0.5] * 5, 100.0, 0.0, 1.0) == "▅" * 4 + " " * 12 + "▅" * 4
    # Placed by their time, not their count: the value of 46 stands until 70.
    sparse = spark((46.0, 70.0, 100.0), (1.0, 0.0, 1.0), 100.0, 0.0, 1.0)
    assert sparse == " " + "█" * 8 + "▁" * 10 + "█"
    # A bucket shows the mean of its points; a point with no value does not count.
    assert spark((98.0, 99.0, 100.0), (0.25, None, 0.75), 100.0, 0.0, 1.0)[-1] == "▅"


def test_bars_fill_in_eighths() -> None:
    assert bar(1.0) == "█" * 8
    assert bar(0.0) == "░" * 8
    assert bar(0.5) == "████░░░░"
    assert bar(None) == " " * 8


def test_a_healthy_view_shows_state_model_acceptance_gpu_and_flags() -> None:
    # Every answer at AL 4 for the acceptance graph; the flags from the seeds' cycle, whose
    # degraded answers have their drafts refused (session_view's default).
    s = _sections(session_view(tokens_per_step=4))
    flags = _sections(session_view())["flags"]
    assert "● up" in s["server"] and "vLLM 0.20.2" in s["server"]
    assert "SIMULATED" in s["server"]
    assert "z-lab/gemma-4-26B-A4B-it-DFlash" in s["server"] and "n_spec 8" in s["server"]
    assert "AL      4.00" in s["acceptance"]  # window
    assert "1-9" in s["acceptance"] and "0-1" in s["acceptance"]
    assert "since start" in s["acceptance"]
    # AL 4 on 1..9 draws the same character in every bucket
    graph_line = s["acceptance"].splitlines()[2]
    assert len(set(graph_line[6:26])) == 1 and graph_line[6] in "▁▂▃▄▅▆▇█"
    assert " 1 ████████ 1.00" in s["positions"] and " 4 ░░░░░░░░ 0.00" in s["positions"]
    assert "temp  61 °C / slowdown  90 °C" in s["gpu"]
    assert "VRAM  40.0/ 80.0 GiB" in s["gpu"] and "util  90%" in s["gpu"]
    assert "power  500/ 700 W  SM 1980 MHz" in s["gpu"]
    assert "throttle: none" in s["gpu"]
    assert "transition     1" in flags and "vanilla-speed     3" in flags
    assert "answers          10" in flags


def test_throttle_reasons_are_words() -> None:
    s = _sections(session_view(hot=True))
    assert "throttle: thermal (software)" in s["gpu"]


def test_no_gpu_says_why() -> None:
    s = _sections(session_view(gpu=False))
    assert s["gpu"].startswith("no GPU: ")
    assert "temp" not in s["gpu"]


def test_missing_numbers_are_dashes_not_zeros() -> None:
    view = session_view(speeds=(200.0,))
    s = _sections(view)
    assert "TTFT" in s["load"]
    empty = replace(view, servers=())
    s = _sections(empty)
    assert "server       —" in s["speed"]
    assert "AL         —" in s["acceptance"]
    assert "running   —" in s["load"]


def test_number_fields_keep_their_width() -> None:
    server = session_view().servers[0]
    widths = set()
    for tok_s in (None, 5.0, 123.4, 9999.9):
        answer = AnswerNumbers(None, tok_s, None, None, None, None)
        w = replace(server.window, decode_tok_s=tok_s)
        widths.add(len(speed_section(replace(server, window=w), answer).plain))
    assert len(widths) == 1


def test_the_cycle_report_appears_once_a_cycle_is_seen() -> None:
    s = _sections(session_view(speeds=SEED_SPEEDS * 4))
    assert "cycle: every 10 requests" in s["flags"]
    assert "cycle: none seen" in _sections(session_view())["flags"]
    assert "(1 answer)" in _sections(session_view(speeds=(200.0,)))["flags"]


def test_load_percentiles_come_from_server_histograms_without_own_streams() -> None:
    """docs/app.md, "Watching many servers": watch sends no request of its own, so TTFT/ITL stayed
    `—` under other clients' traffic. The panel shows the server's histogram percentiles, and says
    so."""
    from specmon.core.events import MetricsScraped, SessionInfo
    from specmon.core.session_state import SessionState
    from specmon.core.views import HistogramLatency, PercentileView
    from specmon.ui.widgets.side_panel import load_section

    state = SessionState(SessionInfo(server="http://a"))
    state.apply(MetricsScraped(t=1.0, source="http://a", samples=()))
    view = state.view()
    server = view.servers[0]
    latency = HistogramLatency(
        PercentileView(0.05, 0.12, 0.3), PercentileView(0.02, 0.04, 0.05), 9, 90
    )
    server = replace(server, window=replace(server.window, latency=latency))
    lines = load_section(view, server).plain.splitlines()
    assert lines[1].endswith("(server histograms)")
    assert lines[2].split() == ["TTFT", "50", "120", "300"]
    assert lines[3].split() == ["ITL", "20", "40", "50"]
    own = session_view()  # this client's streams measured TTFT: those, labelled so
    assert load_section(own, own.servers[0]).plain.splitlines()[1].endswith("(this client)")


def test_the_cycle_cost_has_lines_of_its_own_that_fit_the_panel() -> None:
    """What the cycle costs (long-run vs fast tok/s) is the headline finding: it was the tail of
    one line the panel always cut ("long-run 1…"); now each part is a line that fits."""
    lines = _sections(session_view(speeds=SEED_SPEEDS * 4))["flags"].splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("cycle: every 10 requests"))
    cost = lines[at + 1 : at + 3]
    assert cost[0].startswith("  fast ") and "degraded" in cost[0] and "tok/s" in cost[0]
    assert cost[1].startswith("  long-run ") and "% of fast" in cost[1]
    assert all(len(line) <= 48 for line in lines)  # the panel's width less its padding


def test_cancelled_answers_are_counted_apart_from_failed_ones() -> None:
    """Esc on an answer is the user's choice, not a failure: the panel counted it as failed."""
    view = session_view()
    view = replace(view, summary=replace(view.summary, failed=1, cancelled=2))
    flags = _sections(view)["flags"]
    assert re.search(r"failed\s+1\b", flags) and re.search(r"cancelled\s+2\b", flags)


def test_the_panels_graphs_draw_the_selected_servers_history_up_to_the_view() -> None:
    view = session_view()  # scraped every 10 s up to t=100
    server = view.servers[0]
    h = server.history
    # Hand-made: AL 9 (top of 1..9) at 41..70 s, nothing at 71..90 s (down), AL 1 at 91..100 s.
    t = tuple(float(x) for x in [*range(41, 71), *range(91, 101)])
    al = (9.0,) * 30 + (1.0,) * 10
    none = (None,) * len(t)
    gappy = replace(
        h,
        t=t,
        acceptance_length=al,
        acceptance_length_lifetime=none,
        draft_acceptance_rate=tuple(0.5 for _ in t),
        draft_acceptance_rate_lifetime=none,
    )
    view = replace(view, t=100.0, servers=(replace(server, history=gappy),))
    graphs = _sections(view)["acceptance"].splitlines()[2]
    assert graphs[6:26] == "█" * 10 + " " * 6 + "▁" * 4
    assert graphs[27:47] == " " * 20  # no since-start values in this history
    # The replay passes its play head: 30 s on, the same history has moved left.
    later = _sections(view, now=130.0)["acceptance"].splitlines()[2]
    assert later[6:26] == " " * 6 + "▁" * 4 + " " * 10


def test_a_missing_acceptance_rate_is_a_dash_without_a_percent_sign() -> None:
    """The panel and its summary line wrote "—%" for a share not known yet."""
    from specmon.ui.widgets.side_panel import _pct_field

    assert _pct_field(None, 6) == "     —"
    assert _pct_field(0.29, 6) == "   29%"
    assert _pct_field(None) == "—" and _pct_field(0.5) == "50%"


def _watch_of_a_busy_server(al: float | None = None):
    """A view as `watch` has it: the server busy with other clients, no answer of specmon's."""
    view = session_view()
    server = view.servers[0]
    if al is not None:
        server = replace(server, window=replace(server.window, acceptance_length=al))
    return replace(
        view,
        servers=(server,),
        rows=(),
        in_flight=(),
        cycle=None,
        summary=replace(view.summary, total=0, ok=0, failed=0, cancelled=0, flagged=0),
    )


def test_the_flags_say_they_count_only_specmon_s_own_requests_on_a_busy_server() -> None:
    """A busy server watched by specmon: the flags no longer say `cycle: none seen (0 answers)`
    as if nothing happened, but that they count only specmon's own requests."""
    from specmon.ui.widgets.side_panel import panel_summary

    view = _watch_of_a_busy_server()
    flags = _sections(view)["flags"]
    assert "none seen" not in flags
    assert "counts specmon's own requests only" in flags
    assert "own answers 0 failed 0" in panel_summary(view, None).plain
    assert "VANILLA SPEED" not in flags  # a healthy window AL


def test_a_window_al_near_1_with_drafts_is_vanilla_speed_whoever_sent_the_requests() -> None:
    flags = _sections(_watch_of_a_busy_server(al=1.03))["flags"]
    assert "window AL 1.03 with drafts: VANILLA SPEED" in flags
    healthy = _sections(session_view())["flags"]
    assert "VANILLA SPEED" not in healthy and "counts specmon's own" not in healthy
