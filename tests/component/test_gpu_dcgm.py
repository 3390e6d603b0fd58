"""Remote GPU readings from a dcgm-exporter page: mapping, units, blanks, both names, bad pages."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import httpx
import pytest

from specmon.core.events import GpuReading
from specmon.sources.gpu.dcgm import DcgmSampler, filter_page, is_blank, parse_dcgm_page

MIB = 1024 * 1024
BLANK_INT64 = "9223372036854775794"  # DCGM_INT64_BLANK + 2 (DCGM_INT64_NOT_SUPPORTED)


def labels(gpu: int, host_label: str = "Hostname", **extra: str) -> str:
    pairs = {
        "gpu": str(gpu),
        "UUID": f"GPU-aaaa-{gpu}",
        "pci_bus_id": f"00000000:0{gpu}:00.0",
        "device": f"nvidia{gpu}",
        "modelName": "NVIDIA H100 80GB HBM3",
        host_label: "gpu-box-1",
        "DCGM_FI_DRIVER_VERSION": "580.159.04",
        **extra,
    }
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs.items()) + "}"


def gauge(name: str, rows: list[tuple[str, str]]) -> str:
    lines = [f"# HELP {name} {name} help text.", f"# TYPE {name} gauge"]
    lines += [f"{name}{lab} {value}" for lab, value in rows]
    return "\n".join(lines) + "\n"


def page(host_label: str = "Hostname", reasons_name: str = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"):
    l0, l1 = labels(0, host_label), labels(1, host_label)
    return "".join(
        [
            gauge("DCGM_FI_DEV_SM_CLOCK", [(l0, "1980"), (l1, "345")]),
            gauge("DCGM_FI_DEV_MEM_CLOCK", [(l0, "2619"), (l1, "2619")]),
            gauge("DCGM_FI_DEV_GPU_TEMP", [(l0, "67"), (l1, "31")]),
            gauge("DCGM_FI_DEV_MEMORY_TEMP", [(l0, BLANK_INT64), (l1, BLANK_INT64)]),
            gauge("DCGM_FI_DEV_POWER_USAGE", [(l0, "612.5"), (l1, "71.25")]),
            gauge("DCGM_FI_DEV_GPU_UTIL", [(l0, "100"), (l1, "0")]),
            gauge("DCGM_FI_DEV_FB_FREE", [(l0, "60000"), (l1, "80000")]),
            gauge("DCGM_FI_DEV_FB_USED", [(l0, "20972"), (l1, "972")]),
            gauge("DCGM_FI_DEV_FB_RESERVED", [(l0, "587"), (l1, "587")]),
            gauge(reasons_name, [(l0, "36"), (l1, "1")]),
            gauge("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", [(l0, "700"), (l1, BLANK_INT64)]),
            # a counter on the same page that is not read (its _total name stays unparsed)
            "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
            f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{l0} 123456789\n",
        ]
    )


def test_a_default_page_maps_every_field_with_its_unit():
    event = parse_dcgm_page(page(), t=5.0, source="http://gpu-box-1:9400/metrics")
    assert event.error is None
    assert event.source == "http://gpu-box-1:9400/metrics"
    assert event.t == 5.0
    assert event.gpus == (
        GpuReading(
            index=0,
            name="NVIDIA H100 80GB HBM3",
            uuid="GPU-aaaa-0",
            host="gpu-box-1",
            temperature_c=67.0,
            slowdown_temperature_c=None,  # not on the default page
            memory_used_bytes=20972 * MIB,
            memory_total_bytes=(20972 + 60000 + 587) * MIB,  # no FB_TOTAL: used+free+reserved
            utilization_pct=100.0,
            power_w=612.5,
            power_limit_w=700.0,
            sm_clock_mhz=1980.0,
            memory_clock_mhz=2619.0,
            clock_event_reasons=("sw_power_cap", "sw_thermal_slowdown"),  # 36 = 0x24
        ),
        GpuReading(
            index=1,
            name="NVIDIA H100 80GB HBM3",
            uuid="GPU-aaaa-1",
            host="gpu-box-1",
            temperature_c=31.0,
            memory_used_bytes=972 * MIB,
            memory_total_bytes=(972 + 80000 + 587) * MIB,
            utilization_pct=0.0,
            power_w=71.25,
            power_limit_w=None,  # blank sentinel, never 9.2e18 W
            sm_clock_mhz=345.0,
            memory_clock_mhz=2619.0,
            clock_event_reasons=("gpu_idle",),
        ),
    )


def test_the_new_lowercase_host_label_is_read():
    event = parse_dcgm_page(page(host_label="hostname"), t=0.0, source="x")
    assert [g.host for g in event.gpus] == ["gpu-box-1", "gpu-box-1"]


def test_the_old_throttle_reasons_name_is_read():
    event = parse_dcgm_page(
        page(reasons_name="DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"), t=0.0, source="x"
    )
    assert event.gpus[0].clock_event_reasons == ("sw_power_cap", "sw_thermal_slowdown")


def test_the_new_reasons_name_wins_when_both_are_present():
    text = page() + gauge("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", [(labels(0), "64")])
    event = parse_dcgm_page(text, t=0.0, source="x")
    assert event.gpus[0].clock_event_reasons == ("sw_power_cap", "sw_thermal_slowdown")


def test_fb_total_wins_over_the_sum_and_the_mgmt_limit_is_a_fallback():
    l0 = labels(0)
    text = (
        gauge("DCGM_FI_DEV_FB_USED", [(l0, "1000")])
        + gauge("DCGM_FI_DEV_FB_FREE", [(l0, "2000")])
        + gauge("DCGM_FI_DEV_FB_TOTAL", [(l0, "81559")])
        + gauge("DCGM_FI_DEV_POWER_MGMT_LIMIT", [(l0, "650")])
        + gauge("DCGM_FI_DEV_SLOWDOWN_TEMP", [(l0, "87")])
    )
    reading = parse_dcgm_page(text, t=0.0, source="x").gpus[0]
    assert reading.memory_total_bytes == 81559 * MIB
    assert reading.memory_used_bytes == 1000 * MIB
    assert reading.power_limit_w == 650.0
    assert reading.slowdown_temperature_c == 87.0
    assert reading.temperature_c is None
    assert reading.clock_event_reasons is None  # absent, not "no reason"


def test_missing_fields_are_none_never_zero():
    text = gauge("DCGM_FI_DEV_GPU_TEMP", [(labels(0), "40")])
    reading = parse_dcgm_page(text, t=0.0, source="x").gpus[0]
    assert reading.temperature_c == 40.0
    for field in (
        "memory_used_bytes",
        "memory_total_bytes",
        "utilization_pct",
        "power_w",
        "power_limit_w",
        "sm_clock_mhz",
        "memory_clock_mhz",
        "clock_event_reasons",
    ):
        assert getattr(reading, field) is None, field


def test_used_without_free_gives_no_total():
    text = gauge("DCGM_FI_DEV_FB_USED", [(labels(0), "1000")])
    reading = parse_dcgm_page(text, t=0.0, source="x").gpus[0]
    assert (reading.memory_used_bytes, reading.memory_total_bytes) == (1000 * MIB, None)


@pytest.mark.parametrize(
    "value",
    [9.223372036854775794e18, 140737488355328.0, 2147483632.0, 2147483647.0, float("nan")],
)
def test_dcgm_blank_sentinels_are_recognised(value):
    assert is_blank(value)


@pytest.mark.parametrize("value", [0.0, 67.0, 81559.0, 700.0, 2147483631.0])
def test_real_values_are_not_blank(value):
    assert not is_blank(value)


def test_mig_instances_are_kept_apart():
    a = labels(0, GPU_I_ID="1", GPU_I_PROFILE="3g.40gb")
    b = labels(0, GPU_I_ID="2", GPU_I_PROFILE="3g.40gb")
    text = gauge("DCGM_FI_DEV_FB_USED", [(a, "100"), (b, "200")])
    gpus = parse_dcgm_page(text, t=0.0, source="x").gpus
    assert sorted(g.memory_used_bytes for g in gpus) == [100 * MIB, 200 * MIB]
    assert gpus[0].name == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"


def test_a_page_without_dcgm_metrics_says_so():
    text = "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1.0\n"
    event = parse_dcgm_page(text, t=0.0, source="x")
    assert event.gpus == ()
    assert event.error is not None
    assert "no dcgm-exporter GPU metrics" in event.error


def test_garbage_page_is_a_clear_error():
    event = parse_dcgm_page("\x00\x01<html>not metrics</html>", t=0.0, source="x")
    assert event.gpus == ()
    assert event.error is not None
    assert event.error.startswith("no GPU: ")


def test_a_broken_dcgm_line_makes_the_page_unreadable():
    text = page() + 'DCGM_FI_DEV_GPU_TEMP{gpu="0" 12 oops\n'
    event = parse_dcgm_page(text, t=0.0, source="x")
    assert event.gpus == ()
    assert event.error is not None
    assert event.error.startswith("dcgm-exporter page unreadable")


def test_broken_lines_of_other_families_do_not_matter():
    text = "garbage line {{{\n" + page() + "vllm:thing{oops 1 2 3\n"
    event = parse_dcgm_page(text, t=0.0, source="x")
    assert event.error is None
    assert len(event.gpus) == 2


def test_filter_keeps_exact_names_only():
    text = (
        "# TYPE DCGM_FI_DEV_FB_USED_PERCENT gauge\n"
        'DCGM_FI_DEV_FB_USED_PERCENT{gpu="0"} 0.5\n'
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        'DCGM_FI_DEV_FB_USED{gpu="0"} 10\n'
    )
    assert (
        filter_page(text) == '# TYPE DCGM_FI_DEV_FB_USED gauge\nDCGM_FI_DEV_FB_USED{gpu="0"} 10\n'
    )


# ---------------------------------------------------------------- over HTTP


def mock_sampler(handler, **kwargs) -> DcgmSampler:
    return DcgmSampler(
        "http://gpu-box-1:9400/metrics", transport=httpx.MockTransport(handler), **kwargs
    )


def test_sampler_reads_a_served_page():
    sampler = mock_sampler(lambda request: httpx.Response(200, text=page()))
    event = sampler.sample(7.0)
    sampler.close()
    assert (event.t, event.source, event.error) == (7.0, "http://gpu-box-1:9400/metrics", None)
    assert [g.temperature_c for g in event.gpus] == [67.0, 31.0]


def test_http_error_status_is_named():
    event = mock_sampler(lambda request: httpx.Response(503, text="busy")).sample(0.0)
    assert (event.gpus, event.error) == ((), "dcgm-exporter answered HTTP 503")


def test_unreachable_exporter_is_an_error_sample():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    event = mock_sampler(refuse).sample(0.0)
    assert event.gpus == ()
    assert event.error is not None
    assert event.error.startswith("dcgm-exporter unreachable")


def test_timeout_is_named():
    def slow(request):
        raise httpx.ReadTimeout("timed out", request=request)

    event = mock_sampler(slow, timeout=0.5).sample(0.0)
    assert event.error == "dcgm-exporter timed out after 0.5 s"


def test_a_page_over_the_size_cap_is_not_read():
    huge = page() + "# " + "x" * 5000 + "\n"
    event = mock_sampler(lambda request: httpx.Response(200, text=huge), max_bytes=4096).sample(0.0)
    assert event.gpus == ()
    assert event.error == "dcgm-exporter page larger than 4096 bytes; not read"


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def served_page() -> Iterator[str]:
    handler = type("H", (_Handler,), {"body": page(host_label="hostname").encode()})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_sampler_reads_a_real_local_http_server(served_page):
    sampler = DcgmSampler(served_page, timeout=5.0)
    try:
        first = sampler.sample(1.0)
        second = sampler.sample(2.0)
    finally:
        sampler.close()
    assert first.error is None
    assert [g.host for g in first.gpus] == ["gpu-box-1", "gpu-box-1"]
    assert first.gpus == second.gpus


def test_a_closed_port_is_an_error_not_an_exception():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    event = DcgmSampler(f"http://127.0.0.1:{port}/metrics", timeout=2.0).sample(0.0)
    assert event.gpus == ()
    assert event.error is not None
    assert event.error.startswith("dcgm-exporter unreachable")
