"""core.startup_log: startup phases from vLLM's own log lines, and failure causes."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon.core.startup_log import StartupPhase, StartupTracker, recognise_failure

GOLDEN = Path(__file__).parents[1] / "golden" / "logs"


def test_a_real_startup_log_goes_through_the_phases_in_order():
    tracker = StartupTracker()
    phases = []
    for line in (GOLDEN / "ngram-startup.log").read_text().splitlines():
        if tracker.feed(line):
            phases.append(tracker.progress.phase)
    p = tracker.progress
    assert phases == sorted(phases)  # never backwards
    assert StartupPhase.LOADING_WEIGHTS in phases
    assert StartupPhase.KV_CACHE in phases
    assert p.phase is StartupPhase.APP_STARTED
    assert p.vllm_version == "0.32.0"
    assert p.weights_s == pytest.approx(0.01)
    assert p.kv_cache_tokens == 1_048_576
    assert p.max_concurrency == pytest.approx(1024.0)
    assert p.engine_init_s == pytest.approx(5.91)
    assert p.url == "http://127.0.0.1:56525"
    assert tracker.mark_ready().phase is StartupPhase.READY
    assert "ready" in tracker.progress.words


def test_gpu_lines_give_weights_memory_kv_and_graph_capture():
    lines = [
        "(EngineCore pid=1) INFO 08-20 15:40:00 [gpu_model_runner.py:1] Model loading took "
        "15.23 GiB memory and 42.100000 seconds",
        "(EngineCore pid=1) INFO 08-20 15:40:01 [gpu_worker.py:1] Available KV cache memory: "
        "9.87 GiB",
        "(EngineCore pid=1) INFO 08-20 15:40:01 [kv_cache_utils.py:1] GPU KV cache size: "
        "215,568 tokens, Maximum concurrency for 2,048 tokens per request: 105.26x",
        "\x1b[36m(EngineCore pid=1)\x1b[0m Capturing CUDA graphs (mixed prefill-decode, PIECEWISE)"
        ":  40%|████      | 27/67",
        "(EngineCore pid=1) INFO 08-20 15:40:20 [gpu_model_runner.py:1] Graph capturing finished "
        "in 19 secs, took 0.84 GiB",
    ]
    tracker = StartupTracker()
    seen = []
    for line in lines:
        tracker.feed(line)
        seen.append(tracker.progress.words)
    p = tracker.progress
    assert p.weights_gib == pytest.approx(15.23)
    assert p.weights_s == pytest.approx(42.1)
    assert p.kv_cache_gib == pytest.approx(9.87)
    assert p.kv_cache_tokens == 215_568
    assert p.phase is StartupPhase.GRAPH_CAPTURE
    assert p.graph_capture_s == pytest.approx(19.0)
    assert seen[0] == "weights loaded: 15.23 GiB, 42.1 s"
    assert seen[2] == "KV cache sized: 215,568 tokens, 9.87 GiB"


def test_odd_text_never_raises_and_changes_nothing():
    tracker = StartupTracker()
    for line in (
        "",
        "\x00\x1b[",
        "GPU KV cache size: 99999999999999999999999999 tokens",
        "é" * 5000,
    ):
        tracker.feed(line)
    assert tracker.progress.phase in (StartupPhase.LAUNCHED, StartupPhase.KV_CACHE)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "cuda-oom"),
        ("ValueError: No available memory for the cache blocks. Try increasing", "cuda-oom"),
        (
            "ValueError: Selected backend AttentionBackendEnum.TRITON_ATTN is not valid for this "
            "configuration. Reason: ['non-causal attention not supported']",
            "non-causal-attention",
        ),
        ("OSError: [Errno 98] Address already in use", "port-in-use"),
        (
            "OSError: nosuch/model is not a local folder and is not a valid model identifier "
            "listed on 'https://huggingface.co/models'",
            "unknown-model",
        ),
        ("huggingface_hub.errors.RepositoryNotFoundError: 404 Client Error.", "unknown-model"),
        (
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.",
            "engine-dead",
        ),
    ],
)
def test_each_cause_is_recognised(line: str, kind: str):
    cause = recognise_failure(["INFO starting", line])
    assert cause is not None
    assert cause.kind == kind
    assert cause.summary and cause.hint


def test_a_specific_cause_beats_engine_dead_which_follows_most_failures():
    lines = [
        "torch.OutOfMemoryError: CUDA out of memory.",
        "RuntimeError: Engine core initialization failed. See root cause above.",
    ]
    assert recognise_failure(lines).kind == "cuda-oom"
    assert recognise_failure(lines[1:]).kind == "engine-dead"


def test_a_clean_log_has_no_cause():
    assert recognise_failure((GOLDEN / "ngram-startup.log").read_text().splitlines()) is None
