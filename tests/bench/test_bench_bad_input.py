"""`specmon bench` on hostile input: a /tokenize that answers junk, a bad prompt file, JSON nested
100k deep, an error without words. Each is one line naming what was wrong (no traceback) and the
documented exit status; none reaches a traceback."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from specmon.bench import prompts
from specmon.bench.config import BenchConfig
from specmon.bench.runner import BenchError, run_bench
from specmon.bench.servers import endpoint_for
from specmon.cli.main import main
from specmon.core.safe_json import JsonError, loads_bounded
from specmon.sim.server import SimConfig, start_in_thread

DEEP = "[" * 100_000 + "]" * 100_000


class _Handler(BaseHTTPRequestHandler):
    tokenize_body = b""
    tokenize_hang = False
    release = threading.Event()

    def _send(self, body: bytes, kind: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.startswith("/v1/models"):
            self._send(json.dumps({"data": [{"id": "m"}]}).encode())
        elif self.path.startswith("/version"):
            self._send(b'{"version": "0.0.0"}')
        elif self.path.startswith("/metrics"):
            self._send(b"", "text/plain")
        else:
            self.send_error(404)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/tokenize":
            if type(self).tokenize_hang:
                type(self).release.wait()  # never answers (until the test ends)
                return
            self._send(type(self).tokenize_body)
        else:
            self.send_error(404)

    def log_message(self, *_args: object) -> None:
        return None


@pytest.fixture
def tokenize_server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"release": threading.Event()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        handler.release.set()
        server.shutdown()
        server.server_close()


def _bench(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["bench", "--gpu", "none", "--warmups", "0", "--num-prompts", "1", *args])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"<html>not json</html>", "not JSON"),
        (DEEP.encode(), "nested deeper than"),
        (b"\xff\xfe", "not UTF-8"),
        (b'{"nothing": 1}', "without a token count"),
    ],
    ids=["html", "deep", "binary", "no-count"],
)
def test_a_tokenize_answer_that_is_not_usable_is_one_line_exit_1(
    tokenize_server: tuple[str, type[_Handler]],
    body: bytes,
    said: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, handler = tokenize_server
    handler.tokenize_body = body
    code, err = _bench(capsys, "--attach", url)
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("specmon bench:")]
    assert len(lines) == 1, err
    assert f"{url}/tokenize" in lines[0] and said in lines[0], lines[0]
    assert lines[0].startswith("specmon bench: cannot size random prompts: ")


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (httpx.ReadTimeout(""), "timed out after 60 s reading {url}/tokenize"),
        (httpx.ConnectTimeout(""), "timed out after 60 s reading {url}/tokenize"),
        (httpx.RemoteProtocolError(""), "connection to {url}/tokenize failed: RemoteProtocolError"),
        (
            httpx.ConnectError("refused"),
            "cannot connect to {url}/tokenize: ConnectError: refused",
        ),
    ],
    ids=["read-timeout", "connect-timeout", "protocol", "connect"],
)
def test_an_error_without_words_still_gives_a_readable_reason(
    monkeypatch: pytest.MonkeyPatch, error: httpx.HTTPError, said: str
) -> None:
    """httpx's timeouts have no words of their own: the reason is one readable line naming the
    URL (never `ReadTimeout('')`)."""

    async def silent(self: prompts.Tokenizer, text: str) -> int:
        raise error

    monkeypatch.setattr(prompts.Tokenizer, "_ask", silent)
    config = BenchConfig(input_len=8, output_len=8, num_prompts=1, warmups=0)
    with (
        start_in_thread(SimConfig(speed=50.0), log_sink=lambda _l: None) as s,
        pytest.raises(BenchError) as info,
    ):
        asyncio.run(run_bench(endpoint_for(s.url), config))
    reason = str(info.value).split("cannot size random prompts: ", 1)[1]
    assert reason == said.format(url=s.url), reason


def test_a_tokenize_that_never_answers_times_out_in_one_line(
    tokenize_server: tuple[str, type[_Handler]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A /tokenize that accepts the request and never answers ends at the deadline (shortened
    here) with one line naming the URL without its credentials."""
    url, handler = tokenize_server
    handler.tokenize_hang = True
    monkeypatch.setattr(prompts, "TOKENIZE_DEADLINE_S", 0.5)
    with_key = url.replace("http://", "http://user:sekret@")
    code, err = _bench(capsys, "--attach", with_key)
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.startswith("specmon bench:")]
    assert lines == [
        f"specmon bench: cannot size random prompts: timed out after 0.5 s reading {url}/tokenize"
    ], err
    assert "sekret" not in err


def test_describe_is_never_empty() -> None:
    from specmon.bench.prompts import TokenizeError
    from specmon.sources.http_errors import describe_error

    src = "http://h:8000"
    assert describe_error(httpx.ConnectError(""), source=src) == (
        "cannot connect to http://h:8000: ConnectError"
    )
    assert describe_error(RuntimeError("")) == "RuntimeError"
    assert describe_error(httpx.RemoteProtocolError("cut"), source=src) == (
        "connection to http://h:8000 failed: RemoteProtocolError: cut"
    )
    assert describe_error(TokenizeError("why")) == "why"
    assert describe_error(httpx.ReadTimeout(""), what="/x", deadline_s=2) == (
        "timed out after 2 s reading /x"
    )


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ('{"prompt": "ok"}\n{"text": "no prompt"}\n', ":2: needs a JSON object"),
        ('{"prompt": "ok"}\n{"prompt": \n', ":2: not JSON (Expecting value"),
        ('{"prompt": "ok"}\n' + DEEP + "\n", ":2: JSON nested deeper than"),
        ('{"prompt": "ok", "output_len": true}\n', ":1: output_len must be"),
    ],
    ids=["no-prompt", "not-json", "deep", "bad-output-len"],
)
def test_a_bad_dataset_line_is_file_line_and_what_exit_2(
    tmp_path: Path, content: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text(content)
    code, err = _bench(capsys, "--attach", "http://127.0.0.1:9", "--dataset", str(f))
    assert code == 2
    assert err.strip().splitlines() == [err.strip()], err  # one line
    assert err.startswith(f"specmon bench: {f}{said}"), err


def test_a_dataset_that_is_not_a_regular_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _bench(capsys, "--attach", "http://127.0.0.1:9", "--dataset", "/dev/zero")
    assert code == 2
    assert err.strip() == "specmon bench: the dataset /dev/zero is not a regular file", err
    code, err = _bench(capsys, "--attach", "http://127.0.0.1:9", "--dataset", str(tmp_path))
    assert code == 2 and "is not a regular file" in err, err
    missing = tmp_path / "nope.jsonl"
    code, err = _bench(capsys, "--attach", "http://127.0.0.1:9", "--dataset", str(missing))
    assert code == 2 and "no such file" in err, err


def test_dataset_size_and_line_limits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "d.jsonl"
    f.write_text('{"prompt": "' + "x" * 200 + '"}\n')
    monkeypatch.setattr(prompts, "MAX_LINE_BYTES", 100)
    with pytest.raises(prompts.DatasetError, match=r"d\.jsonl:1: the line is longer than"):
        prompts.load_dataset(f, 10)
    monkeypatch.setattr(prompts, "MAX_DATASET_BYTES", 100)
    with pytest.raises(prompts.DatasetError, match="larger than"):
        prompts.load_dataset(f, 10)


def test_a_replay_nested_100k_deep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import gzip

    sample = Path(__file__).resolve().parents[2] / "recordings" / "healthy.ndjson.gz"
    header = gzip.decompress(sample.read_bytes()).split(b"\n", 1)[0]
    f = tmp_path / "deep.ndjson"
    f.write_bytes(header + b"\n" + DEEP.encode() + b"\n")
    code = main(["bench", "--replay", str(f)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    # The deep line is skipped as unreadable (its notice kept), which leaves a recording with no
    # bench in it: one line naming the file.
    assert err.strip().startswith("specmon bench: ") and str(f) in err, err
    assert len(err.strip().splitlines()) == 1, err


def test_loads_bounded() -> None:
    assert loads_bounded('{"a": ["[[[[\\"", 1]}') == {"a": ['[[[["', 1]}
    assert loads_bounded("[" * 64 + "]" * 64) is not None
    with pytest.raises(JsonError, match="nested deeper than 64"):
        loads_bounded(DEEP)
    with pytest.raises(JsonError, match="nested deeper than 3"):
        loads_bounded('{"a": [[[1]]]}', max_depth=3)
    with pytest.raises(JsonError, match="longer than 5"):
        loads_bounded("[1, 2, 3]", max_chars=5)
    with pytest.raises(JsonError, match="not JSON"):
        loads_bounded("{")


@pytest.mark.parametrize("kind", ["deep", "device", "folder"])
def test_compare_refuses_a_result_file_it_cannot_use_in_one_line(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """JSON nested 100k deep, /dev/zero (read whole it would never end), a folder."""
    path = {"deep": tmp_path / "deep.json", "device": Path("/dev/zero"), "folder": tmp_path}[kind]
    if kind == "deep":
        path.write_text(DEEP)
    code = main(["compare", str(path), str(path)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    said = "nested deeper than" if kind == "deep" else "is not a regular file"
    assert err.startswith("specmon compare: ") and str(path) in err and said in err, err
