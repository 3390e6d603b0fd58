"""`specmon sweep --emit-vllm-dynamic FILE`: the per-batch-size schedule as vLLM's speculative
config, checked against the rules of vLLM's reader (vllm/v1/spec_decode/dynamic/utils.py).

vLLM's reader, as its source documents it: `num_speculative_tokens_per_batch_size` is a non-empty
list of 3-item `(range_start, range_end, k)` entries, inclusive ranges with positive bounds,
start <= end, k >= 0; sorted by start they must not overlap and the first must start at 1. The
scheduler then uses, for a step of B requests, the k of the range holding B (a gap or the tail
past the last range takes the previous range's k), clamped to `num_speculative_tokens` (> 0).
The checks below restate those rules on their own, not through the module under test.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field

import pytest
from tests.support.sim_servers import sims

from specmon.bench.recommend import ServeIdentity
from specmon.bench.vllm_dynamic import dynamic_config, write_dynamic_config
from specmon.cli.main import main
from specmon.core.per_batch_k import ScheduleError, check_schedule, k_at


def vllm_accepts(schedule: object) -> bool:
    """vLLM's documented validation, restated."""
    if not isinstance(schedule, list) or not schedule:
        return False
    for entry in schedule:
        if not isinstance(entry, list) or len(entry) != 3:
            return False
        start, end, k = entry
        if start <= 0 or end <= 0 or start > end or k < 0:
            return False
    ordered = sorted(schedule, key=lambda e: e[0])
    if ordered[0][0] != 1:
        return False
    return all(b[0] > a[1] for a, b in itertools.pairwise(ordered))


def vllm_k(schedule: list[list[int]], batch_size: int, num_speculative_tokens: int) -> int:
    """The k vLLM's dense lookup gives a batch size, restated: walk the ranges in order."""
    k = None
    for start, end, kk in sorted(schedule, key=lambda e: e[0]):
        if start > batch_size:
            break
        k = kk
        if batch_size <= end:
            break
    assert k is not None
    return min(k, num_speculative_tokens)


@dataclass
class FakeSummary:
    schedule: list[list[int]] | None
    identity: ServeIdentity = field(default_factory=ServeIdentity)
    simulated: bool = False


def test_the_file_is_the_speculative_config_vllm_reads(tmp_path) -> None:
    identity = ServeIdentity(
        model="t", draft_model="d", method="draft_model", extra={"prompt_lookup_max": 4}
    )
    summary = FakeSummary([[1, 1, 8], [2, 4, 4], [5, 16, 0]], identity, simulated=True)
    path = tmp_path / "dyn.json"
    note = write_dynamic_config(summary, path)  # type: ignore[arg-type]
    config = json.loads(path.read_text())
    assert config == {
        "method": "draft_model",
        "model": "d",
        "num_speculative_tokens": 8,
        "num_speculative_tokens_per_batch_size": [[1, 1, 8], [2, 4, 4], [5, 16, 0]],
        "prompt_lookup_max": 4,
    }
    schedule = config["num_speculative_tokens_per_batch_size"]
    assert vllm_accepts(schedule)
    # vLLM runs exactly the sweep's choice at each measured batch size, and carries the last
    # range's k (vanilla here) past 16.
    for bs, want in ((1, 8), (2, 4), (4, 4), (5, 0), (16, 0), (64, 0)):
        assert vllm_k(schedule, bs, config["num_speculative_tokens"]) == want
        assert k_at(schedule, bs, config["num_speculative_tokens"]) == want
    assert "SIMULATED" in note and "--speculative-config" in note
    assert not list(tmp_path.glob(".dyn.json.*"))  # no temporary file left


def test_without_a_known_method_only_the_schedule_keys_are_written(tmp_path) -> None:
    path = tmp_path / "dyn.json"
    note = write_dynamic_config(FakeSummary([[1, 4, 3], [5, 8, 1]]), path)  # type: ignore[arg-type]
    assert json.loads(path.read_text()) == {
        "num_speculative_tokens": 3,
        "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 8, 1]],
    }
    assert "merge" in note


def test_no_file_without_a_schedule_or_when_vanilla_wins_everywhere(tmp_path) -> None:
    with pytest.raises(ScheduleError, match="two or more --concurrency"):
        dynamic_config(FakeSummary(None))  # type: ignore[arg-type]
    # vLLM refuses num_speculative_tokens 0: an all-vanilla schedule is no speculative config.
    with pytest.raises(ScheduleError, match="vanilla"):
        dynamic_config(FakeSummary([[1, 16, 0]]))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        [],
        [[2, 4, 3]],  # does not start at 1
        [[1, 4, 3], [4, 8, 2]],  # overlap
        [[1, 4, -1]],  # negative k
        [[1, 0, 2]],  # end < start
        [[1, 4]],  # not 3 items
        [[1, 4, 2.5]],  # not an integer
        "1-4:3",
    ],
)
def test_check_schedule_refuses_what_vllm_refuses(bad: object) -> None:
    if isinstance(bad, list) and all(isinstance(v, int) for e in bad for v in e):
        assert not vllm_accepts(bad)
    with pytest.raises(ScheduleError):
        check_schedule(bad)


def test_check_schedule_sorts_like_vllm() -> None:
    assert check_schedule([[5, 8, 1], [1, 4, 3]]) == [(1, 4, 3), (5, 8, 1)]


def test_sweep_emits_the_file_for_its_schedule(tmp_path, capsys) -> None:
    out = tmp_path / "sw"
    dyn = tmp_path / "dyn.json"
    with sims("gemma4-26b-rtx5090m", (0, 4), speed=50.0) as urls:
        code = main(["sweep", "--n-spec", "0,4", "--attach", urls[0], "--attach", urls[4],
                     "--concurrency", "1,2", "--repeats", "1", "--num-prompts", "2",
                     "--warmups", "0", "--input-len", "16", "--output-len", "48",
                     "--ignore-eos", "--gpu", "none", "--out", str(out),
                     "--emit-vllm-dynamic", str(dyn)])  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    schedule = summary["num_speculative_tokens_per_batch_size"]
    err = capsys.readouterr().err
    if max(k for *_, k in schedule) == 0:  # vanilla fastest at both: no file, said so
        assert code == 1 and not dyn.exists() and "vanilla" in err
        return
    assert code == 0, err
    config = json.loads(dyn.read_text())
    assert config["num_speculative_tokens_per_batch_size"] == schedule
    assert vllm_accepts(schedule)
    for rec in summary["recommendations"]:
        want = rec["by_throughput"]["n_spec"]
        assert vllm_k(schedule, rec["concurrency"], config["num_speculative_tokens"]) == want
    assert "SIMULATED" in err


def test_sweep_refuses_a_target_in_a_missing_folder_before_measuring(tmp_path, capsys) -> None:
    code = main(["sweep", "--n-spec", "0,4", "--attach", "http://127.0.0.1:9",
                 "--attach", "http://127.0.0.1:9", "--concurrency", "1,2",
                 "--out", str(tmp_path / "sw"),
                 "--emit-vllm-dynamic", str(tmp_path / "no" / "dyn.json")])  # fmt: skip
    assert code == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "sw").exists()


def test_the_recommended_command_has_no_speculation_when_vanilla_wins_everywhere() -> None:
    # vLLM refuses num_speculative_tokens 0: an all-vanilla schedule is a plain `vllm serve`.
    from specmon.bench.recommend import serve_command

    ident = ServeIdentity(model="m", method="draft_model", draft_model="d")
    assert serve_command(ident, 0, [[1, 16, 0]]) == "vllm serve m"
    mixed = serve_command(ident, 0, [[1, 4, 4], [5, 16, 0]])
    spec = json.loads(mixed.split("--speculative-config ", 1)[1].strip("'"))
    assert spec["num_speculative_tokens"] == 4
