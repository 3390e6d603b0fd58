"""Bad input answers with vLLM-shaped errors (never a traceback); faults happen on demand."""

from __future__ import annotations

import json

import httpx
import pytest
from tests.sim.simtest_helpers import CHAT, MESSAGES, chat_body, scrape, sse_messages, stream, total


def assert_vllm_error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.headers["x-specmon-simulated"] == "1"
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["code"] == status
    assert "Traceback" not in response.text
    return body["error"]


@pytest.mark.parametrize(
    ("body", "status", "type_"),
    [
        (b'{"model": "x", "messa', 400, "Bad Request"),
        (b"[1, 2]", 400, "BadRequestError"),
        (b"\xff\xfe", 400, "Bad Request"),
        (
            json.dumps({"model": "no-such-model", "messages": MESSAGES}).encode(),
            404,
            "NotFoundError",
        ),
        (json.dumps({"messages": MESSAGES, "max_tokens": 0}).encode(), 400, "BadRequestError"),
        (json.dumps({"messages": MESSAGES, "max_tokens": -3}).encode(), 400, "BadRequestError"),
        (json.dumps({"messages": MESSAGES, "max_tokens": 10**6}).encode(), 400, "BadRequestError"),
        (json.dumps({"messages": MESSAGES, "max_tokens": "many"}).encode(), 400, "BadRequestError"),
        (json.dumps({"messages": MESSAGES, "n": 2}).encode(), 400, "BadRequestError"),
        (json.dumps({"max_tokens": 4}).encode(), 400, "Bad Request"),
        (
            json.dumps({"messages": [{"role": "wizard", "content": "x"}]}).encode(),
            400,
            "BadRequestError",
        ),
        (
            json.dumps({"messages": MESSAGES, "stream_options": {"include_usage": True}}).encode(),
            400,
            "BadRequestError",
        ),
        (
            json.dumps({"messages": MESSAGES, "specmon_fault": "nonsense"}).encode(),
            400,
            "BadRequestError",
        ),
    ],
)
def test_chat_errors(start_sim, body, status, type_) -> None:
    sim = start_sim()
    response = httpx.post(
        sim.url + CHAT, content=body, headers={"content-type": "application/json"}
    )
    assert assert_vllm_error(response, status)["type"] == type_


def test_deeply_nested_json_is_a_400_not_an_internal_error(start_sim) -> None:
    # json.loads hits the recursion limit; FastAPI answers "error parsing the body" (400)
    sim = start_sim()
    response = httpx.post(
        sim.url + CHAT,
        content=b"[" * 100_000 + b"]" * 100_000,
        headers={"content-type": "application/json"},
    )
    assert assert_vllm_error(response, 400)["type"] == "Bad Request"


@pytest.mark.parametrize(
    ("temperature", "words"),
    [(-1, "temperature must be non-negative, got -1.0"), ("hot", "temperature")],
)
def test_bad_temperature_is_refused(start_sim, temperature, words) -> None:
    sim = start_sim()
    body = {"messages": MESSAGES, "max_tokens": 4, "temperature": temperature}
    error = assert_vllm_error(httpx.post(sim.url + CHAT, json=body), 400)
    assert words in error["message"]
    assert error["param"] == "temperature"


def test_context_length_error_names_the_numbers(start_sim) -> None:
    sim = start_sim(profile="gemma4-26b-rtx5090")  # max_model_len 2048
    response = httpx.post(sim.url + CHAT, json={"messages": MESSAGES, "max_tokens": 5000})
    error = assert_vllm_error(response, 400)
    assert "max_tokens=5000 cannot be greater than max_model_len=2048" in error["message"]
    assert error["param"] == "max_tokens"
    response = httpx.post(sim.url + CHAT, json={"messages": MESSAGES, "max_tokens": 2048})
    assert "maximum context length is 2048 tokens" in assert_vllm_error(response, 400)["message"]
    too_long = [{"role": "user", "content": "word " * 3000}]
    response = httpx.post(sim.url + CHAT, json={"messages": too_long, "max_tokens": 1})
    assert "2048" in assert_vllm_error(response, 400)["message"]


def test_completions_errors(start_sim) -> None:
    sim = start_sim()
    for body in ({"max_tokens": 3}, {"prompt": ["a", "b"], "max_tokens": 3}, {"prompt": 7}):
        assert_vllm_error(httpx.post(sim.url + "/v1/completions", json=body), 400)


def test_unknown_path_and_wrong_method(start_sim) -> None:
    sim = start_sim()
    missing = httpx.get(sim.url + "/v1/no-such-path")
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
    wrong = httpx.get(sim.url + CHAT)
    assert wrong.status_code == 405 and wrong.json() == {"detail": "Method Not Allowed"}


def test_garbage_on_the_socket_gets_400_not_a_crash(start_sim) -> None:
    import socket

    sim = start_sim()
    host, port = sim.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"THIS IS NOT HTTP\r\n\r\n")
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 400")
    assert httpx.get(sim.url + "/health").status_code == 200


def test_drop_after_n_tokens(start_sim) -> None:
    sim = start_sim()
    received = bytearray()
    with (
        httpx.Client(base_url=sim.url) as client,
        pytest.raises(httpx.RemoteProtocolError),
        client.stream(
            "POST",
            CHAT,
            json=chat_body(max_tokens=200),
            headers={"X-Specmon-Fault": "drop-after=20"},
        ) as response,
    ):
        for piece in response.iter_raw():
            received.extend(piece)
    messages = sse_messages(received.decode())
    assert "[DONE]" not in messages
    last = json.loads(messages[-1])
    assert last["usage"]["completion_tokens"] == 20
    page = scrape(sim.url)
    # the engine finished the step it was in (up to K+1 tokens); the client got exactly 20
    assert 20 <= total(page, "vllm:generation_tokens_total") <= 20 + 9
    aborts = [
        v
        for k, v in page["vllm:request_success_total"].items()
        if ("finished_reason", "abort") in k
    ]
    assert aborts == [1]


def test_drop_fault_from_the_body_field_too(start_sim) -> None:
    sim = start_sim()
    with pytest.raises(httpx.RemoteProtocolError):
        stream(sim.url, chat_body(max_tokens=100, specmon_fault="drop-after=0"))


def test_error_fault(start_sim) -> None:
    sim = start_sim()
    response = httpx.post(
        sim.url + CHAT,
        json={"messages": MESSAGES, "max_tokens": 5},
        headers={"X-Specmon-Fault": "error=503"},
    )
    assert assert_vllm_error(response, 503)["message"].startswith("Simulated fault")
    assert (
        httpx.post(sim.url + CHAT, json={"messages": MESSAGES, "max_tokens": 5}).status_code == 200
    )


def test_stall_shows_as_one_long_inter_token_gap(start_sim) -> None:
    sim = start_sim()
    stream(sim.url, chat_body(max_tokens=100), headers={"X-Specmon-Fault": "stall=6@10"})
    page = scrape(sim.url)
    buckets = page["vllm:inter_token_latency_seconds_bucket"]
    below_5 = next(v for k, v in buckets.items() if ("le", "5.0") in k)
    below_7 = next(v for k, v in buckets.items() if ("le", "7.5") in k)
    assert below_7 - below_5 == 1  # exactly one step took the 6 s stall


def test_restart_puts_every_counter_back_to_zero(start_sim) -> None:
    sim = start_sim()
    stream(sim.url, chat_body(max_tokens=100))
    before = scrape(sim.url)
    assert total(before, "vllm:generation_tokens_total") == 100
    stream(sim.url, chat_body(max_tokens=30), headers={"X-Specmon-Fault": "restart"})
    after = scrape(sim.url)
    assert total(after, "vllm:generation_tokens_total") == 30
    assert total(after, "vllm:spec_decode_num_drafts_total") < total(
        before, "vllm:spec_decode_num_drafts_total"
    )
    assert (
        total(after, "vllm:generation_tokens_created")
        > total(before, "vllm:generation_tokens_created")
        or total(after, "vllm:generation_tokens_created") > 0
    )


@pytest.mark.parametrize("how", ["truncated", "malformed"])
def test_metrics_faults(start_sim, how) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    sim = start_sim()
    good = httpx.get(sim.url + "/metrics").text
    bad = httpx.get(sim.url + "/metrics", headers={"X-Specmon-Fault": f"metrics={how}"}).text
    assert bad != good
    if how == "truncated":
        assert not bad.endswith("\n")
    else:
        with pytest.raises(ValueError):
            list(text_string_to_metric_families(bad))
    # armed by a generation request: only the next scrape is spoiled
    stream(sim.url, chat_body(max_tokens=5, specmon_fault=f"metrics={how}"))
    spoiled = httpx.get(sim.url + "/metrics").text
    clean = httpx.get(sim.url + "/metrics").text
    assert spoiled != clean
    list(text_string_to_metric_families(clean))


def test_schedule_faults_apply_per_request(start_sim) -> None:
    sim = start_sim(schedule="cycle:1f,1f+error=500")
    assert (
        httpx.post(sim.url + CHAT, json={"messages": MESSAGES, "max_tokens": 3}).status_code == 200
    )
    second = httpx.post(sim.url + CHAT, json={"messages": MESSAGES, "max_tokens": 3})
    assert_vllm_error(second, 500)
    assert (
        httpx.post(sim.url + CHAT, json={"messages": MESSAGES, "max_tokens": 3}).status_code == 200
    )
