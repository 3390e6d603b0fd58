"""The fleet's pure parts and its source against a scripted Prometheus (httpx.MockTransport):
selectors, the fold into server views, the recording codec, dcgm GPUs, and bad answers."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from specmon.core.events import FleetHistory, FleetSampled, FleetTarget, GpuReading, SessionInfo
from specmon.core.fleet_state import FleetState
from specmon.core.promql import MatchError, fleet_expressions, matches, parse_match, tagged
from specmon.core.recording_format import EventDecoder, EventEncoder
from specmon.core.session_state import SessionState
from specmon.sources.prometheus_fleet import PrometheusFleet

PROM = "http://prom:9090"


def test_parse_match_reads_prometheus_selectors() -> None:
    assert parse_match(None) == () and parse_match("{}") == ()
    m = parse_match('{job="vllm", instance=~"gpu-.*:8000",env!="dev",x!~"a|b"}')
    assert m == (
        ("job", "=", "vllm"),
        ("instance", "=~", "gpu-.*:8000"),
        ("env", "!=", "dev"),
        ("x", "!~", "a|b"),
    )
    assert parse_match(r'{job="a\"b"}') == (("job", "=", 'a"b'),)
    for bad in ('job="vllm"', "{job=vllm}", '{job="a" env="b"}', '{job=~"("}'):
        with pytest.raises(MatchError):
            parse_match(bad)
    labels = {"job": "vllm", "instance": "gpu-1:8000", "env": "prod"}
    assert matches(labels, m)
    assert not matches({**labels, "env": "dev"}, m)
    assert not matches({**labels, "instance": "gpu-1:8000x"}, m)  # regexes are anchored


def test_the_query_uses_the_dashboards_promql_with_the_selector() -> None:
    q = tagged(fleet_expressions(parse_match('{job="vllm"}'), 60))
    assert 'rate(vllm:spec_decode_num_accepted_tokens_total{job="vllm"}[60s])' in q
    per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    assert f'sum by (instance, job, position) (rate({per_pos}{{job="vllm"}}[60s]))' in q
    assert q.count(" or label_replace(") == 12  # 13 quantities in one query


def target(**kw: Any) -> FleetTarget:
    kw.setdefault("instance", "gpu-1:8000")
    kw.setdefault("job", "vllm")
    kw.setdefault("health", "up")
    kw.setdefault("url", "http://gpu-1:8000/metrics")
    return FleetTarget(**kw)


def sampled(t: float, *targets: FleetTarget, **kw: Any) -> FleetSampled:
    return FleetSampled(t=t, source=PROM, rate_window_s=60.0, targets=targets, **kw)


def test_fold_computes_al_like_the_dashboard_and_dashes_what_is_missing() -> None:
    state = SessionState(SessionInfo())
    state.apply(
        sampled(
            10.0,
            target(
                generation_tok_s=120.0,
                drafts_per_s=20.0,
                draft_tokens_per_s=80.0,
                accepted_per_s=50.0,
                accepted_per_pos_per_s=(18.0, 14.0, 10.0, 8.0),
                drafts=1000.0,
                accepted_tokens=3000.0,
                draft_tokens=4000.0,
                accepted_per_pos=(900.0, 800.0, 700.0, 600.0),
                requests_running=2.0,
            ),
            target(instance="gpu-2:8000", url=None, drafts_per_s=0.0, accepted_per_s=0.0),
        )
    )
    a, b = state.view().servers
    assert a.source == "http://gpu-1:8000" and b.source == "gpu-2:8000"
    assert a.window.acceptance_length == 1 + 50 / 20
    assert a.window.draft_acceptance_rate == 50 / 80
    assert a.window.per_position_rates == (0.9, 0.7, 0.5, 0.4)
    assert a.lifetime is not None and a.lifetime.acceptance_length == 4.0
    assert a.n_spec == 4 and a.requests_running == 2.0 and a.requests_waiting is None
    assert a.window.decode_tok_s == 120.0 and a.origin == "prometheus"
    # No drafts in the window: "—", never 1.0; missing series: None.
    assert b.window.acceptance_length is None and b.kv_cache_usage_frac is None


def test_a_failed_read_keeps_values_stale_and_a_missing_target_goes() -> None:
    fleet = FleetState()
    fleet.apply(
        sampled(1.0, target(drafts_per_s=1.0, accepted_per_s=2.0), target(instance="b:1", url=None))
    )
    changes = fleet.apply(sampled(2.0, error="cannot connect to http://prom:9090"))
    views = fleet.views()
    assert [v.status for v in views] == ["stale", "stale"]
    assert views[0].window.acceptance_length == 3.0  # the last value, kept
    assert "last values from 1 s ago" in views[0].status_detail
    assert any("not answering" in label for _, label in changes)
    changes = fleet.apply(sampled(3.0, target(drafts_per_s=1.0, accepted_per_s=1.0)))
    (view,) = fleet.views()
    assert view.status == "up" and view.window.acceptance_length == 2.0
    assert {label for _, label in changes} >= {
        "Prometheus http://prom:9090: answering again",
        "b:1: gone from the Prometheus",
    }
    fleet.apply(sampled(4.0, target(health="down", last_error="connection refused")))
    (view,) = fleet.views()
    assert view.status == "down" and "connection refused" in view.status_detail


def test_two_jobs_scraping_one_address_get_two_names() -> None:
    fleet = FleetState()
    fleet.apply(sampled(1.0, target(job="a"), target(job="b")))
    assert [v.source for v in fleet.views()] == ["http://gpu-1:8000", "http://gpu-1:8000 (b)"]


def test_range_history_comes_before_the_live_points() -> None:
    fleet = FleetState(history_points=10)
    hist = FleetHistory(
        instance="gpu-1:8000",
        job="vllm",
        step_s=15.0,
        ago_s=(30.0, 15.0, 0.0),
        generation_tok_s=(100.0, None, 90.0),
        accepted_per_s=(30.0, None, 20.0),
        drafts_per_s=(10.0, None, 10.0),
        requests_running=(1.0, None, 1.0),
        kv_cache_usage_frac=(0.5, None, 0.4),
    )
    fleet.apply(sampled(100.0, target(), history=(hist,)))
    fleet.apply(sampled(105.0, target(drafts_per_s=1.0, accepted_per_s=1.0)))
    h = fleet.views()[0].history
    assert h.t == (70.0, 85.0, 100.0, 105.0)
    assert h.acceptance_length == (4.0, None, 3.0, 2.0)
    assert fleet.views()[0].fleet is not None and fleet.views()[0].fleet.history_step_s == 15.0


def test_recording_round_trip_and_credentials_removed() -> None:
    event = sampled(
        5.0,
        target(
            url="http://user:pw@gpu-1:8000/metrics",
            last_error="token sk-abcdefghijklmnopqrstuv refused",
            accepted_per_pos_per_s=(1.0, 0.5),
            gpus=(GpuReading(index=0, name="NVIDIA H200", temperature_c=61.0, host="gpu-1"),),
        ),
        history=(
            FleetHistory(
                "gpu-1:8000",
                "vllm",
                15.0,
                (15.0, 0.0),
                (1.0, None),
                (1.0, 2.0),
                (1.0, 1.0),
                (0.0, 1.0),
                (None, 0.5),
            ),
        ),
    )
    data = json.loads(json.dumps(EventEncoder(secrets=("pw",)).encode(event)))
    assert "user:pw" not in json.dumps(data)
    back = EventDecoder().decode(data)
    assert isinstance(back, FleetSampled)
    assert back.targets[0].url == "http://gpu-1:8000/metrics"
    assert back.targets[0].gpus == event.targets[0].gpus
    assert back.history == event.history
    assert back.targets[0].accepted_per_pos_per_s == (1.0, 0.5)
    failed = sampled(6.0, error="cannot connect")
    assert EventDecoder().decode(EventEncoder().encode(failed)) == failed


def vector(*rows: tuple[dict[str, str], float | str]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": m, "value": [1.0, str(v)]} for m, v in rows],
        },
    }


MATRIX = {"status": "success", "data": {"resultType": "matrix", "result": []}}
GPU0 = {"Hostname": "gpu-1", "gpu": "0"}


def scripted(handler: Any) -> PrometheusFleet:
    return PrometheusFleet(
        PROM, transport=httpx.MockTransport(handler), wall=lambda: 1000.0, history_every_s=1e9
    )


def read(fleet: PrometheusFleet) -> tuple[FleetSampled, SessionState]:
    state = SessionState(SessionInfo())
    event = asyncio.run(fleet.read_once(state.apply))
    return event, state


def test_source_falls_back_to_up_and_matches_dcgm_gpus_by_host() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/api/v1/targets":
            return httpx.Response(404, text="not here")
        if request.url.path == "/api/v1/query_range":
            return httpx.Response(
                200, json={"status": "success", "data": {"resultType": "matrix", "result": []}}
            )
        q = request.url.params["query"]
        if q.startswith("up{"):
            return httpx.Response(
                200,
                json=vector(
                    ({"instance": "gpu-1:8000", "job": "vllm"}, 1),
                    ({"instance": "db:5432", "job": "db"}, 1),
                ),
            )
        if "DCGM" in q:
            return httpx.Response(
                200,
                json=vector(
                    (
                        {
                            "specmon_q": "DCGM_FI_DEV_GPU_TEMP",
                            "Hostname": "gpu-1",
                            "gpu": "0",
                            "modelName": "NVIDIA H200",
                        },
                        64,
                    ),
                    ({"specmon_q": "DCGM_FI_DEV_FB_USED", "Hostname": "gpu-1", "gpu": "0"}, 1024),
                    ({"specmon_q": "DCGM_FI_DEV_FB_FREE", "Hostname": "gpu-1", "gpu": "0"}, 1024),
                    ({"specmon_q": "DCGM_FI_DEV_GPU_TEMP", "Hostname": "other", "gpu": "0"}, 30),
                ),
            )
        return httpx.Response(
            200,
            json=vector(
                ({"instance": "gpu-1:8000", "job": "vllm", "specmon_q": "drafts_rate"}, 2),
                ({"instance": "gpu-1:8000", "job": "vllm", "specmon_q": "acc_rate"}, 3),
                ({"instance": "gpu-1:8000", "job": "vllm", "specmon_q": "kv"}, "NaN"),
            ),
        )

    event, state = read(scripted(handler))
    assert event.error is None and "/api/v1/query_range" in seen
    (server,) = state.view().servers  # db:5432 has no vllm: series
    assert server.source == "gpu-1:8000" and server.window.acceptance_length == 2.5
    assert server.kv_cache_usage_frac is None  # NaN is not a value
    assert server.fleet is not None
    (gpu,) = server.fleet.gpus
    assert gpu.name == "NVIDIA H200" and gpu.temperature_c == 64
    assert gpu.memory_total_bytes == 2048 * 1024 * 1024


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (httpx.Response(503, text="overloaded"), "not a JSON answer"),
        (
            httpx.Response(400, json={"status": "error", "error": "parse error at char 3"}),
            "parse error",
        ),
        (
            httpx.Response(
                200, json={"status": "success", "data": {"resultType": "matrix", "result": []}}
            ),
            "expected a vector",
        ),
    ],
)
def test_bad_answers_are_errors_with_the_reason(answer: httpx.Response, said: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/targets":
            return httpx.Response(200, json={"status": "success", "data": {"activeTargets": []}})
        return answer

    event, _ = read(scripted(handler))
    assert event.error is not None and said in event.error and event.targets == ()


def test_a_slow_prometheus_is_an_error_not_a_hang() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    event, state = read(scripted(handler))
    assert event.error is not None and "timed out after" in event.error
    assert any("not answering" in m.label for m in state.view().markers)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--attach", "http://a:8000", "--prometheus", "http://p:9090"], "not allowed with"),
        (["--attach", "http://a:8000", "--match", '{job="x"}'], "--match goes with --prometheus"),
        (["--prometheus", "p:9090"], "argument --prometheus: must be an http(s) URL"),
        (["--prometheus", "http://p:9090", "--match", "job=x"], "--match must look like"),
        (["--prometheus", "http://p:9090", "--export", "x:y"], "--export port must be"),
        (["--prometheus", "http://p:9090", "--gpu", "local"], "--gpu goes with --attach"),
    ],
)
def test_watch_refuses_bad_fleet_arguments(args: list[str], said: str) -> None:
    from tests.support.specmon_cli import run_specmon

    done = run_specmon("watch", *args, "--once", timeout=60)
    assert done.returncode == 2
    assert said in done.stderr


def test_watch_once_names_the_prometheus_and_says_what_is_not_available() -> None:
    from rich.console import Console

    from specmon.ui.live_console import once_text

    state = SessionState(SessionInfo())
    gpu = GpuReading(index=0, name="NVIDIA H200", temperature_c=61.0, host="gpu-1")
    state.apply(
        sampled(
            1.0,
            target(drafts_per_s=2.0, accepted_per_s=5.0, generation_tok_s=140.0, gpus=(gpu,)),
            target(instance="gpu-2:8000", url=None, health="down", last_error="refused\x1b[2J"),
        )
    )
    console = Console(record=True, width=200, color_system=None)
    console.print(once_text(state.view(), title="specmon watch", width=200))
    text = console.export_text()
    assert "2 target(s) read through Prometheus http://prom:9090" in text
    assert "PromQL rate over 60 s" in text
    assert "per-request acceptance is not available in this mode" in text
    assert "http://gpu-1:8000" in text and "3.50" in text  # AL = 1 + 5/2
    assert "NVIDIA H200" in text and "61" in text
    assert "down" in text and "\x1b" not in text  # the Prometheus's error text, shown literally


def test_a_recorded_fleet_session_replays_to_the_same_rows(tmp_path: Any) -> None:
    from specmon.runtime.fleet_run import FleetSpec, make_fleet
    from specmon.runtime.monitor import Monitor
    from specmon.sources.recording_player import RecordingPlayer, read_recording

    answers = iter([2.0, 4.0])

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v1/targets":
            return httpx.Response(
                200,
                json={
                    "status": "success",
                    "data": {
                        "activeTargets": [
                            {
                                "labels": {"instance": "gpu-1:8000", "job": "vllm"},
                                "scrapeUrl": "http://gpu-1:8000/metrics",
                                "health": "up",
                            }
                        ]
                    },
                },
            )
        if request.url.path == "/api/v1/query_range":
            return httpx.Response(200, json=MATRIX)
        if "DCGM" in request.url.params["query"]:
            return httpx.Response(200, json=vector())
        key = {"instance": "gpu-1:8000", "job": "vllm"}
        return httpx.Response(
            200,
            json=vector(
                ({**key, "specmon_q": "drafts_rate"}, 2),
                ({**key, "specmon_q": "acc_rate"}, next(answers)),
                ({**key, "specmon_q": "pos_rate", "position": "0"}, 1.5),
            ),
        )

    path = tmp_path / "fleet.ndjson"
    monitor = Monitor([], SessionState, record=path)
    monitor.start(run_loops=False)
    try:
        fleet = make_fleet(monitor, FleetSpec(PROM))
        fleet._client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        for _ in range(2):
            monitor.hub.submit(fleet.read_once(monitor.hub.emit)).result(10)
        live = monitor.snapshot()
    finally:
        monitor.stop()
    recording = read_recording(path)
    assert recording.problems == []
    replayed = SessionState(recording.info)
    asyncio.run(RecordingPlayer(path).run(replayed.apply))
    again = replayed.snapshot()
    assert live["servers"]["http://gpu-1:8000"]["acceptance_length"] == 3.0
    assert again["servers"] == live["servers"]
