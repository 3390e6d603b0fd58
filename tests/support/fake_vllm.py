"""A stand-in `vllm` executable for host-mode tests: `vllm serve MODEL --host H --port P ...`

FAKE_VLLM_MODE picks the behaviour:
- "ok": prints vLLM-like startup lines, then serves /health (200), /version, /v1/models, /metrics
  and a streamed /v1/chat/completions ("echo-<last prompt word> from the fake.") on
  --host:--port; starts one child process (like vLLM's engine core) in the same group.
- "oom": prints startup lines and a CUDA out-of-memory traceback, exits 1 at once.
- "never": prints startup lines and never binds the port (never ready).
- "ignore-term": like "ok", but it and its child ignore SIGTERM (only SIGKILL stops them).
- "nonc": fails with the DFlash "non-causal attention not supported" error.
- "dies": like "ok", then exits with an EngineDeadError line 3 s after it is ready.
Every pid of the group is appended to FAKE_VLLM_PIDS (a file) when that variable is set, and the
environment's NO_COLOR is printed, so tests can check what the launcher set. Once loaded, it leaves
in its temporary folder what vLLM leaves there (a folder and a `vllm_dist_*` file, whose path it
prints in a `distributed_init_method=file://...` line, as vLLM does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def note_pid() -> None:
    path = os.environ.get("FAKE_VLLM_PIDS")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.getpid()}\n")


def say(line: str) -> None:
    sys.stdout.write(f"(APIServer pid={os.getpid()}) INFO 11-23 02:00:00 [fake.py:1] {line}\n")
    sys.stdout.flush()


def arg(argv: list[str], name: str, default: str) -> str:
    for i, token in enumerate(argv):
        if token == name and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith(name + "="):
            return token.split("=", 1)[1]
    return default


def child(ignore_term: bool) -> None:
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    note_pid()
    while True:
        time.sleep(1)


def main() -> int:
    argv = sys.argv[1:]
    if argv[:1] == ["--child"]:
        child(argv[1:2] == ["ignore"])
        return 0
    mode = os.environ.get("FAKE_VLLM_MODE", "ok")
    note_pid()
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    model = argv[1] if len(argv) > 1 else "model"
    host, port = arg(argv, "--host", "127.0.0.1"), int(arg(argv, "--port", "8000"))
    say("vLLM server version 0.0.1-fake, serving model " + model)
    say(f"NO_COLOR={os.environ.get('NO_COLOR', '')}")
    if os.environ.get("FAKE_VLLM_ECHO_TOKEN"):  # a log line that carries the token bare
        say(f"hub user {os.environ.get('HF_TOKEN', '')} logged in")
    # Untrusted text a log may carry: a title-setting OSC, a colour escape and Rich markup,
    # which specmon must show literally.
    sys.stdout.write("crafted: \x1b]0;pwned-title\x07\x1b[31m[bold red]markup[/bold red]\x1b[0m\n")
    say(f"non-default args: {{'model': '{model}', 'api_key': {arg(argv, '--api-key', '')!r}}}")
    say("Initializing a V1 LLM engine (v0.0.1-fake) with config: model='" + model + "'")
    say("Starting to load model " + model + "...")
    say("Loading weights took 0.50 seconds")
    if mode == "oom":
        sys.stdout.write(
            "Traceback (most recent call last):\n"
            '  File "gpu_model_runner.py", line 1, in capture_model\n'
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
            "a total capacity of 23.99 GiB of which 1.10 GiB is free.\n"
            "RuntimeError: Engine core initialization failed. See root cause above.\n"
        )
        sys.stdout.flush()
        return 1
    if mode == "nonc":
        sys.stdout.write(
            "ValueError: Selected backend AttentionBackendEnum.TRITON_ATTN is not valid for this "
            "configuration. Reason: ['non-causal attention not supported']\n"
        )
        sys.stdout.flush()
        return 1
    say(
        "GPU KV cache size: 1,048,576 tokens, Maximum concurrency for 1,024 tokens per request: "
        "1024.00x"
    )
    if mode == "never":
        while True:
            time.sleep(1)
    # What vLLM leaves in the temporary folder and never removes: its engine's IPC socket paths
    # and its distributed-init file.
    leftovers = tempfile.mkdtemp(prefix="ipc-")
    init_file = os.path.join(tempfile.gettempdir(), f"vllm_dist_{os.getpid()}")
    with open(init_file, "w") as f:
        f.write(leftovers)
    say(f"world_size=1 rank=0 distributed_init_method=file://{init_file} backend=gloo")
    subprocess.Popen(
        [sys.executable, __file__, "--child", "ignore" if mode == "ignore-term" else "plain"]
    )

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def _send(self, code: int, body: bytes, kind: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(200, b"")
            elif self.path == "/version":
                self._send(200, json.dumps({"version": "0.0.1-fake"}).encode())
            elif self.path == "/v1/models":
                data = {"object": "list", "data": [{"id": model, "object": "model"}]}
                self._send(200, json.dumps(data).encode())
            elif self.path.startswith("/metrics"):
                self._send(200, b"", "text/plain; version=0.0.4")
            else:
                self._send(404, b"{}")

        def do_POST(self) -> None:
            # /v1/chat/completions, streamed like vLLM: a role chunk, the answer word by word
            # (the last word of the prompt echoed first, so a test can tell answers apart), a
            # usage chunk, [DONE].
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.startswith("/v1/chat/completions"):
                self._send(404, b"{}")
                return
            prompt = str((body.get("messages") or [{}])[-1].get("content", ""))
            words = [f"echo-{(prompt.split() or ['nothing'])[-1]}", " from", " the", " fake."]
            base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0,
                    "model": model}  # fmt: skip
            chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                                   "content": ""}}]}]  # fmt: skip
            chunks += [{**base, "choices": [{"index": 0, "delta": {"content": w}}]} for w in words]
            chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            chunks.append(
                {
                    **base,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 3,
                        "completion_tokens": len(words),
                        "total_tokens": 3 + len(words),
                    },
                }
            )
            sse = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
            sse += b"data: [DONE]\n\n"
            self._send(200, sse, "text/event-stream")

    server = ThreadingHTTPServer((host, port), Handler)
    if mode == "dies":  # ready, then the engine dies a moment later

        def die() -> None:
            time.sleep(3)
            sys.stdout.write(
                "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered "
                "an issue. See stack trace (above) for the root cause.\n"
            )
            sys.stdout.flush()
            os._exit(1)

        import threading

        threading.Thread(target=die, daemon=True).start()
    say(f"Starting vLLM server on http://{host}:{port}")
    sys.stdout.write("INFO:     Application startup complete.\n")
    sys.stdout.flush()
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
