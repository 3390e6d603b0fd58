"""Hostile HTTP answers (docs/bad-input.md, "HTTP reads"): pages that trickle, servers that never
answer, redirect loops, pages with duplicate series. Every read ends within its deadline with the
reason as the server's state, never a traceback; `watch --once` always lists every server it was
given."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.support.hostile_http import HostileServer, Page, RedirectLoop, Silent, Trickle

from specmon.cli.main import main
from specmon.core.events import ServerStatusChanged, SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.watch_json import snapshot_of
from specmon.sources.gpu.dcgm import DcgmSampler
from specmon.sources.metrics_scraper import MetricsScraper
from specmon.sources.prometheus_fleet import PrometheusFleet
from specmon.sources.server_identity import identify
from specmon.ui.watch_output import dumps

ENDLESS = b"# " + b"x" * 100_000 + b"\n"
"""A body that takes hours at one byte per half second."""

pytestmark = pytest.mark.timeout(60)

GOLDEN = Path(__file__).parents[1] / "golden" / "metrics" / "draft_same-after.txt"


def doubled_page() -> bytes:
    """A real vLLM page with its spec-decode and generation counters listed a second time, with
    other values (as two pages joined into one): the same series twice."""
    page = GOLDEN.read_text()
    again = []
    for line in page.splitlines():
        if line.startswith(("vllm:spec_decode_num", "vllm:generation_tokens_total")) and (
            "_total{" in line
        ):
            series, value = line.rsplit(" ", 1)
            series = series.replace('engine="0",model_name="tiny"', 'model_name="tiny",engine="0"')
            again.append(f"{series} {float(value) * 10}")
    return (page + "\n".join(again) + "\n").encode()


@pytest.fixture
def hostile():
    servers: list[HostileServer] = []

    def start(paths) -> HostileServer:
        server = HostileServer(paths)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def _scrape(url: str, **kwargs) -> list:
    events: list = []

    async def go() -> None:
        scraper = MetricsScraper(url + "/metrics", source=url, **kwargs)
        try:
            await scraper.scrape_once(events.append)
        finally:
            await scraper.aclose()

    asyncio.run(go())
    return events


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        (Trickle(ENDLESS), "timed out after 1 s reading /metrics"),
        (Silent(), "timed out after 1 s reading /metrics"),
        (RedirectLoop(), "redirect loop"),
    ],
    ids=["trickle", "silent", "redirect-loop"],
)
def test_a_scrape_ends_at_its_deadline_and_the_server_is_down_with_why(hostile, behaviour, reason):
    server = hostile({"/metrics": behaviour})
    events = _scrape(server.url, timeout=1.0)  # the deadline defaults to the timeout
    statuses = [e for e in events if isinstance(e, ServerStatusChanged)]
    assert [s.status for s in statuses] == ["down"]
    assert reason in statuses[0].detail
    state = SessionState(SessionInfo())
    for e in events:
        state.apply(e)
    listed = state.snapshot()["servers"][server.url]
    assert listed["status"] == "down" and reason in listed["status_detail"]


@pytest.mark.parametrize("behaviour", [Trickle(ENDLESS), Silent()], ids=["trickle", "silent"])
def test_identification_ends_at_its_deadline_with_why(hostile, behaviour):
    server = hostile({"/version": behaviour, "/v1/models": behaviour})
    identity = asyncio.run(identify(server.url, timeout=1.0))
    assert identity.models == ()
    assert identity.error is not None
    assert "timed out after 1 s reading /version" in identity.error
    assert "timed out after 1 s reading /v1/models" in identity.error


def test_a_prometheus_that_trickles_is_an_error_within_its_deadline(hostile):
    server = hostile({"/api/v1/targets": Trickle(ENDLESS), "/api/v1/query": Trickle(ENDLESS)})

    async def go():
        fleet = PrometheusFleet(server.url, timeout=1.0)
        try:
            return await fleet.read_once(lambda _e: None)
        finally:
            await fleet.aclose()

    event = asyncio.run(go())
    assert event.targets == ()
    assert event.error is not None and "timed out after 1 s reading /api/v1/" in event.error


def test_a_dcgm_exporter_page_that_trickles_is_an_error_within_its_deadline(hostile):
    server = hostile({"/metrics": Trickle(ENDLESS, every_s=0.05)})
    sampler = DcgmSampler(server.url + "/metrics", timeout=1.0)
    try:
        event = sampler.sample(0.0)
    finally:
        sampler.close()
    assert event.gpus == ()
    assert event.error == "dcgm-exporter timed out after 1 s"


def _watch_once(capsys, *urls: str) -> tuple[int, dict, str]:
    args = ["watch", "--once", "--json", "--interval", "0.1", "--gpu", "none"]
    for url in urls:
        args += ["--attach", url]
    code = main(args)
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1
    return code, json.loads(lines[0]), captured.err


@pytest.mark.slow
def test_watch_once_lists_a_trickling_server_with_why_and_exits_1(hostile, capsys):
    """The reported case: a /metrics page at one byte per half second held `watch --once` for
    122 s and ended in a TimeoutError traceback, the server never listed."""
    server = hostile({"/metrics": Trickle(ENDLESS)})
    code, snap, err = _watch_once(capsys, server.url)
    assert code == 1
    listed = snap["servers"][server.url]
    assert listed["status"] == "down"
    assert "timed out after 5 s reading /metrics" in listed["status_detail"]
    assert err.startswith("specmon watch: no server could be read: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_watch_once_lists_every_given_server_and_exits_0_when_one_was_read(hostile, sim, capsys):
    looping = hostile({"/metrics": RedirectLoop()})
    code, snap, err = _watch_once(capsys, sim.url, looping.url)
    assert code == 0 and err == ""
    assert snap["servers"][sim.url]["status"] == "up"
    assert snap["servers"][looping.url]["status"] == "down"
    assert "redirect loop" in snap["servers"][looping.url]["status_detail"]


def test_watch_once_exits_1_when_no_given_server_could_be_read(hostile, capsys):
    looping = hostile({"/metrics": RedirectLoop()})
    missing = hostile({})  # /metrics: 404
    code, snap, err = _watch_once(capsys, looping.url, missing.url)
    assert code == 1
    assert snap["servers"][looping.url]["status"] == "down"
    assert snap["servers"][missing.url]["status"] == "unreadable"
    assert "HTTP 404" in snap["servers"][missing.url]["status_detail"]
    assert looping.url in err and missing.url in err


@pytest.mark.parametrize("url", ["", "   ", "http://", "prometheus:9090"])
def test_watch_prometheus_that_is_not_a_url_is_a_usage_error(capsys, url):
    with pytest.raises(SystemExit) as exit_:
        main(["watch", "--prometheus", url, "--once"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument --prometheus: must be an http(s) URL" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("url", ["", "   ", "http://", "prometheus:9090"])
def test_fleet_that_is_not_a_url_is_a_usage_error(capsys, url):
    with pytest.raises(SystemExit) as exit_:
        main(["fleet", url, "--once"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "argument URL: must be an http(s) URL" in err and "Traceback" not in err


def test_a_page_with_duplicate_series_is_unreadable_not_resets_or_rates(hostile):
    """The reported case: an unchanging page with duplicated series read as 12,284 tok/s, AL 2.00,
    100% acceptance and 8 counter resets. Scraped twice unchanged, it must give no rate, no
    acceptance and no reset, and say why on the server's state."""
    server = hostile({"/metrics": Page(doubled_page())})
    state = SessionState(SessionInfo(), window_seconds=10.0)

    async def go() -> None:
        scraper = MetricsScraper(server.url + "/metrics", source=server.url)
        try:
            for _ in range(3):
                await scraper.scrape_once(state.apply)
        finally:
            await scraper.aclose()

    asyncio.run(go())
    listed = state.snapshot()["servers"][server.url]
    assert listed["counter_resets"] == 0
    assert listed["recent_resets"] == []
    assert listed["decode_tok_s"] is None
    assert listed["acceptance_length"] is None
    assert listed["draft_acceptance_rate"] is None
    assert listed["status"] == "unreadable"
    assert "duplicate series: vllm:" in listed["status_detail"]
    assert "is on the page 2 times" in listed["status_detail"]


def huge_page(sign: float) -> bytes:
    """A real page whose gauges and counters are all ±1e308 (finite, and 309 digits long)."""
    lines = []
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("vllm:") and not line.startswith("#"):
            series, _value = line.rsplit(" ", 1)
            line = f"{series} {sign * 1e308!r}"
        lines.append(line)
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("sign", [1.0, -1.0], ids=["1e308", "-1e308"])
def test_gauges_of_1e308_keep_every_row_on_one_line_and_json_strict(hostile, sign):
    """The reported case: 309-digit numbers spread a table row over 5 lines and KV% read `inf`."""
    from rich.console import Console

    from specmon.ui.live_console import once_text
    from specmon.ui.widgets.servers_table import table_text

    server = hostile({"/metrics": Page(huge_page(sign))})
    state = SessionState(SessionInfo())

    async def go() -> None:
        scraper = MetricsScraper(server.url + "/metrics", source=server.url)
        try:
            for _ in range(2):
                await scraper.scrape_once(state.apply)
        finally:
            await scraper.aclose()

    asyncio.run(go())
    view = state.publish()
    # a count of 1e308 is read as it is and shown as too wide; -1e308 is no count: unknown, and
    # the server's gauge note says why (core.gauge_ranges)
    running = view.servers[0].requests_running
    assert running == (1e308 if sign > 0 else None)
    note = view.servers[0].gauge_note
    assert note is not None and "vllm:kv_cache_usage_perc" in note
    assert (f"vllm:num_requests_running {sign * 1e308:.6g}" in note) == (sign < 0)
    console = Console(width=240, record=True, color_system=None)
    console.print(once_text(view, title="t", width=240))
    screen = console.export_text()
    rows = [line for line in screen.splitlines() if "127.0.0.1" in line and "TTFT" not in line]
    assert len(rows) == 1, screen  # one server, one line (and one line of its latency)
    assert "inf" not in screen and "100000000000000" not in screen
    if sign > 0:
        assert ">1e" in rows[0]  # too wide for its column (the negative gauges are unknown)
    app_rows = [line for line in table_text(view, 0).plain.splitlines() if "127.0.0.1" in line]
    assert len(app_rows) == 1 and len(app_rows[0]) < 120 and "inf" not in app_rows[0]
    line = dumps(snapshot_of(view))
    assert "Infinity" not in line and "NaN" not in line
    assert json.loads(line)["servers"][server.url]["requests_running"] == running


def test_a_failed_read_never_names_the_address_with_its_credentials(hostile):
    server = hostile({"/private/metrics": RedirectLoop()})
    url = server.url.replace("http://", "http://user:hunter2@") + "/private/metrics"
    events: list = []

    async def go() -> None:
        scraper = MetricsScraper(url, source=server.url, timeout=1.0)
        try:
            await scraper.scrape_once(events.append)
        finally:
            await scraper.aclose()

    asyncio.run(go())
    (status,) = [e for e in events if isinstance(e, ServerStatusChanged)]
    assert status.detail.startswith("/private/metrics: redirect loop")
    assert "hunter2" not in status.detail


def test_json_lines_are_strict_json_whatever_a_view_holds():
    line = dumps({"a": float("nan"), "b": [float("inf"), 1.5], "c": {"d": -1e308}})
    assert line == '{"a": null, "b": [null, 1.5], "c": {"d": -1e+308}}'
