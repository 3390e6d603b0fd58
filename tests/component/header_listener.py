"""A listener on 127.0.0.1 that records the headers of every request it gets (the tests of where
credentials go). It answers /version and /v1/models like a small OpenAI-compatible server, an
empty /metrics page, a redirect for any path listed in `redirects`, and 404 for the rest."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class HeaderListener:
    server: ThreadingHTTPServer
    seen: list[Seen] = field(default_factory=list)
    redirects: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def requests(self) -> list[Seen]:
        with self.lock:
            return list(self.seen)

    def authorizations(self) -> list[str]:
        return [s.headers["authorization"] for s in self.requests() if "authorization" in s.headers]


@contextmanager
def header_listener() -> Iterator[HeaderListener]:
    holder: list[HeaderListener] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def _answer(self) -> None:
            listener = holder[0]
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            with listener.lock:
                listener.seen.append(
                    Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()})
                )
            path = self.path.split("?")[0]
            if path in listener.redirects:
                self.send_response(307)
                self.send_header("Location", listener.redirects[path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body: bytes
            kind = "application/json"
            if path == "/version":
                body = json.dumps({"version": "0.0-test"}).encode()
            elif path == "/v1/models":
                body = json.dumps(
                    {"object": "list", "data": [{"id": "m", "object": "model"}]}
                ).encode()
            elif path == "/metrics":
                body, kind = b"", "text/plain; version=0.0.4"
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = _answer
        do_POST = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    listener = HeaderListener(server)
    holder.append(listener)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield listener
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
