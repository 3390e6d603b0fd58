"""https servers: the stream client, the /metrics scraper and `specmon watch` through TLS.

The simulator sits behind a TLS-terminating proxy (a test-made CA from `trustme`, the server
certificate for 127.0.0.1). The CA reaches specmon the standard way httpx (and so the OpenAI
client) reads one: `SSL_CERT_FILE`. The proxy keeps the decrypted request bytes, so the tests see
what the server received (the API key in an Authorization header) and can check that the key
never appears in events, errors, printed output or a recording.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from specmon.cli.main import main
from specmon.core.events import MetricsScraped, RequestEnded, StreamChunk
from specmon.core.session_state import SessionState
from specmon.runtime.monitor import Monitor, Target
from specmon.sources.metrics_scraper import MetricsScraper, generation_tokens
from specmon.sources.stream_client import ChatRequest, StreamClient

KEY = "sk-https-planted-7c1e9a4b2d"
SEEN_CAP = 4 * 1024 * 1024


class TlsProxy:
    """A TLS-terminating TCP proxy on 127.0.0.1 in front of a plain HTTP server.

    Keeps what each client connection sent, decrypted (up to SEEN_CAP bytes each), in `seen`.
    """

    def __init__(self, upstream_port: int, context: ssl.SSLContext) -> None:
        self._upstream_port = upstream_port
        self._context = context
        self.seen: list[bytearray] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self._context)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._upstream_port)
        except OSError:
            writer.close()
            return

        sent = bytearray()
        self.seen.append(sent)

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, keep: bool) -> None:
            with contextlib.suppress(OSError, ssl.SSLError):
                while data := await src.read(65536):
                    if keep and len(sent) < SEEN_CAP:
                        sent.extend(data)
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(OSError, ssl.SSLError, RuntimeError):
                dst.close()

        await asyncio.gather(pipe(reader, up_writer, True), pipe(up_reader, writer, False))

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "test-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def tls(sim, ca: trustme.CA) -> Iterator[TlsProxy]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    proxy = TlsProxy(int(sim.url.rsplit(":", 1)[1]), context)
    yield proxy
    proxy.stop()


@pytest.fixture
def trusted(ca_file: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test CA trusted through SSL_CERT_FILE (read when an HTTP client is created)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    for name in ("OPENAI_API_KEY", "VLLM_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return ca_file


_HEAD = re.compile(rb"(?:GET|POST) \S+ HTTP/1\.1\r\n.*?\r\n\r\n", re.DOTALL)


def _request_heads(proxy: TlsProxy) -> list[str]:
    """Request line + headers of every request the server received (lower-cased), in order per
    connection; keep-alive connections carry several."""
    return [m.group().decode("latin-1").lower() for c in proxy.seen for m in _HEAD.finditer(c)]


def test_stream_client_streams_over_https_and_keeps_the_key_out_of_events(tls, trusted):
    events: list = []

    async def go() -> tuple:
        async with StreamClient(tls.url, api_key=KEY) as client:
            identity = await client.identify()
            ended = await client.chat(
                ChatRequest("Explain DFlash.", max_tokens=32, temperature=0.0), events.append
            )
            return identity, ended

    identity, ended = asyncio.run(go())
    assert identity.error is None
    assert identity.base_url == tls.url
    assert identity.simulated is True and identity.models
    assert ended.outcome == "ok", ended.error
    assert ended.completion_tokens == 32
    chunks = [e for e in events if isinstance(e, StreamChunk)]
    assert chunks[-1].completion_tokens == 32
    assert all(getattr(e, "source", tls.url) == tls.url for e in events)
    # The key reached the server, as a bearer token, on every request (identify and chat) ...
    heads = _request_heads(tls)
    posts = [h for h in heads if h.startswith("post /v1/chat/completions")]
    assert len(posts) == 1
    assert f"authorization: bearer {KEY.lower()}" in posts[0]
    assert all(f"bearer {KEY.lower()}" in h for h in heads)
    # ... and is nowhere in what the client emitted.
    assert KEY not in repr(events) and KEY not in repr(identity)


def test_metrics_scraper_reads_an_https_page(tls, trusted, sim):
    events: list = []

    async def go() -> MetricsScraped | None:
        scraper = MetricsScraper(
            tls.url + "/metrics",
            source=tls.url,
            headers={"Authorization": f"Bearer {KEY}"},
        )
        try:
            return await scraper.scrape_once(events.append)
        finally:
            await scraper.aclose()

    # Traffic first, straight to the simulator, so the counters are not all zero.
    asyncio.run(_one_plain_request(sim.url))
    scraped = asyncio.run(go())
    assert scraped is not None, events
    assert scraped.source == tls.url
    assert (generation_tokens(scraped.samples) or 0) >= 16
    assert any(s.name.startswith("vllm:spec_decode_") for s in scraped.samples)
    assert [e.status for e in events if hasattr(e, "status")] == ["up"]
    metrics_heads = [h for h in _request_heads(tls) if h.startswith("get /metrics")]
    assert metrics_heads and f"authorization: bearer {KEY.lower()}" in metrics_heads[0]
    assert KEY not in repr(events)


async def _one_plain_request(url: str) -> None:
    async with StreamClient(url) as client:
        ended = await client.chat(ChatRequest("warm up", max_tokens=16), lambda _e: None)
        assert ended.outcome == "ok"


def test_an_untrusted_certificate_is_refused_with_a_clear_state(tls, monkeypatch, tmp_path):
    """Without the test CA, verification fails: the scraper says down (naming the certificate
    problem) and the request fails; nothing is read over an unverified connection."""
    other = trustme.CA()  # trust some other CA only
    bundle = tmp_path / "other-ca.pem"
    other.cert_pem.write_to_path(str(bundle))
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    events: list = []

    async def go() -> RequestEnded:
        scraper = MetricsScraper(tls.url + "/metrics", source=tls.url)
        try:
            await scraper.scrape_once(events.append)
        finally:
            await scraper.aclose()
        async with StreamClient(tls.url, api_key=KEY) as client:
            return await client.chat(ChatRequest("hi", model="m", max_tokens=4), events.append)

    ended = asyncio.run(go())
    status = [e for e in events if hasattr(e, "status")]
    assert [e.status for e in status] == ["down"]
    assert "CERTIFICATE_VERIFY_FAILED" in status[0].detail
    assert ended.outcome == "failed" and ended.error
    assert KEY not in repr(events)
    assert not any(isinstance(e, MetricsScraped | StreamChunk) for e in events)
    assert not any(tls.seen)  # no request got through the handshake


def test_recorded_https_session_has_no_key_anywhere(tls, trusted, tmp_path, capsys):
    """A monitored, recorded https session with a streamed request: the recording and the
    printed snapshot hold the requests and the server, never the key."""
    path = tmp_path / "session.ndjson"
    with Monitor([Target(tls.url)], SessionState, api_key=KEY, record=path) as monitor:
        monitor.start(run_loops=False)
        monitor.scrape_all_once()
        client = monitor.clients[0]
        ended = monitor.hub.submit(
            client.chat(ChatRequest("Say something.", max_tokens=24), monitor.hub.emit)
        ).result(60)
        monitor.scrape_all_once()
        snapshot = monitor.snapshot()
    assert ended.outcome == "ok", ended.error
    text = path.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["format"] == "specmon-session"
    codes = {line[1] for line in lines[1:]}
    assert len(codes) >= 3  # request events and /metrics samples were recorded
    assert tls.url in text
    assert KEY not in text
    assert KEY not in json.dumps(snapshot)
    assert snapshot["requests"]["summary"]["ok"] == 1
    # The same through the command line: watch --once --json over https with --api-key.
    assert (
        main(
            [
                "watch",
                "--attach",
                tls.url,
                "--api-key",
                KEY,
                "--once",
                "--json",
                "--interval",
                "0.1",
            ]
        )
        == 0
    )
    out = capsys.readouterr()
    snap = json.loads(out.out)
    assert snap["servers"][tls.url]["status"] == "up"
    assert KEY not in out.out and KEY not in out.err
    heads = _request_heads(tls)
    assert sum(h.startswith("get /metrics") for h in heads) >= 4
    assert all(f"bearer {KEY.lower()}" in h for h in heads)
