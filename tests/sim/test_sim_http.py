"""The simulated server over HTTP (httpx and the openai client), paced by a FakeClock."""

from __future__ import annotations

import json
import threading

import httpx
import openai
import pytest
from tests.sim.simtest_helpers import CHAT, MESSAGES, chat_body, scrape, step_tokens, stream, total

from specmon.sim import step_model
from specmon.sim.profiles import PROFILES


def test_simple_endpoints_and_the_simulated_marks(start_sim) -> None:
    sim = start_sim(profile="gemma4-26b-h100")
    assert sim.url.startswith("http://127.0.0.1:")
    with httpx.Client(base_url=sim.url) as client:
        health = client.get("/health")
        assert health.status_code == 200 and health.content == b""
        version = client.get("/version").json()
        assert version == {
            "version": PROFILES["gemma4-26b-h100"].vllm_version,
            "simulated": True,
            "profile": "gemma4-26b-h100",
            "n_spec": 15,
        }
        models = client.get("/v1/models").json()
        card = models["data"][0]
        assert models["object"] == "list"
        assert card["id"] == PROFILES["gemma4-26b-h100"].model
        assert card["max_model_len"] == PROFILES["gemma4-26b-h100"].max_model_len
        assert card["owned_by"] == "vllm" and card["permission"][0]["object"] == "model_permission"
        for response in (health, client.get("/metrics"), client.get("/nowhere")):
            assert response.headers["x-specmon-simulated"] == "1"


def test_stream_shape_with_continuous_usage(start_sim) -> None:
    sim = start_sim(n_spec=8)
    chunks = stream(sim.url, chat_body(max_tokens=200))
    assert chunks[-1] == "[DONE]"
    role, *content, usage_chunk, _ = chunks
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert role["usage"]["completion_tokens"] == 0
    assert role["object"] == "chat.completion.chunk"
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 200
    assert usage_chunk["usage"]["total_tokens"] == 200 + usage_chunk["usage"]["prompt_tokens"]
    finishes = [c["choices"][0]["finish_reason"] for c in content]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    tokens = step_tokens(chunks)
    assert tokens[0] == 0 and tokens[1] == 1  # role chunk, then the prefill's token alone
    assert all(1 <= t <= 9 for t in tokens[1:])  # 1..K+1 per engine step
    assert sum(tokens) == 200
    assert len({c["id"] for c in chunks if c != "[DONE]"}) == 1


def test_without_stream_options_no_usage_anywhere(start_sim) -> None:
    sim = start_sim()
    body = chat_body(max_tokens=30)
    del body["stream_options"]
    chunks = stream(sim.url, body)
    assert chunks[-1] == "[DONE]"
    assert all("usage" not in c for c in chunks[:-1])
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])


def test_include_usage_only_puts_usage_on_the_last_chunk(start_sim) -> None:
    sim = start_sim()
    chunks = stream(sim.url, chat_body(max_tokens=30, continuous=False))
    *body, usage_chunk, done = chunks
    assert done == "[DONE]"
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 30
    assert all("usage" not in c for c in body)


def test_counters_agree_with_the_stream(start_sim) -> None:
    sim = start_sim(profile="gemma4-26b-rtx5090m", n_spec=8)
    before = scrape(sim.url)
    assert total(before, "vllm:spec_decode_num_drafts_total") == 0
    chunks = stream(sim.url, chat_body(max_tokens=300))
    after = scrape(sim.url)
    decode_steps = step_tokens(chunks)[2:]
    assert total(after, "vllm:generation_tokens_total") == 300
    assert total(after, "vllm:spec_decode_num_drafts_total") == len(decode_steps)
    assert total(after, "vllm:spec_decode_num_draft_tokens_total") == 8 * len(decode_steps)
    accepted = sum(t - 1 for t in decode_steps)
    assert total(after, "vllm:spec_decode_num_accepted_tokens_total") == accepted
    per_pos = after["vllm:spec_decode_num_accepted_tokens_per_pos_total"]
    for position in range(8):
        key = next(k for k in per_pos if ("position", str(position)) in k)
        # position i counts steps whose first i+1 drafts were all accepted
        assert per_pos[key] == sum(1 for t in decode_steps[:-1] if t - 1 > position) + (
            1 if decode_steps[-1] - 1 > position else 0
        )
    success = after["vllm:request_success_total"]
    assert (
        success[
            (("finished_reason", "length"), ("model_name", PROFILES["gemma4-26b-rtx5090m"].model))
        ]
        == 1
    )
    prompt_tokens = chunks[-2]["usage"]["prompt_tokens"]
    assert total(after, "vllm:prompt_tokens_total") == prompt_tokens
    assert total(after, "vllm:time_to_first_token_seconds_count") == 1
    assert total(after, "vllm:inter_token_latency_seconds_count") == len(decode_steps)
    assert total(after, "vllm:num_requests_running") == 0


def test_n_spec_zero_has_no_spec_decode_family(start_sim) -> None:
    sim = start_sim(n_spec=0)
    chunks = stream(sim.url, chat_body(max_tokens=40))
    assert set(step_tokens(chunks)[1:]) == {1}
    page = scrape(sim.url)
    assert not [name for name in page["__families__"] if name.startswith("vllm:spec_decode")]
    assert total(page, "vllm:generation_tokens_total") == 40
    assert httpx.get(sim.url + "/version").json()["n_spec"] == 0


def test_metric_types_names_and_buckets(start_sim) -> None:
    sim = start_sim()
    stream(sim.url, chat_body(max_tokens=20))
    text = httpx.get(sim.url + "/metrics").text
    assert "# TYPE vllm:spec_decode_num_drafts_total counter" in text
    assert "vllm:spec_decode_num_drafts_created{" in text
    assert "# TYPE vllm:kv_cache_usage_perc gauge" in text
    assert "# TYPE vllm:iteration_tokens_total histogram" in text
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="2560.0"' in text
    assert 'vllm:e2e_request_latency_seconds_bucket{engine="0",le="7680.0"' in text
    families = scrape(sim.url)["__families__"]
    for name in ("vllm:generation_tokens", "vllm:prompt_tokens", "vllm:request_success"):
        assert families[name] == "counter"


def test_openai_client_stream_and_full(start_sim) -> None:
    sim = start_sim()
    client = openai.OpenAI(base_url=sim.url + "/v1", api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    pieces = []
    usage = None
    for chunk in client.chat.completions.create(
        model=model,
        messages=MESSAGES,
        max_tokens=50,
        stream=True,
        stream_options={"include_usage": True},
    ):
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
        if chunk.usage:
            usage = chunk.usage
    assert usage is not None and usage.completion_tokens == 50
    full = client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=50)
    assert full.choices[0].finish_reason == "length"
    assert full.usage.completion_tokens == 50 and full.choices[0].message.content
    completion = client.completions.create(model=model, prompt="Speculation is", max_tokens=12)
    assert completion.usage.completion_tokens == 12 and completion.choices[0].text


def test_prompt_tokens_agree_with_tokenize(start_sim) -> None:
    sim = start_sim()
    with httpx.Client(base_url=sim.url) as client:
        counted = client.post("/tokenize", json={"messages": MESSAGES}).json()
        full = client.post(CHAT, json={"messages": MESSAGES, "max_tokens": 3}).json()
        assert full["usage"]["prompt_tokens"] == counted["count"] == len(counted["tokens"])
        plain = client.post("/tokenize", json={"prompt": "A prompt, of sorts."}).json()
        done = client.post(
            "/v1/completions", json={"prompt": "A prompt, of sorts.", "max_tokens": 2}
        )
        assert done.json()["usage"]["prompt_tokens"] == plain["count"]


def test_answers_read_like_answers(start_sim) -> None:
    sim = start_sim(seed=3)
    texts = set()
    with httpx.Client(base_url=sim.url) as client:
        for _ in range(6):
            body = {"messages": MESSAGES, "max_tokens": 400}
            texts.add(client.post(CHAT, json=body).json()["choices"][0]["message"]["content"])
    joined = "\n".join(texts)
    assert len(texts) > 1
    assert "```" in joined and "\n\n" in joined
    assert "\n1. " in joined or "\n- " in joined


def test_natural_stop_before_max_tokens(start_sim) -> None:
    sim = start_sim()
    chunks = stream(sim.url, chat_body(max_tokens=2000, ignore_eos=False))
    final = chunks[-2]["usage"]["completion_tokens"]
    assert final < 2000
    assert chunks[-3]["choices"][0]["finish_reason"] == "stop"
    ignored = stream(sim.url, chat_body(max_tokens=2000, ignore_eos=True))
    assert ignored[-2]["usage"]["completion_tokens"] == 2000


def test_same_seed_same_answers_and_steps(start_sim) -> None:
    a = stream(start_sim(seed=11).url, chat_body(max_tokens=120))
    b = stream(start_sim(seed=11).url, chat_body(max_tokens=120))
    assert step_tokens(a) == step_tokens(b)
    text = [c["choices"][0]["delta"].get("content") for c in a if c != "[DONE]" and c["choices"]]
    assert text == [
        c["choices"][0]["delta"].get("content") for c in b if c != "[DONE]" and c["choices"]
    ]


def test_keep_alive_serves_many_requests_on_one_connection(start_sim) -> None:
    sim = start_sim()
    with httpx.Client(base_url=sim.url) as client:
        for _ in range(5):
            assert client.get("/health").status_code == 200
            assert (
                client.post(CHAT, json={"messages": MESSAGES, "max_tokens": 5}).status_code == 200
            )
            with client.stream("POST", CHAT, json=chat_body(max_tokens=10)) as response:
                assert response.read().endswith(b"data: [DONE]\n\n")
    assert sim.server.http.connections_accepted == 1


def test_concurrent_streams_all_complete(start_sim) -> None:
    sim = start_sim()
    results: list[int] = []
    lock = threading.Lock()

    def one() -> None:
        chunks = stream(sim.url, chat_body(max_tokens=150))
        with lock:
            results.append(chunks[-2]["usage"]["completion_tokens"])

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [150] * 4
    page = scrape(sim.url)
    assert total(page, "vllm:generation_tokens_total") == 600
    assert total(page, "vllm:num_requests_running") == 0


def test_cycle_schedule_degrades_requests_while_drafts_continue(start_sim) -> None:
    sim = start_sim(schedule="cycle:1f,1d", n_spec=8)
    fast = step_tokens(stream(sim.url, chat_body(max_tokens=200)))[2:]
    before = scrape(sim.url)
    degraded = step_tokens(stream(sim.url, chat_body(max_tokens=200)))[2:]
    after = scrape(sim.url)
    assert sum(fast) / len(fast) > 2.0
    assert set(degraded) == {1}  # AL 1.0: vanilla yield
    drafts = total(after, "vllm:spec_decode_num_drafts_total") - total(
        before, "vllm:spec_decode_num_drafts_total"
    )
    assert drafts == len(degraded)  # drafts are still proposed and verified
    accepted = total(after, "vllm:spec_decode_num_accepted_tokens_total") - total(
        before, "vllm:spec_decode_num_accepted_tokens_total"
    )
    assert accepted == 0


def _decode_rate_from_metrics(sim, requests: int, max_tokens: int) -> float:
    for _ in range(requests):
        stream(sim.url, chat_body(max_tokens=max_tokens, ignore_eos=True))
    page = scrape(sim.url)
    return total(page, "vllm:generation_tokens_total") / total(
        page, "vllm:e2e_request_latency_seconds_sum"
    )


def test_spec_versus_vanilla_ratio_through_http(start_sim) -> None:
    """Through HTTP only ratios are checked: the server's own latency histograms (on its
    clock) give spec/vanilla throughput within 20% of the model's ratio."""
    profile = PROFILES["gemma4-26b-rtx5090m"]
    spec = _decode_rate_from_metrics(start_sim(profile=profile.name, n_spec=8), 3, 1024)
    vanilla = _decode_rate_from_metrics(start_sim(profile=profile.name, n_spec=0), 3, 1024)
    expected = step_model.expected_output_throughput(
        profile, 8, 20, 1024
    ) / step_model.expected_output_throughput(profile, 0, 20, 1024)
    assert spec / vanilla == pytest.approx(expected, rel=0.2)


def test_log_lines_while_busy_and_silence_when_idle(start_sim) -> None:
    lines: list[str] = []
    sim = start_sim(log_sink=lines.append, n_spec=8)
    stream(sim.url, chat_body(max_tokens=100))
    busy: list[bool] = []
    sim.call(lambda: busy.append(sim.app.log_interval(10.0, False)))
    assert busy == [True]
    assert len(lines) == 2
    assert "Engine 000: Avg prompt throughput:" in lines[0]
    assert "Avg generation throughput: 10.0 tokens/s" in lines[0]
    assert lines[1].split("] ", 1)[1].startswith("SpecDecoding metrics: Mean acceptance length: ")
    # the next idle interval is still printed (the previous was busy), then silence
    sim.call(lambda: busy.append(sim.app.log_interval(10.0, True)))
    sim.call(lambda: busy.append(sim.app.log_interval(10.0, False)))
    assert busy == [True, False, False]
    assert len(lines) == 4


def test_server_stops_and_frees_its_port(start_sim) -> None:
    sim = start_sim()
    url = sim.url
    sim.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/health", timeout=5)
    sim.stop()  # twice is fine


def test_bad_config_fails_in_the_callers_thread() -> None:
    from specmon.sim.server import SimConfig, SimConfigError, start_in_thread

    with pytest.raises(SimConfigError, match="unknown profile"):
        start_in_thread(SimConfig(profile="nope"))
    with pytest.raises(SimConfigError, match="malformed schedule"):
        start_in_thread(SimConfig(schedule="whenever"))


def test_non_stream_chat_shape(start_sim) -> None:
    sim = start_sim()
    body = httpx.post(sim.url + CHAT, json={"messages": MESSAGES, "max_tokens": 8}).json()
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert set(body["usage"]) >= {"prompt_tokens", "completion_tokens", "total_tokens"}
    json.dumps(body)


@pytest.mark.parametrize("path", ["/v1/models", "/version", "/metrics", "/health"])
def test_head_answers_the_get_headers_without_a_body(start_sim, path) -> None:
    sim = start_sim()
    with httpx.Client(base_url=sim.url) as client:
        head = client.head(path)
        get = client.get(path)
    assert head.status_code == 200 == get.status_code
    assert head.content == b""
    assert head.headers.get("content-type") == get.headers.get("content-type")
