"""`watch --once --json` on a server that already served requests before the watch started: the
window has nothing (no traffic during the watch), the since-start numbers have it all."""

from __future__ import annotations

import json

import httpx

from specmon.cli.main import main


def _served_before(url: str, n: int) -> int:
    model = httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"]
    tokens = 0
    for i in range(n):
        r = httpx.post(
            f"{url}/v1/chat/completions",
            json={
                "model": model,
                "messages": [{"role": "user", "content": f"tell me a story {i}"}],
                "max_tokens": 48,
                "temperature": 0,
            },
            timeout=60,
        )
        r.raise_for_status()
        tokens += r.json()["usage"]["completion_tokens"]
    return tokens


def test_once_shows_lifetime_acceptance_of_requests_served_before_the_watch(sim, capsys):
    tokens = _served_before(sim.url, 3)
    assert main(["watch", "--attach", sim.url, "--once", "--json", "--interval", "0.1"]) == 0
    server = json.loads(capsys.readouterr().out)["servers"][sim.url]
    # nothing ran during the watch: the window has no acceptance ...
    assert server["acceptance_length"] is None
    assert server["totals"]["drafts"] == 0
    # ... while the counters' absolute values carry everything served since the server started
    life = server["lifetime"]
    assert life["since_reset_t"] is None
    assert life["generation_tokens"] >= tokens
    assert life["drafts"] > 0
    assert 1.0 < life["acceptance_length"] <= 1 + 8  # n_spec 8
    assert 0.0 < life["draft_acceptance_rate"] <= 1.0
    assert len(life["per_position_rates"]) == 8
    assert life["acceptance_length"] == 1 + life["accepted_tokens"] / life["drafts"]
    assert life["note"] is None
