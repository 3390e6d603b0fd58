"""specmon's own Prometheus exporter: a `/metrics` page of what only specmon derives.

vLLM's counters give server-wide acceptance; specmon knows each request. The page has, labelled
with the `server` each request went to:

- `specmon_request_acceptance_length` (histogram): each finished ok request's acceptance length
  (the chosen source: the server's per-request object, else chunk sizes, else /metrics deltas);
- `specmon_request_decode_tokens_per_second` (histogram): each finished ok request's decode tok/s;
- `specmon_vanilla_speed_requests_total{reason}` (counter): requests whose verdict is
  vanilla-speed (core.verdict), once per reason code (docs/definitions.md);
- `specmon_flagged_requests_total{verdict}` (counter): requests by flagged verdict (loop,
  garbled, transition, vanilla-speed): the counts the panel, the timeline and `--json` show;
- `specmon_requests_total{outcome}` (counter): finished requests;
- `specmon_degradation_cycle_detected` (gauge, 0/1) and `specmon_degradation_cycle_period_requests`
  (gauge; NaN when no cycle) with `specmon_degradation_cycle_share_degraded`: the cycle
  detector's report over the session's recent requests (`server` = the session's server).

It follows the session's published views (`update(view)`, called every half second by
`follow`), so every number is the one the screens show: a view's rows not seen before are
observed once, and its verdict counted once it is final (an ok row may wait for the session's
speed levels: core.detectors.speed_class). The HTTP server (prometheus_client's) binds
127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from specmon.core.errors import SpecmonError
from specmon.core.verdict import request_verdict
from specmon.core.views import RequestRow, SessionView

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

DEFAULT_PORT = 9464
DEFAULT_HOST = "127.0.0.1"

AL_BUCKETS = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 16.0)
"""Acceptance length buckets: fine near 1 (vanilla) and up to n_spec 15."""
TOK_S_BUCKETS = (5.0, 10.0, 20.0, 30.0, 50.0, 75.0, 100.0, 150.0, 200.0, 300.0, 500.0, 1000.0)


class ExporterError(SpecmonError):
    """The exporter cannot serve (its port is in use, or the address is not valid)."""


def parse_listen(text: str) -> tuple[str, int]:
    """`[HOST:]PORT` (`:9464`, `9464`, `0.0.0.0:9464`, `[::1]:9464`) → (host, port); the host is
    127.0.0.1 when left out. ValueError with a one-line message when it is not valid."""
    value = text.strip()
    host, port_text = DEFAULT_HOST, value
    if value.startswith("["):
        end = value.find("]")
        if end < 0 or value[end + 1 : end + 2] != ":":
            raise ValueError(f"--export must be [HOST:]PORT, got {text!r}")
        host, port_text = value[1:end], value[end + 2 :]
    elif ":" in value:
        host, _, port_text = value.rpartition(":")
        host = host or DEFAULT_HOST
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"--export port must be 1..65535, got {port_text!r}")
    return host, int(port_text)


class Exporter:
    """The metrics of one session, and (after `serve`) the HTTP server that exposes them."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        # prometheus_client is imported here, by an exporter being made: the commands that take
        # --export import this module before their first frame, with or without the option.
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.acceptance = Histogram(
            "specmon_request_acceptance_length",
            "Acceptance length of each finished request (tokens per speculative step, bonus "
            "token included), from vLLM's per-request object, chunk sizes or /metrics deltas.",
            ["server"],
            buckets=AL_BUCKETS,
            registry=r,
        )
        self.decode = Histogram(
            "specmon_request_decode_tokens_per_second",
            "Decode speed of each finished request: (completion tokens - 1) / (t_last - t_first).",
            ["server"],
            buckets=TOK_S_BUCKETS,
            registry=r,
        )
        self.flagged = Counter(
            "specmon_vanilla_speed_requests",
            "Requests flagged as running at vanilla (no-speculation) speed, by reason.",
            ["server", "reason"],
            registry=r,
        )
        self.verdicts = Counter(
            "specmon_flagged_requests",
            "Requests by flagged verdict: loop, garbled, transition, vanilla-speed.",
            ["server", "verdict"],
            registry=r,
        )
        self.requests = Counter(
            "specmon_requests",
            "Finished requests seen by specmon, by outcome.",
            ["server", "outcome"],
            registry=r,
        )
        self.cycle = Gauge(
            "specmon_degradation_cycle_detected",
            "1 when the cycle detector sees periodic degradation in the recent requests.",
            ["server"],
            registry=r,
        )
        self.cycle_period = Gauge(
            "specmon_degradation_cycle_period_requests",
            "Period of the detected degradation cycle, in requests (NaN: no cycle).",
            ["server"],
            registry=r,
        )
        self.cycle_share = Gauge(
            "specmon_degradation_cycle_share_degraded",
            "Share of a cycle's requests that are degraded (NaN: no cycle).",
            ["server"],
            registry=r,
        )
        self._seen: set[str] = set()
        self._judged: set[str] = set()
        """Rows whose verdict was counted (it is final: settled, or flagged by quality or by the
        vanilla verdict, which no speed level changes)."""
        self._lock = threading.Lock()
        self._http: object | None = None
        self._stop = threading.Event()
        self._follower: threading.Thread | None = None
        self.host: str | None = None
        self.port: int | None = None

    # ------------------------------------------------------------ numbers

    def update(self, view: SessionView | None) -> int:
        """Observe the view's finished rows not seen before; set the cycle gauges. Returns how
        many rows were new."""
        if view is None:
            return 0
        with self._lock:
            new = 0
            current: set[str] = set()
            judged: set[str] = set()
            for row in view.rows:
                current.add(row.request_id)
                if row.request_id not in self._seen:
                    new += 1
                    self._observe(row)
                if row.request_id in self._judged:
                    judged.add(row.request_id)
                elif row.outcome == "ok" and _final(row):
                    judged.add(row.request_id)
                    self._count_verdict(row)
            # Rows leave the view oldest first and never come back: keeping only the ids still
            # shown bounds the sets by the view's row cap.
            self._seen = current
            self._judged = judged
            cycle = view.cycle
            if cycle is not None:
                server = view.info.server or "session"
                self.cycle.labels(server).set(1.0 if cycle.detected else 0.0)
                self.cycle_period.labels(server).set(
                    float(cycle.period) if cycle.period is not None else math.nan
                )
                self.cycle_share.labels(server).set(
                    cycle.share_degraded if cycle.share_degraded is not None else math.nan
                )
            return new

    def _observe(self, row: RequestRow) -> None:
        server = row.source
        self.requests.labels(server, row.outcome).inc()
        if row.outcome != "ok":
            return
        al = row.acceptance.acceptance_length if row.acceptance else None
        if al is not None and math.isfinite(al):
            self.acceptance.labels(server).observe(al)
        if row.decode_tok_s is not None and math.isfinite(row.decode_tok_s):
            self.decode.labels(server).observe(row.decode_tok_s)

    def _count_verdict(self, row: RequestRow) -> None:
        verdict = request_verdict(row)
        if verdict.flagged:
            self.verdicts.labels(row.source, verdict.kind).inc()
        if verdict.kind == "vanilla-speed":
            for code in tuple(c for c, _ in verdict.reasons) or ("flagged",):
                self.flagged.labels(row.source, code).inc()

    # ------------------------------------------------------------ serving

    def serve(self, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> None:
        """Start the HTTP server; ExporterError (one line) when the port is in use."""
        try:
            from prometheus_client import start_http_server

            server, _thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            reason = "in use" if getattr(exc, "errno", None) == 98 else exc.strerror or str(exc)
            raise ExporterError(f"cannot serve /metrics on {host}:{port}: {reason}") from None
        self._http = server
        self.host, self.port = host, int(server.server_address[1])

    def follow(self, read_view: Callable[[], SessionView | None], interval: float = 0.5) -> None:
        """Call `update(read_view())` every `interval` seconds on a daemon thread until stop()."""

        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.update(read_view())
                except Exception:  # a session not started yet, or stopping: the next tick
                    continue

        self._follower = threading.Thread(target=loop, name="specmon-exporter", daemon=True)
        self._follower.start()

    def stop(self) -> None:
        self._stop.set()
        server = self._http
        self._http = None
        if server is not None:
            server.shutdown()  # type: ignore[attr-defined]
            server.server_close()  # type: ignore[attr-defined]
        if self._follower is not None:
            self._follower.join(1.0)


def _final(row: RequestRow) -> bool:
    """Whether a finished ok row's verdict can no longer change: settled, or flagged by the
    quality sentinel or the vanilla verdict (no speed class undoes either)."""
    return (
        row.settled or row.quality is not None or (row.vanilla is not None and row.vanilla.flagged)
    )


def start_exporter(
    listen: tuple[str, int], read_view: Callable[[], SessionView | None], command: str
) -> Exporter:
    """Serve /metrics on `listen`, fed from `read_view`, and say where on stderr (and when it is
    not loopback). Raises ExporterError (a port in use: one line) before anything is served."""
    from specmon.sources.addresses import is_loopback

    exporter = Exporter()
    exporter.serve(*listen)
    exporter.follow(read_view)
    host, port = listen
    where = "loopback only" if is_loopback(host) else "NOT loopback: reachable from the network"
    print(
        f"specmon {command}: serving /metrics on http://{host}:{port}/metrics ({where})",
        file=sys.stderr,
    )
    return exporter
