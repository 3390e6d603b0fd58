"""`specmon card`: the rig card of real bench and sweep outputs made against the simulator, its
redaction (no keys, no hosts, no local paths unless asked), and bad input."""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from pathlib import Path

import pytest

from specmon.bench.card import Redaction
from specmon.bench.config import BenchConfig
from specmon.bench.servers import AttachProvider
from specmon.bench.sweep import SweepSpec, SweepStore, run_sweep
from specmon.cli.main import main
from specmon.sim.server import SimConfig, start_in_thread

KEY = "sk-card-planted-0123456789"
WORKLOAD = ["--input-len", "32", "--output-len", "48", "--num-prompts", "3", "--warmups", "0"]


def _sim(n_spec: int) -> SimConfig:
    level = "summary" if n_spec else "none"
    return SimConfig(n_spec=n_spec, speed=100.0, seed=5, per_request_spec_decode_metrics=level)


@pytest.fixture(scope="module")
def bench_json(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "run.json"
    with start_in_thread(_sim(8), log_sink=lambda _l: None) as sim:
        argv = ["bench", "--attach", sim.url, "--gpu", "none", *WORKLOAD, "--json", str(out)]
        assert main(argv) == 0
    return out


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sweep") / "sweep"
    config = BenchConfig(input_len=32, output_len=48, num_prompts=3, warmups=0)
    with ExitStack() as stack:
        urls = {
            n: stack.enter_context(start_in_thread(_sim(n), log_sink=lambda _l: None)).url
            for n in (0, 4, 8)
        }
        spec = SweepSpec(
            tuple(urls),
            (1,),
            1,
            config,
            urls,
            described={"method": "dflash", "draft": "/home/alice/models/my-drafter"},
        )
        store = SweepStore(folder)
        store.create(spec)
        import asyncio

        from specmon.bench.runner import run_bench

        run_sweep(
            spec, AttachProvider(urls), store, run=lambda e, c, _l: asyncio.run(run_bench(e, c))
        )
    return folder


def _card(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["card", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_card_of_a_bench_run_names_the_rig_and_positions_1_to_k(bench_json, capsys):
    code, md, _ = _card(capsys, str(bench_json))
    assert code == 0
    assert "SIMULATED" in md
    assert "| K (num_speculative_tokens) | 8 |" in md
    assert "| position | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 |" in md
    # rates in percent, as bench and compare show them (42.1%, not 0.42)
    assert re.search(r"^\| Draft acceptance rate \| \d{1,3}\.\d% \|$", md, re.M), md
    assert re.search(r"^\| accepted( \| \d{1,3}\.\d%){8} \|$", md, re.M), md
    assert "Serve line of this setting" in md and "vllm serve" in md
    assert "Driver | not recorded" in md
    assert "127.0.0.1" not in md and "http://" not in md  # the host is left out
    code, text, _ = _card(capsys, str(bench_json), "--json")
    card = json.loads(text)
    assert card["format"] == "specmon-card" and card["n_spec"] == 8
    assert [p["position"] for p in card["per_position"]] == list(range(1, 9))
    assert card["acceptance_length"] is not None and card["server"] is None


def test_hosts_are_kept_only_when_asked(bench_json, capsys):
    _, text, _ = _card(capsys, str(bench_json), "--json", "--include-hosts")
    assert json.loads(text)["server"].startswith("http://127.0.0.1:")


def test_the_card_of_a_sweep_has_its_table_and_recommended_serve_line(sweep_dir, capsys):
    code, md, _ = _card(capsys, str(sweep_dir))
    assert code == 0
    assert "Recommended serve line" in md
    command = json.loads((sweep_dir / "summary.json").read_text())["command"]
    _, text, _ = _card(capsys, str(sweep_dir), "--json")
    card = json.loads(text)
    assert card["serve_line"] == Redaction().text(command)  # the sweep's own recommendation
    assert card["kind"] == "sweep" and card["method"] == "dflash"
    assert md.count("\n| 0 | 1 |") == 1 and "| 8 | 1 |" in md  # one row per (K, concurrency)
    assert "/home/alice" not in md and "| Drafter | my-drafter |" in md  # path cut to its name
    code, same, _ = _card(capsys, str(sweep_dir / "summary.json"))
    assert code == 0 and same == md
    _, full, _ = _card(capsys, str(sweep_dir), "--include-paths")
    assert "/home/alice/models/my-drafter" in full


def test_keys_never_reach_the_card(bench_json, tmp_path, capsys):
    data = json.loads(bench_json.read_text())
    data["server"]["model"] = f"m --api-key {KEY}"
    data["config"]["dataset"] = f"/data/{KEY}/prompts.jsonl"
    planted = tmp_path / "planted.json"
    planted.write_text(json.dumps(data))
    for extra in ([], ["--json"], ["--include-paths", "--include-hosts"]):
        code, text, _ = _card(capsys, str(planted), *extra)
        assert code == 0 and KEY not in text


def test_bare_host_names_and_addresses_are_left_out_like_urls(bench_json, tmp_path, capsys):
    """Not only URLs: a host name or address written bare in a result (a GPU named by its
    machine, a dataset on another host, a serve line's --host) is `<server>` on the card."""
    hosts = ("gpu-node-7.cluster.internal", "10.20.30.40", "dgx01:8000", "fd00::7")
    data = json.loads(bench_json.read_text())
    data["server"]["gpu"] = "H100 on gpu-node-7.cluster.internal"
    data["server"]["model"] = "org/model-7B --host 10.20.30.40"
    data["config"]["dataset"] = "prompts from dgx01:8000 and [fd00::7]:9000"
    planted = tmp_path / "hosts.json"
    planted.write_text(json.dumps(data))
    for extra in ([], ["--json"]):
        code, text, _ = _card(capsys, str(planted), *extra)
        assert code == 0 and "<server>" in text
        assert not [h for h in hosts if h in text], text
    _, kept, _ = _card(capsys, str(planted), "--include-hosts")
    assert all(h in kept for h in hosts)


@pytest.mark.parametrize(
    ("content", "words"),
    [(None, "does not exist"), ("{not json", "not a usable result"), ("{}", "not a specmon")],
)
def test_what_is_not_a_result_is_one_line_and_exit_2(tmp_path, capsys, content, words):
    path = tmp_path / "x.json"
    if content is not None:
        path.write_text(content)
    code, out, err = _card(capsys, str(path))
    assert code == 2 and out == "" and words in err and err.count("\n") == 1


def test_an_empty_folder_is_not_a_sweep(tmp_path, capsys):
    code, _, err = _card(capsys, str(tmp_path))
    assert code == 2 and "no sweep" in err


def test_output_goes_to_a_file(bench_json, tmp_path, capsys):
    out = tmp_path / "card.md"
    code, stdout, _ = _card(capsys, str(bench_json), "-o", str(out))
    assert code == 0 and stdout == "" and out.read_text().startswith("### specmon rig card")
    code, _, err = _card(capsys, str(bench_json), "-o", str(tmp_path / "no" / "such" / "f.md"))
    assert code == 1 and "cannot write" in err


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("org/model-7B", "org/model-7B"),  # a Hugging Face id is not a path
        ("/srv/models/org/model-7B", "model-7B"),
        ("~/models/drafter", "drafter"),
        ("./ckpt/final", "final"),
        ("served at http://gpu-box:8000/v1", "served at <server>"),
        ("vllm serve m --host 10.1.2.3 --port 8000", "vllm serve m --host <server> --port 8000"),
        ("--host=gpu-box.lan", "--host=<server>"),
        ("at 192.168.1.50:8000, [fd00::7]:80", "at <server>, <server>"),
        ("on node7.cluster.internal", "on <server>"),
        ("H100 @ gpu-box:8000", "H100 @ <server>"),
        # loopback and unspecified addresses name no machine; versions are not addresses
        (
            "--host 0.0.0.0 127.0.0.1:8000 localhost:8000",
            "--host 0.0.0.0 127.0.0.1:8000 localhost:8000",
        ),
        (
            "vLLM 0.10.1.1, Qwen/Qwen2.5-7B-Instruct, ngram:16",
            "vLLM 0.10.1.1, Qwen/Qwen2.5-7B-Instruct, ngram:16",
        ),
        ("vllm serve m --api-key sk-abcdefghijkl", "vllm serve m --api-key [REDACTED]"),
    ],
)
def test_redaction_of_card_texts(text, shown):
    assert Redaction().text(text) == shown
    assert Redaction(include_hosts=True, include_paths=True).text("/srv/m") == "/srv/m"


def test_terminal_escapes_and_non_finite_numbers_are_shown_safely(bench_json, tmp_path, capsys):
    data = json.loads(bench_json.read_text())
    data["server"]["model"] = "evil\x1b]0;pwned\x07model"
    data["spec_decode"]["acceptance_length"] = float("nan")
    planted = tmp_path / "evil.json"
    planted.write_text(json.dumps(data))  # NaN as Python's json writes it
    code, md, _ = _card(capsys, str(planted))
    assert code == 0 and "\x1b" not in md and "evil\\x1b]0;pwned\\x07model" in md
    assert "| Acceptance length | — |" in md
    code, text, _ = _card(capsys, str(planted), "--json")
    assert code == 0 and json.loads(text)["acceptance_length"] is None


@pytest.mark.parametrize("kind", ["deeply-nested", "nan-summary", "dev-zero", "fifo", "empty"])
def test_hostile_result_files_are_one_line_errors(kind, tmp_path, capsys):
    import os

    path = tmp_path / "a.json"
    if kind == "deeply-nested":
        path.write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "nan-summary":
        path.write_text('{"format": "specmon-bench", "version": 1, "summary": NaN}')
    elif kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    code, out, err = _card(capsys, "" if kind == "empty" else str(path))
    assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("specmon card: ")
