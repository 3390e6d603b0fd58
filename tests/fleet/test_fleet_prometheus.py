"""The fleet read through a real Prometheus (the Debian package) scraping simulated servers.

Scrape interval 1 s. The AL comparison covers a span that holds all the traffic (the rate
window starts before the first request, when every counter was 0), so `rate()`'s extrapolation
cancels in the ratio and the fleet's AL equals `watch --attach`'s exactly (1e-9). With traffic
running across a window's edges the two windows differ by up to one scrape interval at each end
(docs/fleet.md).

Each test has its own Prometheus and simulated servers, as a test alone would start them, but
all of them are started together when the module begins (`worlds`): a Prometheus hands its
targets to its scrapers only on a 5 s tick after starting (hard-wired in Prometheus), so started
one test at a time they waited about 6 s each. One worker runs the module (its xdist group)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from tests.support.fleet import by_source, fleet_for, read
from tests.support.prometheus import Prometheus
from tests.support.specmon_cli import run_specmon
from tests.support.waiting import wait_for

from specmon.core.events import SessionInfo
from specmon.core.session_state import SessionState
from specmon.core.views import SessionView
from specmon.runtime.monitor import Monitor, Target
from specmon.sim.server import RunningSim, SimConfig, start_in_thread
from specmon.sources.prometheus_fleet import PrometheusFleet

pytestmark = pytest.mark.xdist_group("fleet-prometheus")


def host(sim: RunningSim) -> str:
    return sim.url.split("//", 1)[1]


@dataclass(frozen=True)
class Plan:
    """What one test starts: its simulated servers, whether a stand-in dcgm-exporter, and its
    Prometheus's jobs (from the servers' host:port and the exporter's)."""

    sims: tuple[SimConfig, ...]
    jobs: Callable[[list[str], str | None], dict[str, list[str]]]
    dcgm: bool = False


@dataclass
class World:
    """One test's servers and Prometheus (launched; the test waits for what it needs)."""

    sims: list[RunningSim]
    prom: Prometheus
    stack: ExitStack


PLANS: dict[str, Plan] = {
    "test_fleet_lists_vllm_targets_with_the_same_al_as_attach": Plan(
        (SimConfig(speed=50.0, n_spec=4, seed=1), SimConfig(speed=50.0, n_spec=6, seed=2)),
        lambda hosts, _d: {"vllm": hosts},
    ),
    "test_fleet_survives_the_prometheus_restarting": Plan(
        (SimConfig(speed=50.0, n_spec=4, seed=3),), lambda hosts, _d: {"vllm": hosts}
    ),
    "test_targets_appear_and_disappear_and_match_selects": Plan(
        (
            SimConfig(speed=50.0, n_spec=4, seed=4),
            SimConfig(speed=50.0, n_spec=4, seed=5),
            SimConfig(speed=50.0, n_spec=0, seed=6),
        ),
        lambda hosts, _d: {"vllm": [hosts[0]], "other": [hosts[1]]},
    ),
    "test_a_target_shows_its_history_and_its_hosts_gpus": Plan(
        (SimConfig(speed=50.0, n_spec=4, seed=7),),
        lambda hosts, dcgm: {"vllm": hosts, "dcgm": [dcgm or ""]},
        dcgm=True,
    ),
    "test_fleet_once_json": Plan(
        (SimConfig(speed=50.0, n_spec=4, seed=8),), lambda hosts, _d: {"vllm": hosts}
    ),
    "test_the_apps_collector_process_reads_the_fleet": Plan(
        (SimConfig(speed=50.0, n_spec=4, seed=9),), lambda hosts, _d: {"vllm": hosts}
    ),
}
"""Per test (by name): what it runs against."""


@pytest.fixture(scope="module")
def worlds(
    request: pytest.FixtureRequest, prometheus_bin: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, World]]:
    """The world of every test of this module that this run selected, all launched at once."""
    selected = {
        getattr(item, "originalname", item.name)
        for item in request.session.items
        if getattr(item, "module", None) is request.module
    }
    started: dict[str, World] = {}
    with ExitStack() as every:
        for name, plan in PLANS.items():
            if name not in selected:
                continue
            stack = every.enter_context(ExitStack())
            sims = [
                stack.enter_context(start_in_thread(c, log_sink=lambda _l: None)) for c in plan.sims
            ]
            dcgm = stack.enter_context(dcgm_exporter()) if plan.dcgm else None
            prom = Prometheus(
                prometheus_bin,
                Path(tmp_path_factory.mktemp("prom")),
                plan.jobs([host(s) for s in sims], dcgm),
            )
            stack.callback(prom.stop)
            started[name] = World(sims, prom.launch(), stack)
        for world in started.values():
            world.prom.wait_ready()
        yield started


@pytest.fixture
def world(worlds: dict[str, World], request: pytest.FixtureRequest) -> Iterator[World]:
    """This test's world; stopped when the test ends."""
    this = worlds[request.node.originalname]
    try:
        yield this
    finally:
        this.stack.close()


def wait_for_samples_before_traffic(prom: Prometheus, servers: int) -> None:
    """Until every server's counters have two samples in the Prometheus (counter 0, from before
    any traffic): the rate windows then start before the first request."""
    prom.wait_for_scrapes("count_over_time(vllm:generation_tokens_total[10m]) >= 2", servers)


def traffic(sim: RunningSim, requests: int = 3, max_tokens: int = 64) -> None:
    model = httpx.get(sim.url + "/v1/models", timeout=10).json()["data"][0]["id"]
    for i in range(requests):
        r = httpx.post(
            sim.url + "/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": f"question {i}"}],
                "max_tokens": max_tokens,
            },
            timeout=60,
        )
        r.raise_for_status()


def one_server_served(world: World, *, up: int, requests: int) -> tuple[RunningSim, Prometheus]:
    """The world's one server and its Prometheus, once `up` targets are up, the server's counters
    have samples from before the traffic, and the final values of `requests` requests are in."""
    (sim,), prom = world.sims, world.prom
    prom.wait_for_scrapes("up == 1", up)
    wait_for_samples_before_traffic(prom, 1)
    traffic(sim, requests=requests)
    prom.wait_for_counters(sim.url)
    return sim, prom


def test_fleet_lists_vllm_targets_with_the_same_al_as_attach(world: World) -> None:
    (a, b), prom = world.sims, world.prom
    attach = Monitor(
        [Target(a.url), Target(b.url)],
        lambda info: SessionState(info, window_seconds=120.0),
        interval=0.5,
    )
    attach.start()
    try:
        prom.wait_for_scrapes("up == 1", 3)  # the two servers and the Prometheus itself
        wait_for_samples_before_traffic(prom, 2)
        wait_for(  # and attach's: both windows start before the first request
            lambda: all(s.last is not None for s in attach.scrapers),
            "attach's first scrape of each server",
        )
        traffic(a)
        traffic(b)
        prom.wait_for_counters(a.url, b.url)  # the last values are in the Prometheus
        attach.scrape_all_once()
        direct = by_source(attach.view(fresh=True))
        state = SessionState(SessionInfo())
        event = read(fleet_for(prom.url), state)
    finally:
        attach.stop()
    assert event.error is None
    fleet = by_source(state.view())
    # Only the vLLM targets: the Prometheus scrapes itself too, and that is not vLLM.
    assert set(fleet) == {a.url, b.url} == set(direct)
    for url, n_spec in ((a.url, 4), (b.url, 6)):
        f, d = fleet[url], direct[url]
        assert f.origin == "prometheus" and d.origin == "metrics"
        assert f.status == "up" and f.fleet is not None and f.fleet.job == "vllm"
        assert f.per_request_note and "not available" in f.per_request_note
        assert f.n_spec == n_spec and f.spec_configured is True
        assert d.window.acceptance_length is not None and d.window.acceptance_length > 1.0
        assert f.window.acceptance_length == pytest.approx(d.window.acceptance_length, abs=1e-9)
        assert f.window.draft_acceptance_rate == pytest.approx(
            d.window.draft_acceptance_rate, abs=1e-9
        )
        assert f.window.per_position_rates == pytest.approx(d.window.per_position_rates, abs=1e-9)
        assert d.lifetime is not None and f.lifetime is not None
        assert f.lifetime.acceptance_length == pytest.approx(
            d.lifetime.acceptance_length, abs=1e-12
        )
        assert f.lifetime.generation_tokens == d.lifetime.generation_tokens
        assert f.requests_running == 0.0 and f.kv_cache_usage_frac is not None
        assert f.window.decode_tok_s is not None and f.window.decode_tok_s > 0
    # The two servers differ (n_spec 4 and 6): the rows are not one number copied.
    assert fleet[a.url].window.acceptance_length != fleet[b.url].window.acceptance_length


def test_fleet_survives_the_prometheus_restarting(world: World) -> None:
    _, prom = one_server_served(world, up=2, requests=2)
    fleet = fleet_for(prom.url, timeout=2.0)
    state = SessionState(SessionInfo())
    assert read(fleet, state).error is None
    before = state.view().servers[0]
    assert before.status == "up" and before.lifetime is not None
    al = before.lifetime.acceptance_length
    assert al is not None and al > 1.0

    prom.stop()
    failed = read(fleet, state)
    assert failed.error is not None and "cannot connect" in failed.error
    stale = state.view().servers[0]
    assert stale.status == "stale" and "Prometheus not answering" in stale.status_detail
    assert stale.lifetime is not None and stale.lifetime.acceptance_length == al  # kept
    labels = [m.label for m in state.view().markers]
    assert any("not answering" in label for label in labels)

    prom.start()  # same port, same storage
    prom.wait_for_scrapes("up == 1", 2)
    wait_for(lambda: read(fleet, state).targets, "the fleet's targets again", interval=0.5)
    fresh = state.view().servers[0]
    assert fresh.status == "up" and fresh.status_detail == ""
    assert fresh.lifetime is not None and fresh.lifetime.acceptance_length == al
    assert any("answering again" in m.label for m in state.view().markers)


def test_targets_appear_and_disappear_and_match_selects(world: World) -> None:
    (a, b, c), prom = world.sims, world.prom
    prom.wait_for_scrapes("up == 1", 3)
    wait_for_samples_before_traffic(prom, 2)
    state = SessionState(SessionInfo())
    read(fleet_for(prom.url, match='{job="vllm"}'), state)
    assert [s.source for s in state.view().servers] == [a.url]
    state = SessionState(SessionInfo())
    fleet = fleet_for(prom.url)
    read(fleet, state)
    assert {s.source for s in state.view().servers} == {a.url, b.url}

    prom.reload({"vllm": [host(a), host(c)], "other": [host(b)]})
    wait_for(lambda: c.url in by_source(_read_view(fleet, state)), "c's row", interval=0.5)
    plain = by_source(state.view())[c.url]
    assert plain.spec_configured is False  # no spec_decode series: speculation is off
    assert plain.window.acceptance_length is None  # "—", never 1.0

    prom.reload({"vllm": [host(c)], "other": [host(b)]})
    wait_for(lambda: a.url not in by_source(_read_view(fleet, state)), "a gone", interval=0.5)
    assert {s.source for s in state.view().servers} == {b.url, c.url}
    assert any("gone from the Prometheus" in m.label for m in state.view().markers)


def _read_view(fleet: PrometheusFleet, state: SessionState) -> SessionView:
    read(fleet, state)
    return state.view()


_GPU = 'gpu="{i}",UUID="GPU-{i}a",device="nvidia{i}",modelName="NVIDIA H200",Hostname="127.0.0.1"'
DCGM_PAGE = "".join(
    f"# TYPE {name} gauge\n"
    + "".join(f"{name}{{{_GPU.format(i=i)}}} {v}\n" for i, v in enumerate(values))
    for name, values in (
        ("DCGM_FI_DEV_GPU_TEMP", (63, 58)),
        ("DCGM_FI_DEV_POWER_USAGE", (412.5,)),
        ("DCGM_FI_DEV_FB_USED", (70000,)),
        ("DCGM_FI_DEV_FB_FREE", (73000,)),
    )
)


@contextmanager
def dcgm_exporter() -> Iterator[str]:
    """A stand-in dcgm-exporter on loopback serving a fixed page (names of reference §6)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = DCGM_PAGE.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_target_shows_its_history_and_its_hosts_gpus(world: World) -> None:
    a, prom = one_server_served(world, up=3, requests=2)
    # more than 5 s of samples: the history below can reach 4 s into the past
    prom.wait_for_scrapes("count_over_time(vllm:generation_tokens_total[10m]) >= 7", 1)
    state = SessionState(SessionInfo())
    event = read(fleet_for(prom.url, rate_window_s=5.0), state)
    assert len(event.history) == 1
    server = state.view().servers[0]
    assert server.fleet is not None and server.fleet.history_step_s == 1.0
    h = server.history
    # Points from before this session began: the range read reaches back into the past (five
    # 1 s steps span 4 s; the last may fall on the read's own instant, hence the tolerance).
    assert len(h.t) >= 5 and h.t[0] <= event.t - 4.0 + 1e-3
    assert list(h.t) == sorted(h.t)
    assert any(al is not None and al > 1.0 for al in h.acceptance_length)
    assert any(v is not None and v > 0 for v in h.decode_tok_s)
    # dcgm-exporter series of the same host (its Hostname label) are the target's GPUs; the
    # exporter itself is not a vLLM target.
    assert [s.source for s in state.view().servers] == [a.url]
    gpu0, gpu1 = server.fleet.gpus
    assert (gpu0.index, gpu0.name, gpu0.temperature_c, gpu0.power_w) == (
        0,
        "NVIDIA H200",
        63,
        412.5,
    )
    assert gpu0.memory_used_bytes == 70000 * 1024 * 1024
    assert gpu0.memory_total_bytes == 143000 * 1024 * 1024
    assert gpu1.temperature_c == 58 and gpu1.power_w is None  # a missing series: "—"


def test_fleet_once_json(world: World) -> None:
    a, prom = one_server_served(world, up=2, requests=1)
    done = run_specmon("fleet", prom.url, "--once", "--json", "--rate-window", "30")
    url = prom.url
    prom.stop()
    down = run_specmon("fleet", url, "--once", "--json")
    assert done.returncode == 0, done.stderr
    snap = json.loads(done.stdout)
    server = snap["servers"][a.url]
    assert server["origin"] == "prometheus" and server["status"] == "up"
    assert server["acceptance_length"] > 1.0
    assert server["fleet"]["job"] == "vllm" and server["fleet"]["rate_window_seconds"] == 30
    assert "not available" in server["per_request_note"]
    assert down.returncode == 1
    assert down.stderr.strip().count("\n") == 0 and "cannot connect" in down.stderr
    assert json.loads(down.stdout)["servers"] == {}


def test_the_apps_collector_process_reads_the_fleet(world: World) -> None:
    """On a terminal `specmon fleet` runs the collector in its own process (the Textual
    app's path): the fleet source goes there in SessionConfig.fleet and its rows come back."""
    from specmon.runtime.fleet_run import FleetSpec
    from specmon.runtime.session import CollectorProcess, SessionConfig

    (a,), prom = world.sims, world.prom
    prom.wait_for_scrapes("up == 1", 2)
    spec = FleetSpec(prom.url, '{job="vllm"}', interval=0.5, rate_window_s=30.0)
    session = CollectorProcess(SessionConfig((), fleet=spec), SessionState)
    session.start()
    try:
        view = wait_for(
            lambda: (v := session.view(fresh=True)) is not None and v.servers and v,
            "a fleet row from the collector process",
            timeout=60,
            interval=0.5,
        )
    finally:
        session.stop()
    (server,) = view.servers
    assert server.source == a.url and server.origin == "prometheus"
