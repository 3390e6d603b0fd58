"""bench against a server another client also uses: its own tokens are compared with the
server's Δgeneration tokens, the share of foreign traffic is reported, and the /metrics
acceptance is marked unreliable past FOREIGN_THRESHOLD (report, card and JSON)."""

from __future__ import annotations

import io
import json

from tests.support.session_feed import Server, request_events

from specmon.bench.analysis import END, START, analyze
from specmon.bench.card import bench_card, card_json, card_markdown
from specmon.bench.config import BenchConfig
from specmon.bench.render import print_summary
from specmon.bench.result import FOREIGN_THRESHOLD, BenchResult, ServerInfo, summary_markdown
from specmon.core.events import Marker


def _run(*, foreign_steps: int) -> BenchResult:
    """Two requests of bench's (AL 3: 2 drafts accepted a step) while another client's
    requests run `foreign_steps` steps at AL 8 on the same server."""
    server = Server(k=8)
    events: list = [server.scrape(-1.0), Marker(0.0, START)]
    for i in range(2):
        events += request_events(
            f"b{i}", 1.0 + i, tokens_per_step=3, steps=20, step_s=0.01, server=server
        )
    for _ in range(foreign_steps):
        server.step(7)  # the other client's traffic: the counters grow, no event of bench's
    events += [Marker(5.0, END), server.scrape(6.0)]
    return analyze(
        events, server=ServerInfo(url="http://127.0.0.1:9", n_spec=8), config=BenchConfig()
    )


def test_foreign_traffic_is_reported_and_marks_the_metrics_acceptance_unreliable():
    result = _run(foreign_steps=60)  # 480 foreign tokens against bench's 122
    sd = result.spec_decode
    assert sd.own_generation_tokens == 122 and sd.server_generation_tokens == 602
    assert sd.foreign_share is not None and sd.foreign_share > FOREIGN_THRESHOLD
    assert sd.metrics_reliable is False
    report = summary_markdown(result)
    assert (
        "UNRELIABLE" in report
        and "| foreign traffic (share of the server's tokens) | 79.7% |" in report
    )
    shown = io.StringIO()
    print_summary(result, file=shown)
    text = " ".join(shown.getvalue().split())
    assert "foreign traffic: 80% of the server's generated tokens were not bench's" in text
    assert "UNRELIABLE" in text
    back = json.loads(result.to_json())["spec_decode"]
    assert back["metrics_reliable"] is False and back["foreign_share"] > 0.7
    assert BenchResult.from_dict(json.loads(result.to_json())).spec_decode == sd
    card = bench_card(result)
    assert card_json(card)["metrics_reliable"] is False
    assert "UNRELIABLE: 80% of the tokens were another client's" in card_markdown(card)


def test_a_server_to_itself_is_reliable_and_says_nothing_of_foreign_traffic():
    result = _run(foreign_steps=0)
    sd = result.spec_decode
    assert sd.foreign_share == 0.0 and sd.metrics_reliable is True
    assert "foreign" not in summary_markdown(result) and "UNRELIABLE" not in summary_markdown(
        result
    )
    assert "UNRELIABLE" not in card_markdown(bench_card(result))
