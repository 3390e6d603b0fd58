"""Every command that reads something specmon does not control, fed hostile input.

Files (recordings, datasets, bench results, config), pages and servers that lie, loop, trickle or
explode. For each case the command must end by itself (the guard below only catches a hang), with
no Python traceback, under a memory cap (an unbounded read dies with MemoryError, which prints a
traceback), with a short message on stderr naming what was wrong, and with the exit status the
command documents. What each command does with bad input is listed in docs/bad-input.md.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import resource
import signal
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.loopback import LoopbackServer

from specmon.sim.server import SimConfig, start_in_thread

# A hang guard, not a speed check: every case ends in seconds when it works.
HANG_GUARD_S = 120
# Address space for one command: imports and a normal run fit easily; reading /dev/zero or a
# decompression bomb into memory does not.
MEMORY_CAP_BYTES = 3 * 1024**3
DEEP = 100_000


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    @property
    def both(self) -> str:
        return self.stdout + self.stderr


def run_specmon(*args: str, env: dict[str, str] | None = None, prelude: str = "") -> Outcome:
    """`specmon ARGS` in a subprocess; `prelude` (Python run first, e.g. to shorten a deadline
    that would make the case wait a minute) makes it `python -c PRELUDE; main(ARGS)`."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    command = [sys.executable, "-m", "specmon", *args]
    if prelude:
        run = "import sys; from specmon.cli.main import main; raise SystemExit(main(sys.argv[1:]))"
        command = [sys.executable, "-c", f"{prelude}\n{run}", *args]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=HANG_GUARD_S,
            env=full_env,
            stdin=subprocess.DEVNULL,
            preexec_fn=_cap_memory,
        )
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"specmon {' '.join(args)} hung for {HANG_GUARD_S} s: {hung.stderr!r}")
    return Outcome(done.returncode, done.stdout, done.stderr)


def assert_clean_failure(outcome: Outcome, *, codes: tuple[int, ...] = (1, 2)) -> None:
    assert "Traceback" not in outcome.both, outcome.both[-3000:]
    assert "MemoryError" not in outcome.both, outcome.both[-3000:]
    assert outcome.code in codes, (outcome.code, outcome.both[-3000:])
    message = outcome.stderr.strip()
    assert message, "a failure must say what was wrong"
    # One short message, not a dump (a usage line may precede it).
    assert len(message.splitlines()) <= 4, message[-3000:]


# ---------------------------------------------------------------- hostile files

HEADER = {
    "format": "specmon-session",
    "version": 1,
    "started_at": "2026-11-24T00:00:00+00:00",
    "server": "http://127.0.0.1:9",
    "model": "m",
    "draft_model": None,
    "method": None,
    "n_spec": 4,
    "vllm_version": "0.26.0",
    "gpu": None,
    "simulated": True,
    "extra": {},
}


def _recording(path: Path, events: list[str]) -> Path:
    lines = [json.dumps(HEADER), '[0.1,"ss",{"src":"http://127.0.0.1:9","status":"up"}]']
    path.write_text("\n".join([*lines, *events]) + "\n")
    return path


def _gzip_bomb(path: Path, size: int = 1 << 30) -> Path:
    """A small .gz that inflates to `size` bytes of one line with no newline."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip container
    block = b"a" * (1 << 20)
    with path.open("wb") as out:
        out.write(compressor.compress(json.dumps(HEADER).encode() + b"\n"))
        for _ in range(size // len(block)):
            out.write(compressor.compress(block))
        out.write(compressor.flush())
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


HOSTILE_RECORDINGS: dict[str, Callable[[Path], Path]] = {
    "deeply-nested": lambda d: _recording(d / "r.ndjson", ["[" * DEEP + "]" * DEEP]),
    "t-nan": lambda d: _recording(
        d / "r.ndjson", ['[NaN,"ss",{"src":"http://127.0.0.1:9","status":"up"}]']
    ),
    "t-infinity": lambda d: _recording(
        d / "r.ndjson", ['[Infinity,"ss",{"src":"http://127.0.0.1:9","status":"up"}]']
    ),
    "t-1e308": lambda d: _recording(
        d / "r.ndjson", ['[1e308,"ss",{"src":"http://127.0.0.1:9","status":"up"}]']
    ),
    "long-line": lambda d: _recording(d / "r.ndjson", ['[0.2,"ll",{"x":"' + "a" * 20_000_000]),
    "dev-zero": lambda _d: Path("/dev/zero"),
    "fifo": lambda d: _fifo(d / "r.ndjson"),
    "gzip-bomb": lambda d: _gzip_bomb(d / "r.ndjson.gz"),
    "binary": lambda d: (d / "r.ndjson").write_bytes(os.urandom(4096)) and d / "r.ndjson",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_RECORDINGS))
def test_replay_json_on_a_hostile_recording(kind: str, tmp_path: Path) -> None:
    path = HOSTILE_RECORDINGS[kind](tmp_path)
    outcome = run_specmon("replay", str(path), "--json")
    assert "Traceback" not in outcome.both, outcome.both[-3000:]
    assert "MemoryError" not in outcome.both, outcome.both[-3000:]
    if outcome.code == 0:
        # It played what came before the bad line: the snapshot is valid JSON (no NaN/Infinity)
        # and the bad line was named.
        json.loads(outcome.stdout, parse_constant=_refuse_constant)
        assert "line" in outcome.stderr, outcome.stderr
    else:
        assert_clean_failure(outcome)


@pytest.mark.parametrize("kind", sorted(HOSTILE_RECORDINGS))
def test_bench_replay_on_a_hostile_recording(kind: str, tmp_path: Path) -> None:
    path = HOSTILE_RECORDINGS[kind](tmp_path)
    outcome = run_specmon("bench", "--replay", str(path))
    assert "Traceback" not in outcome.both, outcome.both[-3000:]
    assert "MemoryError" not in outcome.both, outcome.both[-3000:]
    if outcome.code != 0:
        assert_clean_failure(outcome)


def _refuse_constant(name: str) -> float:
    raise AssertionError(f"bare {name} in JSON output")


HOSTILE_DATASETS: dict[str, Callable[[Path], Path]] = {
    "deeply-nested": lambda d: _write(d / "p.jsonl", "[" * DEEP + "]" * DEEP + "\n"),
    "bad-line": lambda d: _write(d / "p.jsonl", '{"prompt": "hi"}\n{"prompt": \n'),
    "not-an-object": lambda d: _write(d / "p.jsonl", "[1, 2]\n"),
    "nan-output-len": lambda d: _write(d / "p.jsonl", '{"prompt": "hi", "output_len": NaN}\n'),
    "long-line": lambda d: _write(d / "p.jsonl", '{"prompt": "' + "a" * 20_000_000 + '"}\n'),
    "dev-zero": lambda _d: Path("/dev/zero"),
    "fifo": lambda d: _fifo(d / "p.jsonl"),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with start_in_thread(SimConfig(speed=50.0, n_spec=4, seed=1), log_sink=lambda _l: None) as s:
        yield s.url


@pytest.mark.parametrize("kind", sorted(HOSTILE_DATASETS))
def test_bench_on_a_hostile_dataset(kind: str, tmp_path: Path, sim_url: str) -> None:
    path = HOSTILE_DATASETS[kind](tmp_path)
    outcome = run_specmon(
        "bench", "--attach", sim_url, "--dataset", str(path), "--num-prompts", "2",
        "--warmups", "0", "--output-len", "8", "--gpu", "none",
    )  # fmt: skip
    assert_clean_failure(outcome)
    assert str(path) in outcome.stderr or path.name in outcome.stderr, outcome.stderr


HOSTILE_RESULTS: dict[str, Callable[[Path], Path]] = {
    "deeply-nested": lambda d: _write(d / "a.json", "[" * DEEP + "]" * DEEP),
    "nan": lambda d: _write(d / "a.json", '{"summary": NaN}'),
    "not-json": lambda d: _write(d / "a.json", "hello"),
    "dev-zero": lambda _d: Path("/dev/zero"),
    "fifo": lambda d: _fifo(d / "a.json"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_RESULTS))
def test_compare_on_a_hostile_result_file(kind: str, tmp_path: Path) -> None:
    path = HOSTILE_RESULTS[kind](tmp_path)
    outcome = run_specmon("compare", str(path), str(path))
    assert_clean_failure(outcome)


HOSTILE_CONFIGS: dict[str, Callable[[Path], Path]] = {
    "dev-zero": lambda _d: Path("/dev/zero"),
    "fifo": lambda d: _fifo(d / "config.toml"),
    "huge": lambda d: _write(d / "config.toml", "# " + "x" * 50_000_000 + "\n"),
    "binary": lambda d: (d / "config.toml").write_bytes(os.urandom(4096)) and d / "config.toml",
    "deeply-nested": lambda d: _write(d / "config.toml", "a = " + "[" * DEEP + "]" * DEEP),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_CONFIGS))
def test_presets_with_a_hostile_config_file(kind: str, tmp_path: Path) -> None:
    path = HOSTILE_CONFIGS[kind](tmp_path)
    outcome = run_specmon("presets", env={"SPECMON_CONFIG": str(path)})
    assert_clean_failure(outcome)
    assert str(path) in outcome.stderr, outcome.stderr


# ---------------------------------------------------------------- hostile servers

PAGE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nConnection: close\r\n"


class HostileServer(LoopbackServer):
    """Answers every request with `respond(path)`'s raw bytes, or trickles them."""

    def __init__(self, respond: Callable[[str], bytes], trickle_s: float = 0.0) -> None:
        self.respond = respond
        self.trickle_s = trickle_s
        super().__init__()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await reader.readuntil(b"\r\n\r\n")
            path = request.split(b" ", 2)[1].decode("latin-1")
            body = self.respond(path)
            if self.trickle_s:
                for i in range(len(body)):
                    writer.write(body[i : i + 1])
                    await writer.drain()
                    await asyncio.sleep(self.trickle_s)
            else:
                writer.write(body)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


def _page(body: bytes) -> bytes:
    return PAGE_HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body


SPEC_LINES = (
    b'vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100\n'
    b'vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 400\n'
    b'vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 250\n'
    b'vllm:generation_tokens_total{engine="0",model_name="m"} 350\n'
)

HOSTILE_SERVERS: dict[str, Callable[[], HostileServer]] = {
    "trickle": lambda: HostileServer(lambda _p: _page(SPEC_LINES * 50), trickle_s=0.5),
    "redirect-loop": lambda: HostileServer(
        lambda p: (
            b"HTTP/1.1 302 Found\r\nLocation: " + p.encode() + b"\r\nContent-Length: 0\r\n"
            b"Connection: close\r\n\r\n"
        )
    ),
    "garbage": lambda: HostileServer(lambda _p: _page(os.urandom(2000))),
    "not-http": lambda: HostileServer(lambda _p: b"\x00\xff" * 1000),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_SERVERS))
def test_watch_once_json_on_a_hostile_server(kind: str) -> None:
    server = HOSTILE_SERVERS[kind]()
    try:
        outcome = run_specmon("watch", "--attach", server.url, "--once", "--json", "--gpu", "none")
    finally:
        server.stop()
    assert "Traceback" not in outcome.both, outcome.both[-3000:]
    # No server given could be read: non-zero, and the server is still in the output with why.
    assert outcome.code == 1, (outcome.code, outcome.both[-3000:])
    snapshot = json.loads(outcome.stdout, parse_constant=_refuse_constant)
    assert snapshot["servers"], snapshot
    (server_json,) = snapshot["servers"].values()
    assert server_json["status"] in ("down", "unreadable"), server_json
    assert server_json.get("status_detail"), server_json


def test_duplicate_series_are_not_counter_resets() -> None:
    """The same series twice on one unchanging page (the second copy lower): never a reset, and
    no rate from a page that does not change."""
    page = _page(SPEC_LINES + SPEC_LINES.replace(b"100\n", b"90\n").replace(b"250\n", b"200\n"))
    server = HostileServer(lambda _p: page)
    command = [sys.executable, "-m", "specmon", "watch", "--attach", server.url, "--json",
               "--interval", "0.3", "--gpu", "none"]  # fmt: skip
    watcher = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, preexec_fn=_cap_memory,
    )  # fmt: skip
    try:
        assert watcher.stdout is not None
        lines = [watcher.stdout.readline() for _ in range(6)]
    finally:
        watcher.send_signal(signal.SIGINT)
        try:
            _, stderr = watcher.communicate(timeout=HANG_GUARD_S)
        finally:
            server.stop()
    assert "Traceback" not in stderr, stderr[-3000:]
    last = json.loads(lines[-1], parse_constant=_refuse_constant)
    (server_json,) = last["servers"].values()
    assert not server_json.get("resets"), server_json
    tok_s = (server_json.get("window") or {}).get("tok_s")
    assert not tok_s, server_json


def test_huge_gauges_keep_json_valid() -> None:
    page = _page(
        SPEC_LINES
        + b'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 1e308\n'
        + b'vllm:num_requests_running{engine="0",model_name="m"} -1e308\n'
    )
    server = HostileServer(lambda _p: page)
    try:
        outcome = run_specmon("watch", "--attach", server.url, "--once", "--json", "--gpu", "none")
    finally:
        server.stop()
    assert "Traceback" not in outcome.both, outcome.both[-3000:]
    snapshot = json.loads(outcome.stdout, parse_constant=_refuse_constant)
    # a KV usage of 1e308 and a running count of -1e308 are not readings: null, and why
    (server_json,) = snapshot["servers"].values()
    assert server_json["kv_cache_usage"] is None and server_json["requests_running"] is None
    assert server_json["history"]["kv_cache_usage"][-1] is None
    note = server_json["gauge_note"]
    assert "vllm:kv_cache_usage_perc 1e+308 is outside its range (0 to 1)" in note, note
    assert "vllm:num_requests_running -1e+308 is outside its range (0 or more)" in note, note
    assert server_json["acceptance_length"] is None or server_json["acceptance_length"] >= 1


def test_bench_when_tokenize_answers_not_json(sim_url: str) -> None:
    def respond(path: str) -> bytes:
        if path.startswith("/v1/models"):
            body = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
            return (
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body
            )
        return _page(b"<html>not json</html>")

    server = HostileServer(respond)
    try:
        outcome = run_specmon(
            "bench", "--attach", server.url, "--num-prompts", "1", "--warmups", "0",
            "--output-len", "8", "--gpu", "none",
        )  # fmt: skip
    finally:
        server.stop()
    assert_clean_failure(outcome)


class TokenizeNeverAnswers(HostileServer):
    """Answers like HostileServer, but holds a /tokenize request without a byte until the
    client hangs up."""

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        path = request.split(b" ", 2)[1].decode("latin-1")
        if path.startswith("/tokenize"):
            await reader.read()  # until the client gives up
        else:
            writer.write(self.respond(path))
            await writer.drain()
        writer.close()


def _models_else_html(path: str) -> bytes:
    if path.startswith("/v1/models"):
        body = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
        return (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body) + body
        )
    return _page(b"<html>not json</html>")


def test_bench_when_tokenize_never_answers() -> None:
    """One readable line at the deadline (shortened from 60 s to 1 s here), naming the URL
    without its credentials; never `ReadTimeout('')`."""
    server = TokenizeNeverAnswers(_models_else_html)
    url = server.url.replace("http://", "http://user:sekret@")
    try:
        outcome = run_specmon(
            "bench", "--attach", url, "--num-prompts", "1", "--warmups", "0",
            "--output-len", "8", "--gpu", "none",
            prelude="import specmon.bench.prompts as p; p.TOKENIZE_DEADLINE_S = 1.0",
        )  # fmt: skip
    finally:
        server.stop()
    assert_clean_failure(outcome, codes=(1,))
    assert (
        f"specmon bench: cannot size random prompts: timed out after 1 s reading "
        f"{server.url}/tokenize"
    ) in outcome.stderr.splitlines(), outcome.stderr
    assert "sekret" not in outcome.both and "ReadTimeout" not in outcome.both


def test_watch_canary_with_an_absurd_stored_baseline(sim_url: str, tmp_path: Path) -> None:
    """A canary file whose entry holds an AL of 1e308 (not one for K = 4): the first probe says
    in one line that it was skipped (not a silent relearning), and no absurd value is written."""
    store = tmp_path / "specmon" / "canary.json"
    store.parent.mkdir()
    absurd_key = json.dumps([sim_url, "m", None, None, 4], separators=(",", ":"))
    store.write_text(
        json.dumps(
            {
                "format": "specmon-canary",
                "version": 1,
                "baselines": {absurd_key: {"probes": [3.0, 1e308], "live": []}},
            }
        )
    )
    command = [sys.executable, "-m", "specmon", "watch", "--attach", sim_url, "--json",
               "--interval", "0.3", "--gpu", "none", "--canary", "10"]  # fmt: skip
    watcher = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL, preexec_fn=_cap_memory,
        env={**os.environ, "XDG_DATA_HOME": str(tmp_path)},
    )  # fmt: skip
    canary: list[dict[str, object]] = []
    try:
        assert watcher.stdout is not None
        watcher.stdout.readline()  # the first scrape: live traffic counts from here
        _live_traffic(sim_url)  # the canary probes a server only while it has live traffic
        # one line per interval: wait for the probe, bounded by the line count
        for _ in range(int(HANG_GUARD_S / 0.3)):
            line = watcher.stdout.readline()
            if not line:
                break
            canary = json.loads(line, parse_constant=_refuse_constant)["canary"]
            if canary:
                break
    finally:
        watcher.send_signal(signal.SIGINT)
        _, stderr = watcher.communicate(timeout=HANG_GUARD_S)
    assert "Traceback" not in stderr, stderr[-3000:]
    assert canary, stderr[-3000:]
    error = canary[0]["error"]
    assert isinstance(error, str) and "\n" not in error, canary
    assert error.startswith("stored canary entry skipped: ") and str(store) in error, error
    assert "holds 1e+308, not an AL for K = 4 (1 to 5)" in error, error
    assert "1e+308" not in store.read_text() and "Infinity" not in store.read_text()


def _live_traffic(url: str) -> None:
    import httpx

    body = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 16}
    httpx.post(f"{url}/v1/chat/completions", json=body, timeout=HANG_GUARD_S).raise_for_status()


@pytest.mark.parametrize(
    "args",
    [
        ("watch", "--prometheus", ""),
        ("fleet", ""),
        ("watch", "--attach", ""),
        ("bench", "--attach", ""),
        ("replay", ""),
        ("compare", "", ""),
        ("bench", "--attach", "http://127.0.0.1:9", "--dataset", ""),
    ],
    ids=lambda a: " ".join(a) or "empty",
)
def test_empty_arguments_are_one_line_errors(args: tuple[str, ...]) -> None:
    assert_clean_failure(run_specmon(*args))


def test_the_gzip_bomb_is_small_on_disk(tmp_path: Path) -> None:
    """The bomb above really is one: a small file that would inflate past the memory cap."""
    path = _gzip_bomb(tmp_path / "b.gz", size=64 << 20)
    assert path.stat().st_size < 1 << 20
    with gzip.open(path, "rb") as f:
        assert len(f.read(1 << 21)) == 1 << 21
