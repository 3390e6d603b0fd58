"""`specmon bench --context-sweep`: the bench at several prompt lengths against a simulator whose
acceptance falls with context (`--drift context:...`), and acceptance by context found over all
runs; the plain simulator shows no fall-off. Random prompts are reported as random words with a
caveat; `--dataset FILE` cuts the file's own text to each length (what the server got is read from
the simulator's request bodies)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from specmon.bench.config import ConfigError
from specmon.bench.context_sweep import parse_lengths
from specmon.bench.prompts import DATASET_JOINER, DatasetError, cut_prompt, text_prompts
from specmon.cli.main import main
from specmon.sim import tokenizer
from specmon.sim.server import SimConfig, start_in_thread


def test_lengths_parse_sorted_and_bad_ones_fail() -> None:
    assert parse_lengths("8192, 1024,20480") == (1024, 8192, 20480)
    for bad in ("1024", "1024,x", "0,5", "1024,1024"):
        with pytest.raises(ConfigError):
            parse_lengths(bad)


def _run_sweep(
    tmp_path: Path, drift: str | None, *extra: str, bodies: list[dict[str, Any]] | None = None
) -> tuple[int, Path]:
    """The sweep 64,700 against a simulator; `bodies` gets each chat request's JSON body."""
    out = tmp_path / "sweep.json"
    with start_in_thread(
        SimConfig(speed=50.0, seed=7, drift=drift, log_interval=0.0), log_sink=lambda _l: None
    ) as sim:
        if bodies is not None:
            chat = sim.app.chat

            async def recording_chat(request: Any, reply: Any) -> None:
                bodies.append(json.loads(request.body))
                await chat(request, reply)

            sim.app.chat = recording_chat  # type: ignore[method-assign]
        code = main(
            [
                "bench",
                "--attach",
                sim.url,
                "--context-sweep",
                "64,700",
                "--output-len",
                "200",
                "--num-prompts",
                "3",
                "--ignore-eos",
                "--json",
                str(out),
                *extra,
            ]
        )
    return code, out


def _sweep(tmp_path, drift: str | None, *extra: str, bodies: list | None = None) -> dict:
    code, out = _run_sweep(tmp_path, drift, *extra, bodies=bodies)
    assert code == 0
    return json.loads(out.read_text())["context_sweep"]


def test_the_sweep_finds_where_acceptance_falls_off(tmp_path, capsys) -> None:
    sweep = _sweep(tmp_path, "context:300:600")
    short, long = sweep["points"]
    assert (short["input_len"], long["input_len"]) == (64, 700)
    assert short["completed"] == 3 and long["completed"] == 3
    assert long["acceptance_length"] < 0.6 * short["acceptance_length"]
    assert sweep["context"]["detected"]
    assert "acceptance by context on random words: AL" in capsys.readouterr().out


def test_the_plain_simulator_has_no_fall_off(tmp_path) -> None:
    sweep = _sweep(tmp_path, None)
    assert not sweep["context"]["detected"]
    short, long = sweep["points"]
    assert long["acceptance_length"] == pytest.approx(short["acceptance_length"], rel=0.2)


def test_the_sweep_refuses_a_recording_in_one_line(capsys) -> None:
    code = main(
        ["bench", "--attach", "http://127.0.0.1:9", "--context-sweep", "64,700", "--record", "x"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--context-sweep" in err and err.count("\n") == 1


# ---- what the context is: random words (with a caveat) or the dataset's own text

PARAGRAPHS = [
    " ".join(f"{name} paragraph sentence {i} tells of the river and the stone." for i in range(40))
    for name in ("First", "Second", "Third")
]
"""Three dataset prompts of ~480 tokens each (the simulator counts a word as one token)."""


def _dataset(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "texts.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_random_prompts_are_reported_as_random_words_with_a_caveat(tmp_path, capsys) -> None:
    sweep = _sweep(tmp_path, "context:300:600")
    assert sweep["prompt_text"] == "random words"
    caveat = sweep["caveat"]
    assert "random words" in caveat
    assert "rather than a context limit" in caveat and "--dataset FILE" in caveat
    out = capsys.readouterr().out
    assert "acceptance by context on random words: AL" in out
    assert f"caveat: {caveat}" in out


def test_a_dataset_sweep_sends_the_files_text_cut_to_each_length(tmp_path, capsys) -> None:
    lines = [json.dumps({"prompt": t, "output_len": 5}) for t in PARAGRAPHS]
    bodies: list[dict[str, Any]] = []
    sweep = _sweep(
        tmp_path, "context:300:600", "--dataset", str(_dataset(tmp_path, lines)), bodies=bodies
    )
    # 2 warm-ups + 3 measured at each length; every one asks --output-len, not the line's 5
    assert len(bodies) == 10
    assert {b["max_tokens"] for b in bodies} == {200}
    joined = [DATASET_JOINER.join(PARAGRAPHS[i:] + PARAGRAPHS[:i]) for i in range(3)]
    for body, length in zip(bodies, [64] * 5 + [700] * 5, strict=True):
        (message,) = body["messages"]
        text = message["content"]
        assert any(j.startswith(text) for j in joined), text[:80]
        assert len(tokenizer.encode(text, add_special_tokens=False)) == length
    # the 700-token prompts run on from one paragraph into the next
    assert all(DATASET_JOINER in b["messages"][0]["content"] for b in bodies[5:])
    # seed 0: measured prompt i starts at paragraph i
    measured_700 = [b["messages"][0]["content"] for b in bodies[7:]]
    assert [t.split()[0] for t in measured_700] == ["First", "Second", "Third"]
    assert sweep["prompt_text"] == "dataset text" and sweep["caveat"] is None
    assert sweep["context"]["detected"]
    out = capsys.readouterr().out
    assert "acceptance by context on dataset text: AL" in out and "caveat" not in out


def test_a_dataset_too_short_in_bytes_is_refused_in_one_line_before_the_server(
    tmp_path, capsys
) -> None:
    data = _dataset(tmp_path, [json.dumps("a short text")])
    code = main(
        ["bench", "--attach", "http://127.0.0.1:9", "--context-sweep", "64,700", "--dataset",
         str(data)]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--context-sweep 700" in err and str(data) in err, err


def test_a_dataset_too_short_in_tokens_stops_the_sweep_in_one_line(tmp_path, capsys) -> None:
    # 1,200 bytes, but the simulator counts a word of 99 letters as one token: ~12 in all
    words = " ".join(["x" * 99] * 12)
    code, _ = _run_sweep(tmp_path, None, "--dataset", str(_dataset(tmp_path, [json.dumps(words)])))
    assert code == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("specmon bench:")]
    assert len(lines) == 1, err
    assert "too short for 64 prompt tokens" in lines[0], lines[0]
    assert "Traceback" not in err


def test_a_bad_dataset_line_is_still_one_line_with_the_sweep(tmp_path, capsys) -> None:
    data = _dataset(tmp_path, [json.dumps("fine " * 400), "{not json"])
    code = main(
        ["bench", "--attach", "http://127.0.0.1:9", "--context-sweep", "64,700", "--dataset",
         str(data)]
    )  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{data}:2: not JSON" in err, err


async def _count_chars(text: str) -> int:
    return len(text)


def test_text_is_cut_to_the_exact_count_from_the_seeded_start() -> None:
    texts = ["alpha " * 50, "beta " * 50, "gamma " * 50]
    prompts = asyncio.run(text_prompts(texts, 4, 400, 9, 1, _count_chars))
    assert [p.text[:4] for p in prompts] == ["beta", "gamm", "alph", "beta"]
    assert all(len(p.text) == 400 and p.input_tokens == 400 for p in prompts)
    assert all(p.output_len == 9 for p in prompts)
    # gamma (300 chars) wraps to alpha: one lap of the text in file order
    assert prompts[1].text == DATASET_JOINER.join(texts[2:] + texts[:1])[:400]


def test_text_shorter_than_the_length_is_an_error_not_padding() -> None:
    with pytest.raises(DatasetError, match="fewer than the 1,000 asked"):
        asyncio.run(cut_prompt(["short", "texts"], 0, 1000, _count_chars))


def test_the_gpu_runs_held_out_code_holds_every_length_it_is_swept_at(tmp_path) -> None:
    """The trained-drafter GPU script sweeps 64,512,900 on this committed file."""
    root = Path(__file__).resolve().parents[2]
    data = root / "benchmarks" / "dflash_trained" / "heldout_code_context.jsonl"
    assert '--dataset "$CTX_TEXT"' in (data.parent / "device.sh").read_text()
    out = tmp_path / "sweep.json"
    with start_in_thread(SimConfig(speed=50.0, seed=7), log_sink=lambda _l: None) as sim:
        code = main(
            ["bench", "--attach", sim.url, "--context-sweep", "64,512,900", "--dataset", str(data),
             "--num-prompts", "4", "--warmups", "0", "--output-len", "8", "--json", str(out)]
        )  # fmt: skip
    assert code == 0
    sweep = json.loads(out.read_text())["context_sweep"]
    assert [p["input_len"] for p in sweep["points"]] == [64, 512, 900]
    assert sweep["prompt_text"] == "dataset text"
