"""Remote GPU readings: NVIDIA dcgm-exporter's Prometheus page (default `http://host:9400/metrics`).

Maps dcgm-exporter's gauges onto the same `GpuReading` the local NVML sampler produces, in the same
units (°C, bytes, %, W, MHz, decoded clock-event reasons). The page is fetched within one deadline
(the timeout, over the whole read: sources/http_read.py) and a size cap, filtered to the families
read here (so unrelated or broken lines elsewhere on the page do not matter), and parsed with
prometheus_client's text parser. DCGM's "blank" values (no sensor, field not supported; ~9.22e18
and friends) become None, shown "—".

Labels: `gpu` (index), `UUID`, `modelName`, MIG's `GPU_I_ID`/`GPU_I_PROFILE`, and the host label,
`Hostname` in older releases and `hostname` since 2026 — both are read.
"""

from __future__ import annotations

import logging
import math

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specmon.core.events import GpuReading, GpuSampled
from specmon.core.families import MAX_PAGE_BYTES
from specmon.core.gpu_reasons import decode_clock_event_reasons, mask_from_float
from specmon.sources.http_read import (
    MAX_REDIRECTS,
    HttpDeadline,
    HttpReadError,
    HttpStatus,
    HttpTooLarge,
    read_answer_blocking,
)

log = logging.getLogger(__name__)

MIB = 1024 * 1024

TEMP = "DCGM_FI_DEV_GPU_TEMP"
SLOWDOWN_TEMP = "DCGM_FI_DEV_SLOWDOWN_TEMP"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
FB_TOTAL = "DCGM_FI_DEV_FB_TOTAL"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"
ENFORCED_POWER_LIMIT = "DCGM_FI_DEV_ENFORCED_POWER_LIMIT"
POWER_MGMT_LIMIT = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"
MEM_CLOCK = "DCGM_FI_DEV_MEM_CLOCK"
CLOCKS_EVENT_REASONS = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"
CLOCK_THROTTLE_REASONS = "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
"""The pre-DCGM-3.3 name of CLOCKS_EVENT_REASONS; both are read, the new one wins."""

READ_METRICS = frozenset(
    {
        TEMP,
        SLOWDOWN_TEMP,
        FB_USED,
        FB_FREE,
        FB_RESERVED,
        FB_TOTAL,
        GPU_UTIL,
        POWER_USAGE,
        ENFORCED_POWER_LIMIT,
        POWER_MGMT_LIMIT,
        SM_CLOCK,
        MEM_CLOCK,
        CLOCKS_EVENT_REASONS,
        CLOCK_THROTTLE_REASONS,
    }
)
"""Every dcgm-exporter metric this reader uses; other lines of the page are skipped unparsed."""

DEFAULT_MAX_BYTES = MAX_PAGE_BYTES
"""A dcgm-exporter page for 8 GPUs is ~100 KB; anything past this cap is not a page to parse."""

_FP64_BLANK = 140737488355328.0  # DCGM_FP64_BLANK (2**47); DCGM_INT64_BLANK (~9.22e18) is above
_INT32_BLANK_LOW, _INT32_BLANK_HIGH = 0x7FFFFFF0, 0x7FFFFFFF  # DCGM_INT32_BLANK .. its maximum


class DcgmPageError(ValueError):
    """The page could not be read as dcgm-exporter metrics."""


def is_blank(value: float) -> bool:
    """True for DCGM's "blank" sentinels (no value) and for NaN/inf."""
    if not math.isfinite(value):
        return True
    return value >= _FP64_BLANK or _INT32_BLANK_LOW <= value <= _INT32_BLANK_HIGH


def _metric_name(line: str) -> str:
    end = len(line)
    for stop in ("{", " ", "\t"):
        position = line.find(stop)
        if position != -1:
            end = min(end, position)
    return line[:end]


def filter_page(text: str) -> str:
    """Only the lines (samples and their # TYPE/# HELP) of the metrics in READ_METRICS."""
    kept: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(maxsplit=3)
            if len(parts) >= 3 and parts[1] in ("TYPE", "HELP") and parts[2] in READ_METRICS:
                kept.append(line)
        elif _metric_name(line) in READ_METRICS:
            kept.append(line)
    return "\n".join(kept) + "\n" if kept else ""


def parse_dcgm_page(text: str, *, t: float, source: str) -> GpuSampled:
    """The GPUs on a dcgm-exporter page as one `GpuSampled`; never raises.

    A page with no dcgm-exporter samples, or whose dcgm-exporter lines are not Prometheus text,
    gives `gpus=()` and an `error` that says so.
    """
    try:
        gpus = _parse(text)
    except DcgmPageError as exc:
        return GpuSampled(t=t, source=source, gpus=(), error=str(exc))
    return GpuSampled(t=t, source=source, gpus=gpus)


_Key = tuple[str, str, str, str]  # host, gpu index, UUID, MIG instance


def _parse(text: str) -> tuple[GpuReading, ...]:
    filtered = filter_page(text)
    if not filtered:
        raise DcgmPageError(
            "no GPU: the page has no dcgm-exporter GPU metrics (is this a dcgm-exporter URL?)"
        )
    values: dict[_Key, dict[str, float | None]] = {}
    labels_of: dict[_Key, dict[str, str]] = {}
    try:
        for family in text_string_to_metric_families(filtered):
            for sample in family.samples:
                if sample.name not in READ_METRICS:
                    continue
                labels = sample.labels
                key = (
                    labels.get("hostname") or labels.get("Hostname") or "",
                    labels.get("gpu", ""),
                    labels.get("UUID", ""),
                    labels.get("GPU_I_ID", ""),
                )
                labels_of.setdefault(key, dict(labels))
                value = float(sample.value)
                values.setdefault(key, {})[sample.name] = None if is_blank(value) else value
    except (ValueError, TypeError, IndexError) as exc:
        raise DcgmPageError(f"dcgm-exporter page unreadable: {exc}") from exc
    readings = [
        _reading(position, labels_of[key], fields)
        for position, (key, fields) in enumerate(values.items())
    ]
    readings.sort(key=lambda r: (r.host or "", r.index))
    return tuple(readings)


def _reading(position: int, labels: dict[str, str], fields: dict[str, float | None]) -> GpuReading:
    def get(name: str) -> float | None:
        return fields.get(name)

    try:
        index = int(labels.get("gpu", ""))
    except ValueError:
        index = position
    name = labels.get("modelName") or None
    if name is not None and labels.get("GPU_I_PROFILE"):
        name = f"{name} MIG {labels['GPU_I_PROFILE']}"
    used, free, reserved, total = get(FB_USED), get(FB_FREE), get(FB_RESERVED), get(FB_TOTAL)
    if total is None and used is not None and free is not None:
        total = used + free + (reserved or 0.0)
    power_limit = get(ENFORCED_POWER_LIMIT)
    if power_limit is None:
        power_limit = get(POWER_MGMT_LIMIT)
    mask = get(CLOCKS_EVENT_REASONS)
    if mask is None:
        mask = get(CLOCK_THROTTLE_REASONS)
    mask_int = None if mask is None else mask_from_float(mask)
    return GpuReading(
        index=index,
        name=name,
        uuid=labels.get("UUID") or None,
        host=labels.get("hostname") or labels.get("Hostname") or None,
        temperature_c=get(TEMP),
        slowdown_temperature_c=get(SLOWDOWN_TEMP),
        memory_used_bytes=_mib(used),
        memory_total_bytes=_mib(total),
        utilization_pct=get(GPU_UTIL),
        power_w=get(POWER_USAGE),
        power_limit_w=power_limit,
        sm_clock_mhz=get(SM_CLOCK),
        memory_clock_mhz=get(MEM_CLOCK),
        clock_event_reasons=None if mask_int is None else decode_clock_event_reasons(mask_int),
    )


def _mib(value: float | None) -> int | None:
    return None if value is None else round(value * MIB)


class DcgmSampler:
    """Reads a dcgm-exporter URL into `GpuSampled` events (source = the URL).

    Synchronous like `NvmlSampler` (its `run` loop calls it in a worker thread). `transport`
    lets tests serve pages without a network (`httpx.MockTransport`). Failures never raise:
    they come back as `gpus=()` with an `error` naming what went wrong.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 2.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.source = url
        self._url = url
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._transport = transport
        self._client: httpx.Client | None = None

    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                timeout=self._timeout,
                transport=self._transport,
                follow_redirects=True,
                max_redirects=MAX_REDIRECTS,
            )
        return self._client

    def fetch(self) -> str:
        """The page's text; raises DcgmPageError with a clear message on any failure. The whole
        read (request and page) ends within the timeout plus one read timeout (http_read)."""
        try:
            answer = read_answer_blocking(
                self._http(),
                self._url,
                what="the dcgm-exporter page",
                deadline_s=self._timeout,
                max_bytes=self._max_bytes,
                accept=lambda status: status == 200,
            )
        except HttpStatus as exc:
            raise DcgmPageError(f"dcgm-exporter answered HTTP {exc.status}") from None
        except HttpDeadline:
            raise DcgmPageError(f"dcgm-exporter timed out after {self._timeout:g} s") from None
        except HttpTooLarge:
            raise DcgmPageError(
                f"dcgm-exporter page larger than {self._max_bytes} bytes; not read"
            ) from None
        except HttpReadError as exc:
            raise DcgmPageError(f"dcgm-exporter: {exc}") from None
        except httpx.HTTPError as exc:
            raise DcgmPageError(f"dcgm-exporter unreachable: {exc!r}") from exc
        return answer.text()

    def sample(self, now: float) -> GpuSampled:
        """Fetch and parse the page; `now` becomes the event's `t`. Never raises."""
        try:
            text = self.fetch()
        except DcgmPageError as exc:
            return GpuSampled(t=now, source=self.source, gpus=(), error=str(exc))
        except Exception as exc:  # never take the hub down
            log.exception("dcgm-exporter sample failed")
            return GpuSampled(
                t=now, source=self.source, gpus=(), error=f"dcgm-exporter failed: {exc!r}"
            )
        return parse_dcgm_page(text, t=now, source=self.source)

    def close(self) -> None:
        """Close the HTTP client; a later sample opens a new one."""
        if self._client is not None:
            self._client.close()
            self._client = None
