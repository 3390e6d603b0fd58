"""Host mode for `specmon sweep` and `specmon bench`: a `vllm serve` per point (a stand-in `vllm`
that serves the simulator, tests/bench/fake_vllm_sim.py), serve grids crossed with --n-spec, a
point whose server fails to start, Ctrl-C and --resume, bad grid values."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from tests.support.host_mode import alive

from specmon.bench.config import ConfigError, grid_combinations, parse_serve_grid
from specmon.cli.main import main

MODEL = "cyankiwi/gemma-4-26B-A4B-it-AWQ-4bit"  # the simulator profile's served model name
TINY = [
    "--input-len", "24", "--output-len", "48", "--num-prompts", "2", "--warmups", "1",
    "--ignore-eos", "--gpu", "none", "--skip-arg-check",
]  # fmt: skip


def starts(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "starts"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def pids(tmp_path: Path) -> list[int]:
    path = tmp_path / "pids"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def option(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


@pytest.mark.slow
def test_host_sweep_with_a_grid_and_a_point_that_fails_to_start(
    sim_vllm, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("FAKE_SWEEP_FAIL", "4")
    monkeypatch.setenv("FAKE_SWEEP_SPEED", "4")  # slow enough that n=8's 2x is not noise
    out = tmp_path / "sw"
    code = main(
        [
            "sweep", "--vllm", str(sim_vllm), "--model", MODEL, "--method", "ngram",
            "--n-spec", "0,4,8", "--max-num-batched-tokens", "4096,8192", "--repeats", "1",
            "--out", str(out), *TINY, "--num-prompts", "4",  # n=8's 2x beyond any noise
            "--", "--gpu-memory-utilization", "0.8",
        ]
    )  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    # One server per (grid value, n_spec): six starts, the failing ones included.
    started = starts(tmp_path)
    assert len(started) == 6
    by_point = {
        (json.loads(option(a, "--speculative-config") or "{}").get("num_speculative_tokens", 0),
         option(a, "--max-num-batched-tokens")): a
        for a in started
    }  # fmt: skip
    assert set(by_point) == {(n, v) for v in ("4096", "8192") for n in (0, 4, 8)}
    for argv in by_point.values():
        assert option(argv, "--gpu-memory-utilization") == "0.8"  # the extra args reach vLLM
    assert "--speculative-config" not in by_point[(0, "4096")]  # n_spec 0 is vanilla
    # Every server of the sweep is gone: each point's group was stopped before the next.
    assert pids(tmp_path) and not [p for p in pids(tmp_path) if alive(p)]

    summary = json.loads((out / "summary.json").read_text())
    cells = {(c["n_spec"], dict(c["serve"])["max_num_batched_tokens"]) for c in summary["cells"]}
    assert cells == {(0, "4096"), (8, "4096"), (0, "8192"), (8, "8192")}
    failures = summary["failures"]
    assert set(failures) == {
        "n_spec=4 max_num_batched_tokens=4096",
        "n_spec=4 max_num_batched_tokens=8192",
    }
    assert all("the GPU ran out of memory" in cause for cause in failures.values())
    assert sorted(summary["missing"]) == [
        "n4_max_num_batched_tokens-4096-c1-r1",
        "n4_max_num_batched_tokens-8192-c1-r1",
    ]
    recs = {
        json.dumps(r["serve"]): r["by_throughput"]["n_spec"] for r in summary["recommendations"]
    }
    assert recs == {
        '{"max_num_batched_tokens": "4096"}': 8,
        '{"max_num_batched_tokens": "8192"}': 8,
    }
    assert "--max-num-batched-tokens" in summary["command"]
    assert "--gpu-memory-utilization 0.8" in summary["command"]
    assert "prompt_lookup_max" in summary["command"] and "DRAFT_MODEL" not in summary["command"]

    rows = list(csv.reader(io.StringIO((out / "summary.csv").read_text())))
    assert rows[0][:2] == ["max_num_batched_tokens", "n_spec"]
    assert sorted((r[0], r[1]) for r in rows[1:]) == [
        ("4096", "0"), ("4096", "8"), ("8192", "0"), ("8192", "8")
    ]  # fmt: skip
    assert "| max_num_batched_tokens | n_spec |" in (out / "summary.md").read_text()
    assert "max_num_batched_tokens" in text and "Failed points: n_spec=4" in text


def test_ctrl_c_stops_the_server_and_resume_finishes_the_sweep(
    sim_vllm, tmp_path, monkeypatch, capsys
) -> None:
    import specmon.bench.runner as runner

    real = runner.run_bench
    calls = []

    async def interrupted_second(endpoint, config, **kw):
        calls.append(endpoint.base_url)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C while the second point's server is up
        return await real(endpoint, config, **kw)

    monkeypatch.setattr(runner, "run_bench", interrupted_second)
    out = tmp_path / "sw"
    argv = ["sweep", "--vllm", str(sim_vllm), "--model", MODEL, "--method", "ngram",
            "--n-spec", "0,8", "--repeats", "1", "--out", str(out), *TINY]  # fmt: skip
    assert main(argv) == 130
    assert "continue with --resume" in capsys.readouterr().err
    assert len(starts(tmp_path)) == 2
    assert pids(tmp_path) and not [p for p in pids(tmp_path) if alive(p)]
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["n0-c1-r1.json"]
    assert json.loads((out / "summary.json").read_text())["interrupted"] is True

    monkeypatch.setattr(runner, "run_bench", real)
    # --resume alone: the folder's flags are shown, never run (a shared folder chooses nothing).
    assert main(["sweep", "--resume", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and f"--vllm {sim_vllm}" in err
    assert len(starts(tmp_path)) == 2
    # --resume with the same host-mode flags given again: only the missing point is started.
    again_argv = ["sweep", "--resume", str(out), "--vllm", str(sim_vllm), "--model", MODEL,
                  "--method", "ngram", "--skip-arg-check"]  # fmt: skip
    assert main(again_argv) == 0
    again = starts(tmp_path)[2:]
    assert len(again) == 1
    assert (
        json.loads(option(again[0], "--speculative-config") or "{}")["num_speculative_tokens"] == 8
    )
    summary = json.loads((out / "summary.json").read_text())
    assert [c["n_spec"] for c in summary["cells"]] == [0, 8]
    assert not summary["missing"] and not summary["interrupted"]
    assert not [p for p in pids(tmp_path) if alive(p)]


def test_resume_refuses_saved_flags_that_held_a_secret(sim_vllm, tmp_path, monkeypatch, capsys):
    import specmon.bench.runner as runner

    async def ctrl_c(endpoint, config, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_bench", ctrl_c)
    out = tmp_path / "sw"
    argv = ["sweep", "--vllm", str(sim_vllm), "--model", MODEL, "--method", "ngram",
            "--n-spec", "8", "--repeats", "1", "--out", str(out), *TINY,
            "--", "--api-key", "sekrit-value"]  # fmt: skip
    assert main(argv) == 130
    assert not any("sekrit-value" in p.read_text() for p in out.rglob("*.json"))
    capsys.readouterr()
    assert main(["sweep", "--resume", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "never saved" in err


def test_bench_host_mode_starts_benches_and_stops_one_server(sim_vllm, tmp_path) -> None:
    result = tmp_path / "r.json"
    code = main(
        ["bench", "--vllm", str(sim_vllm), "--model", MODEL, "--method", "ngram", "--n-spec",
         "6", "--port", "0", "--json", str(result), *TINY]
    )  # fmt: skip
    assert code == 0
    data = json.loads(result.read_text())
    assert data["server"]["n_spec"] == 6
    assert data["summary"]["completed"] == 2
    assert len(starts(tmp_path)) == 1
    assert not [p for p in pids(tmp_path) if alive(p)]


def test_host_mode_requests_the_model_the_started_server_serves(sim_vllm, tmp_path) -> None:
    """A local model directory served under another name (`--served-model-name`, as with the
    real tier's tiny model): requests use the name the server lists, not --model, and the
    recommendation's command line keeps the directory. Before: every point failed with
    "does not serve '<dir>'" (seen against the real vLLM)."""
    local = tmp_path / "models" / "target"
    local.mkdir(parents=True)
    out = tmp_path / "sw"
    code = main(
        ["sweep", "--vllm", str(sim_vllm), "--model", str(local), "--method", "ngram",
         "--n-spec", "0,4", "--repeats", "1", "--out", str(out), *TINY,
         "--", "--served-model-name", MODEL]
    )  # fmt: skip
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert not summary["failures"] and not summary["missing"]
    assert summary["command"].startswith(f"vllm serve {local} ")
    assert [option(a, "--served-model-name") for a in starts(tmp_path)] == [MODEL, MODEL]
    assert [a[1] for a in starts(tmp_path)] == [str(local), str(local)]


def test_bench_host_mode_reports_a_server_that_fails_to_start(
    sim_vllm, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("FAKE_SWEEP_FAIL", "6")
    code = main(
        ["bench", "--vllm", str(sim_vllm), "--model", MODEL, "--method", "ngram", "--n-spec",
         "6", "--port", "0", *TINY]
    )  # fmt: skip
    assert code == 1
    assert "the GPU ran out of memory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--max-num-batched-tokens", "0,8192"], "from 1 to"),
        (["--max-num-batched-tokens", "4096,4096"], "twice"),
        (["--max-num-batched-tokens", "4k"], "integers"),
        (["--serve-grid", "port=1,2"], "cannot set port"),
        (["--serve-grid", "speculative-config=a,b"], "cannot set speculative_config"),
        (["--serve-grid", "max_num_seqs"], "NAME=V1,V2"),
        (["--serve-grid", "max_num_seqs=4,"], "comma-separated"),
        (["--serve-grid", "max_num_seqs=4", "--serve-grid", "max-num-seqs=8"], "twice"),
        (["--serve-grid", "9lives=1"], "NAME=V1,V2"),
    ],
)
def test_bad_grid_values_give_one_line_and_exit_2(tmp_path, capsys, argv, needle) -> None:
    code = main(["sweep", "--model", "m", "--method", "ngram", "--n-spec", "0,8", *argv,
                 "--out", str(tmp_path / "sw")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "sw").exists()


def test_a_grid_needs_host_mode_and_host_mode_needs_n_spec(tmp_path, capsys) -> None:
    code = main(["sweep", "--point", "0=http://127.0.0.1:9", "--max-num-batched-tokens", "4096",
                 "--out", str(tmp_path / "a")])  # fmt: skip
    assert code == 2 and "need host mode" in capsys.readouterr().err
    assert main(["sweep", "--model", "m", "--method", "ngram", "--out", str(tmp_path / "b")]) == 2
    assert "--n-spec" in capsys.readouterr().err
    missing = str(tmp_path / "no-vllm")
    code = main(["sweep", "--model", "m", "--method", "ngram", "--n-spec", "0,8",
                 "--vllm", missing, "--out", str(tmp_path / "c")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no such executable" in err
    assert not (tmp_path / "c").exists()


def test_grid_parsing_and_combinations() -> None:
    grid = parse_serve_grid(["max-num-batched-tokens=4096,8192", "kv_cache_dtype=auto,fp8"])
    assert grid == (
        ("max_num_batched_tokens", ("4096", "8192")),
        ("kv_cache_dtype", ("auto", "fp8")),
    )
    assert grid_combinations(grid) == [
        (("max_num_batched_tokens", "4096"), ("kv_cache_dtype", "auto")),
        (("max_num_batched_tokens", "4096"), ("kv_cache_dtype", "fp8")),
        (("max_num_batched_tokens", "8192"), ("kv_cache_dtype", "auto")),
        (("max_num_batched_tokens", "8192"), ("kv_cache_dtype", "fp8")),
    ]
    assert grid_combinations(()) == [()]
    with pytest.raises(ConfigError, match="spaces"):
        parse_serve_grid(["kv_cache_dtype=a b"])


def test_dry_run_prints_every_points_command(sim_vllm, tmp_path, capsys) -> None:
    code = main(["sweep", "--vllm", str(sim_vllm), "--model", MODEL, "--method", "ngram",
                 "--n-spec", "0,8", "--max-num-batched-tokens", "4096", "--skip-arg-check",
                 "--dry-run", "--gpu", "none", "--out", str(tmp_path / "sw")])  # fmt: skip
    text = capsys.readouterr().out
    assert code == 0
    assert "# n_spec=0 max_num_batched_tokens=4096" in text
    assert "# n_spec=8 max_num_batched_tokens=4096" in text
    assert text.count("--max-num-batched-tokens 4096") == 2
    assert text.count("--speculative-config") == 1
    assert not starts(tmp_path) and not (tmp_path / "sw").exists()
