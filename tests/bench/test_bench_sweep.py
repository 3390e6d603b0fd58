"""`specmon sweep`: its ranking, recommendation and statistics on runs built from the simulator's
step model for a profile the test shapes (its peak placed at each point in turn, every number
computed here by hand); and against simulated servers (one per n_spec, as attached servers):
failed points, Ctrl-C and --resume, the concurrency schedule, the files it writes."""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import replace
from random import Random

import pytest
from tests.support.session_feed import Server
from tests.support.sim_servers import sims

from specmon.bench.config import BenchConfig
from specmon.bench.result import ServerInfo, load_result
from specmon.bench.runner import RunOutput, run_bench
from specmon.bench.servers import AttachProvider
from specmon.bench.sweep import SweepSpec, SweepStore, run_sweep
from specmon.cli.main import main
from specmon.core.events import RequestEnded, RequestStarted, StreamChunk
from specmon.sim import step_model as sm
from specmon.sim.profiles import DEFAULT_PROFILE, PROFILES, Profile
from specmon.sources.server_identity import ServerIdentity


def plain_run(endpoint, config, label):
    return asyncio.run(run_bench(endpoint, config))


def sweep(urls: dict[int, str], tmp_path, config: BenchConfig, repeats: int, run=plain_run):
    spec = SweepSpec(tuple(urls), (config.concurrency,), repeats, config, urls)
    store = SweepStore(tmp_path / "sweep")
    store.create(spec)
    return run_sweep(spec, AttachProvider(urls), store, run=run), store, spec


# ---------------------------------------------------------------- ranking and statistics

POINTS = (0, 1, 3, 9)
WORKLOAD = BenchConfig(input_len=64, output_len=200, num_prompts=3, warmups=0, ignore_eos=True)
REPEAT_SLOWER = (1.0, 1.03)
"""Repeat r's requests take this much longer than the model says (run-to-run drift)."""


def peaked_profile(peak: int, tie_with: int | None = None) -> Profile:
    """A profile whose output tok/s peaks at n_spec=`peak`, placed by the test: every draft is
    accepted (a step yields K+1 tokens, no randomness), drafting is free and the verify step
    costs t(1 + vK^2). Per step, tok/s ~ (K+1)/(1 + vK^2), largest at K = sqrt(1 + 1/v) - 1:
    v = 1/((peak+1)^2 - 1) puts it at `peak`. With `tie_with`, v = 1/(ab + a + b) gives `peak`
    (a) and `tie_with` (b) the same step rate instead."""
    a, b = peak, tie_with
    return replace(
        PROFILES[DEFAULT_PROFILE],
        name="test-peak",
        target_step_s=0.02,
        verify_per_draft=0.0,
        verify_per_draft_sq=1.0 / ((a + 1) ** 2 - 1) if b is None else 1.0 / (a * b + a + b),
        draft_base_s=0.0,
        draft_per_token_s=0.0,
        prefill_base_s=0.05,
        prefill_per_token_s=0.0,
        accept_first=1.0,
        accept_decay=1.0,
    )


def model_run(profile: Profile, n: int, config: BenchConfig, slower: float) -> RunOutput:
    """What `specmon bench` records from a simulator of `profile` at n_spec=`n`, built from the
    simulator's step model instead of a clock (so every number is known exactly): requests one
    after the other, a chunk per engine step, /metrics scraped before and after."""
    url = f"http://sim-n{n}.invalid"
    counters = Server(k=max(n, 1))
    events: list = [counters.scrape(0.0, source=url)] if n else []
    t = 0.0
    for i in range(config.num_prompts):
        rid = f"n{n}-{i}"
        events.append(RequestStarted(t=t, request_id=rid, source=url, model="m", max_tokens=200))
        tokens = 0
        steps = sm.request_steps(profile, n, config.input_len, config.output_len, Random(i))
        for step in steps:
            t += step.duration * slower
            tokens += step.tokens
            events.append(StreamChunk(t=t, request_id=rid, text="x" * step.tokens,
                                      completion_tokens=tokens))  # fmt: skip
            if step.drafts:
                counters.step(step.accepted)
        events.append(RequestEnded(t=t, request_id=rid, completion_tokens=tokens,
                                   finish_reason="length"))  # fmt: skip
    if n:
        events.append(counters.scrape(t, source=url))
    server = ServerInfo(url=url, simulated=True, n_spec=n, spec_configured=n > 0)
    return RunOutput(events, server, ServerIdentity(url))


def model_sweep(profile: Profile, tmp_path) -> tuple:
    """A sweep over POINTS, 2 repeats, each run built by `model_run`."""
    urls = {n: f"http://sim-n{n}.invalid" for n in POINTS}

    def run(endpoint, config, label) -> RunOutput:
        n = next(k for k, u in urls.items() if endpoint.base_url.startswith(u))
        repeat = int(label.split(" r")[1].split("/")[0])
        return model_run(profile, n, config, REPEAT_SLOWER[repeat - 1])

    outcome, store, _ = sweep(urls, tmp_path, WORKLOAD, repeats=2, run=run)
    assert not outcome.summary.missing and not outcome.summary.failures
    return outcome.summary, store


@pytest.mark.parametrize("peak", POINTS[1:])
def test_the_sweep_recommends_the_peak_the_test_placed(tmp_path, peak) -> None:
    """Each point in turn is made the best: both recommendations must name it, alone (every
    other point is at least 20% slower, far beyond the noise)."""
    summary, _ = model_sweep(peaked_profile(peak), tmp_path)
    (rec,) = summary.recommendations
    t, p95 = rec.by_throughput, rec.by_p95
    assert t is not None and p95 is not None
    assert (t.best_n_spec, t.n_spec, t.tied) == (peak, peak, ())
    assert (p95.best_n_spec, p95.n_spec, p95.tied) == (peak, peak, ())
    assert not rec.differ


def test_the_sweep_table_pads_its_edge_columns(tmp_path) -> None:
    """Every cell has a space between it and the table's border: the last column ("vanilla")
    lines up with the others, not "vanilla┃" / "0│" against the edge."""
    from rich.console import Console

    from specmon.bench.render import sweep_renderable

    summary, _ = model_sweep(peaked_profile(POINTS[1]), tmp_path)
    console = Console(width=160, record=True)
    console.print(sweep_renderable(summary))
    rows = [line for line in console.export_text().splitlines() if line[:1] in ("┃", "│")]
    assert len(rows) >= len(POINTS) + 1, rows  # the header and a row per point
    for line in rows:
        assert line[1] == " " and line[-2] == " ", line


def test_two_points_at_the_same_speed_tie_and_the_smaller_is_recommended(tmp_path) -> None:
    summary, _ = model_sweep(peaked_profile(3, tie_with=9), tmp_path)
    (rec,) = summary.recommendations
    t = rec.by_throughput
    assert t is not None
    assert t.n_spec == 3 and {t.best_n_spec, *t.tied} == {3, 9}  # fewer drafts, same speed


def test_the_cells_are_the_mean_and_standard_error_of_the_repeats(tmp_path) -> None:
    """Every number of a cell, computed here by hand from the step model: a request's time,
    tok/s over the two repeats (the second 3% slower), the speedup over n=0, the server's AL."""
    profile = peaked_profile(3)
    summary, store = model_sweep(profile, tmp_path)
    cells = {c.n_spec: c for c in summary.cells}
    assert sorted(cells) == list(POINTS)
    decode = WORKLOAD.output_len - 1  # the first token comes from the prefill
    tok_s = {}
    for n, cell in cells.items():
        steps = math.ceil(decode / (n + 1))
        seconds = profile.prefill_base_s + steps * profile.target_step_s * (
            1 + profile.verify_per_draft_sq * n * n
        )
        a, b = (WORKLOAD.output_len / (seconds * slower) for slower in REPEAT_SLOWER)
        saved = [load_result(store.runs / f"n{n}-c1-r{r}.json") for r in (1, 2)]
        assert [r.summary.output_throughput for r in saved] == pytest.approx([a, b], rel=1e-9)
        assert cell.tok_s is not None and cell.tok_s.n == 2
        assert cell.tok_s.value == pytest.approx((a + b) / 2, rel=1e-9)
        assert cell.tok_s.se == pytest.approx(abs(a - b) / 2, rel=1e-6)  # sd/sqrt(2), ddof 1
        tok_s[n] = (a + b) / 2
        if n:  # the server's counters: every draft accepted, the last step cut at max_tokens
            assert cell.acceptance_length is not None and cell.acceptance_rate is not None
            assert cell.acceptance_length.value == pytest.approx(decode / steps, rel=1e-9)
            accepted = decode - steps
            assert cell.acceptance_rate.value == pytest.approx(
                100 * accepted / (steps * n), rel=1e-9
            )
    for n, cell in cells.items():
        assert cell.speedup == pytest.approx(tok_s[n] / tok_s[0], rel=1e-9)


def test_failed_point_interrupt_and_resume(tmp_path) -> None:
    config = BenchConfig(input_len=16, output_len=32, num_prompts=2, warmups=0, ignore_eos=True)
    calls = []

    def interrupted_second(endpoint, config, label):
        calls.append(label)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return plain_run(endpoint, config, label)

    with sims("gemma4-26b-rtx5090m", (0,), speed=50.0) as urls:
        urls = {0: urls[0], 4: "http://127.0.0.1:9"}  # nothing listens on port 9
        first, store, _ = sweep(urls, tmp_path, config, repeats=2, run=interrupted_second)
        assert first.interrupted
        assert sorted(p.name for p in store.runs.iterdir()) == ["n0-c1-r1.json"]
        assert json.loads((store.folder / "summary.json").read_text())["interrupted"] is True

        # --resume: the saved run is kept, the rest measured, the dead point recorded
        again = run_sweep(store.load_spec(), AttachProvider(urls), store, run=plain_run)
    assert not again.interrupted
    assert sorted(p.name for p in store.runs.iterdir()) == ["n0-c1-r1.json", "n0-c1-r2.json"]
    s = again.summary
    assert "cannot use http://127.0.0.1:9" in s.failures["n_spec=4"]
    assert s.missing == ("n4-c1-r1", "n4-c1-r2")
    assert [c.n_spec for c in s.cells] == [0]
    saved = json.loads((store.folder / "failed.json").read_text())
    assert "n_spec=4" in saved


def test_sweep_command_with_a_concurrency_schedule(tmp_path, capsys) -> None:
    out = tmp_path / "sw"
    plot = tmp_path / "sw.png"
    with sims("gemma4-26b-rtx5090m", (0, 4), speed=50.0) as urls:
        code = main(["sweep", "--n-spec", "0,4", "--attach", urls[0], "--attach", urls[4],
                     "--concurrency", "1,2", "--repeats", "1", "--num-prompts", "2",
                     "--warmups", "0", "--input-len", "16", "--output-len", "48",
                     "--ignore-eos", "--gpu", "none", "--out", str(out),
                     "--plot", str(plot), "--method", "dflash", "--draft", "z-lab/d"])  # fmt: skip
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [r["concurrency"] for r in summary["recommendations"]] == [1, 2]
    picks = [r["by_throughput"]["n_spec"] for r in summary["recommendations"]]
    assert summary["command"].startswith("vllm serve cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit")
    assert "<METHOD>" not in summary["command"] and "<DRAFT_MODEL>" not in summary["command"]
    schedule = summary["num_speculative_tokens_per_batch_size"]
    assert schedule[0][0] == 1 and schedule[-1][1] == 2
    # Which point wins is measured (2 requests of 48 tokens through HTTP: a loaded machine can
    # make plain decoding win). The command says what the picks say, whichever they are.
    if any(picks):  # --method/--draft describe the attached servers: carried, no placeholder
        assert '"method": "dflash"' in summary["command"]
        assert '"model": "z-lab/d"' in summary["command"]
        assert "num_speculative_tokens_per_batch_size" in summary["command"]
    else:  # n_spec 0 at every concurrency: plain vLLM, no speculative config
        assert "--speculative-config" not in summary["command"]
    assert (out / "summary.csv").read_text().startswith("n_spec,concurrency,")
    assert sorted(p.name for p in (out / "runs").iterdir()) == [
        "n0-c1-r1.json", "n0-c2-r1.json", "n4-c1-r1.json", "n4-c2-r1.json",
    ]  # fmt: skip
    captured = capsys.readouterr()
    printed = captured.out
    assert "Recommended:" in printed and "SIMULATED" in printed and "x1.00" in printed
    assert f"specmon sweep: plot written to {plot}" in captured.err  # the path is said
    # The command is printed whole on one line, however long, to be copied (not cropped at the
    # 140 columns a non-terminal stdout gets).
    assert summary["command"] in printed.splitlines()
    assert len(summary["command"]) > 140 or not any(picks)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_resume_refuses_a_folder_without_a_sweep(tmp_path, capsys) -> None:
    assert main(["sweep", "--resume", str(tmp_path)]) == 2
    assert "holds no sweep" in capsys.readouterr().err


def test_a_new_sweep_refuses_to_overwrite_one(tmp_path, capsys) -> None:
    SweepStore(tmp_path).create(SweepSpec((0,), (1,), 1, BenchConfig(), {0: "http://x"}))
    assert main(["sweep", "--point", "0=http://127.0.0.1:9", "--out", str(tmp_path)]) == 2
    assert "--resume" in capsys.readouterr().err


@pytest.mark.slow
def test_compare_says_which_differences_beat_the_noise(tmp_path, capsys) -> None:
    config = ["--input-len", "32", "--output-len", "192", "--num-prompts", "6", "--warmups", "1",
              "--ignore-eos", "--gpu", "none"]  # fmt: skip
    files = {}
    with sims("gemma4-26b-rtx5090m", (0, 8), speed=10.0) as urls:
        for n, url in urls.items():
            files[n] = tmp_path / f"n{n}.json"
            assert main(["bench", "--attach", url, *config, "--json", str(files[n])]) == 0
        shorter = [*config]
        shorter[shorter.index("192")] = "64"  # the same server, answers a third as long
        files["short"] = tmp_path / "short.json"
        assert main(["bench", "--attach", urls[8], *shorter, "--json", str(files["short"])]) == 0
    # Another workload: no ratios (they would compare 192 against 64 tokens), unless --force.
    capsys.readouterr()
    assert main(["compare", str(files[8]), str(files["short"])]) == 2
    captured = capsys.readouterr()
    assert "output 192 vs 64" in captured.err and "--force" in captured.err
    assert captured.out == ""
    forced = tmp_path / "forced.md"
    assert main(["compare", str(files[8]), str(files["short"]), "--force", "--markdown",
                 str(forced)]) == 0  # fmt: skip
    assert "different workloads" in forced.read_text()
    md = tmp_path / "cmp.md"
    assert main(["compare", str(files[0]), str(files[8]), "--markdown", str(md)]) == 0
    rows = {
        line.split("|")[1].strip(): line for line in md.read_text().splitlines()[2:] if "|" in line
    }
    # n=8 streams about 3x faster than n=0 in the model: far beyond the noise
    assert "better" in rows["output tok/s"] and "better" in rows["E2EL mean (ms)"]
    # Nothing the step model makes better reads worse. TTFT is left out: the prefill is the same
    # step in both servers, a few ms at speed 10, so which reads lower is the machine's
    # scheduling (under load it read worse beyond the noise).
    assert rows["TTFT mean (ms)"].rstrip().endswith(("better |", "within noise |", "worse |"))
    assert not [row for name, row in rows.items() if "worse" in row and not name.startswith("TTFT")]
    assert "| — |" in rows["acceptance length"]  # n=0 has no acceptance: a dash, not 1.0 or 0
    # comparing a run with itself: every ratio 1, nothing beyond the noise
    same = tmp_path / "same.md"
    assert main(["compare", str(files[8]), str(files[8]), "--markdown", str(same)]) == 0
    text = same.read_text()
    assert "better" not in text and "worse" not in text and "x1.000 within noise" in text


def test_no_url_password_or_environment_token_in_the_sweep_or_bench_files(
    tmp_path, monkeypatch
) -> None:
    """Servers given as `http://user:password@host` and a token in the environment: no file a
    sweep or `bench --json` writes holds either (the URLs are kept without `user:password@`)."""
    password, token = "s3cret-Pw0rd", "hf_abcDEF0123456789ghiJKL"
    monkeypatch.setenv("HF_TOKEN", token)
    config = BenchConfig(
        input_len=16, output_len=16, num_prompts=2, warmups=0, extra_body={"user": token}
    )
    with sims("gemma4-26b-rtx5090m", (0, 4), speed=200.0) as plain:
        urls = {n: u.replace("http://", f"http://alice:{password}@") for n, u in plain.items()}
        _, store, _ = sweep(urls, tmp_path, config, repeats=1)
        bench_json = tmp_path / "bench.json"
        argv = ["bench", "--attach", urls[4], "--gpu", "none", "--num-prompts", "2"]
        argv += ["--output-len", "16", "--warmups", "0", "--label", f"run of {token}"]
        assert main([*argv, "--json", str(bench_json)]) == 0
    written = [p for p in store.folder.rglob("*") if p.is_file()] + [bench_json]
    assert {"sweep.json", "summary.json", "bench.json"} <= {p.name for p in written}
    for path in written:
        text = path.read_text()
        assert password not in text and token not in text, path.name
    spec = json.loads((store.folder / "sweep.json").read_text())
    assert set(spec["urls"].values()) == set(plain.values())
    assert json.loads(bench_json.read_text())["server"]["url"] == plain[4]
