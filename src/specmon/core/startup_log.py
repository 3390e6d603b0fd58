"""Startup progress and failure causes, read from the lines a hosted `vllm serve` prints.

Pure parsing (reference/vllm-observability.md §3.4): `StartupTracker.feed(line)` moves through the
phases vLLM goes through — engine init, weights loading, weights loaded, KV cache sized, CUDA-graph
capture, API server starting, application started — and keeps the numbers those lines carry
(weights seconds and GiB, KV-cache tokens and GiB, graph-capture seconds). Readiness itself is
decided by `/health` answering 200 (the caller polls it); the log only says how far startup got.

`recognise_failure(lines)` names the likely cause of a failed start from the log's lines (CUDA out
of memory, unknown model, no attention backend for non-causal attention, port in use, engine
dead). Log text is untrusted: nothing here raises on odd input, and results are plain strings for
the caller to display literally.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from specmon.core.log_lines import strip_ansi
from specmon.core.numbers import parse_float


class StartupPhase(enum.IntEnum):
    """How far a `vllm serve` start got, in the order vLLM goes through it."""

    LAUNCHED = 0
    ENGINE_INIT = 1
    LOADING_WEIGHTS = 2
    WEIGHTS_LOADED = 3
    KV_CACHE = 4
    GRAPH_CAPTURE = 5
    API_STARTING = 6
    APP_STARTED = 7
    READY = 8


PHASE_WORDS: dict[StartupPhase, str] = {
    StartupPhase.LAUNCHED: "starting vLLM",
    StartupPhase.ENGINE_INIT: "initialising the engine",
    StartupPhase.LOADING_WEIGHTS: "loading weights",
    StartupPhase.WEIGHTS_LOADED: "weights loaded",
    StartupPhase.KV_CACHE: "KV cache sized",
    StartupPhase.GRAPH_CAPTURE: "capturing CUDA graphs",
    StartupPhase.API_STARTING: "starting the API server",
    StartupPhase.APP_STARTED: "application started, waiting for /health",
    StartupPhase.READY: "ready (/health 200)",
}


@dataclass(frozen=True, slots=True)
class StartupProgress:
    """What the log said so far. Numbers are None until the line carrying them is seen."""

    phase: StartupPhase = StartupPhase.LAUNCHED
    vllm_version: str | None = None
    weights_s: float | None = None
    weights_gib: float | None = None
    kv_cache_gib: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    graph_capture_s: float | None = None
    engine_init_s: float | None = None
    url: str | None = None

    @property
    def words(self) -> str:
        """One line for a progress display, e.g. "KV cache sized: 1,048,576 tokens"."""
        text = PHASE_WORDS[self.phase]
        details: list[str] = []
        if self.phase is StartupPhase.WEIGHTS_LOADED:
            if self.weights_gib is not None:
                details.append(f"{self.weights_gib:.2f} GiB")
            if self.weights_s is not None:
                details.append(f"{self.weights_s:.1f} s")
        elif self.phase is StartupPhase.KV_CACHE:
            if self.kv_cache_tokens is not None:
                details.append(f"{self.kv_cache_tokens:,} tokens")
            if self.kv_cache_gib is not None:
                details.append(f"{self.kv_cache_gib:.2f} GiB")
        elif self.phase is StartupPhase.API_STARTING and self.url:
            details.append(self.url)
        return f"{text}: {', '.join(details)}" if details else text


_NUM = r"(\d[\d,]*(?:\.\d+)?)"


def _number(text: str) -> float | None:
    return parse_float(text.replace(",", ""))


def _integer(text: str) -> int | None:
    value = _number(text)
    return int(value) if value is not None and value.is_integer() else None


_ENGINE_INIT = re.compile(r"Initializing a V\d LLM engine \(v([^)\s]+)\)")
_BANNER_VERSION = re.compile(
    r"(?:vLLM (?:API )?server version\s+|█\s+version\s+)([0-9][\w.+-]*)", re.IGNORECASE
)
_LOADING = re.compile(
    r"Starting to load model|Loading safetensors checkpoint shards|Loading weights|"
    r"Loading drafter model|Loading model from scratch"
)
_WEIGHTS_TOOK = re.compile(r"Loading weights took " + _NUM + r" seconds")
_MODEL_LOADING_TOOK = re.compile(
    r"Model loading took " + _NUM + r" ?GiB(?: memory)? and " + _NUM + r" seconds"
)
_KV_MEMORY = re.compile(r"Available KV cache memory: " + _NUM + r" ?GiB")
_KV_SIZE = re.compile(
    r"(?:GPU|CPU|XPU|TPU)? ?KV cache size: " + _NUM + r" tokens"
    r"(?:, Maximum concurrency for " + _NUM + r" tokens per request: " + _NUM + r"x)?"
)
_GRAPH_START = re.compile(r"Capturing CUDA graph|Capturing cudagraph|CUDA graph capturing")
_GRAPH_DONE = re.compile(r"Graph capturing finished in " + _NUM + r" secs")
_INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took " + _NUM)
_API_START = re.compile(
    r"Starting vLLM (?:API )?server(?: \d+)? on (\S+)|Starting vLLM API server \d+ on (\S+)"
)
_APP_STARTED = re.compile(r"Application startup complete")


class StartupTracker:
    """Folds log lines into a StartupProgress. The phase never goes backwards."""

    def __init__(self) -> None:
        self.progress = StartupProgress()

    def _advance(self, phase: StartupPhase, **numbers: object) -> None:
        p = self.progress
        new_phase = phase if phase > p.phase else p.phase
        self.progress = replace(p, phase=new_phase, **numbers)  # type: ignore[arg-type]

    def mark_ready(self) -> StartupProgress:
        self._advance(StartupPhase.READY)
        return self.progress

    def feed(self, raw: str) -> bool:
        """Read one line; True when the progress changed."""
        before = self.progress
        line = strip_ansi(raw)
        if (m := _ENGINE_INIT.search(line)) is not None:
            self._advance(StartupPhase.ENGINE_INIT, vllm_version=m.group(1))
        elif (m := _BANNER_VERSION.search(line)) is not None and before.vllm_version is None:
            self._advance(StartupPhase.LAUNCHED, vllm_version=m.group(1))
        elif (m := _WEIGHTS_TOOK.search(line)) is not None:
            self._advance(StartupPhase.WEIGHTS_LOADED, weights_s=_number(m.group(1)))
        elif (m := _MODEL_LOADING_TOOK.search(line)) is not None:
            self._advance(
                StartupPhase.WEIGHTS_LOADED,
                weights_gib=_number(m.group(1)),
                weights_s=before.weights_s if before.weights_s is not None else _number(m.group(2)),
            )
        elif _LOADING.search(line) is not None:
            self._advance(StartupPhase.LOADING_WEIGHTS)
        elif (m := _KV_MEMORY.search(line)) is not None:
            self._advance(StartupPhase.KV_CACHE, kv_cache_gib=_number(m.group(1)))
        elif (m := _KV_SIZE.search(line)) is not None:
            concurrency = _number(m.group(3)) if m.group(3) else None
            self._advance(
                StartupPhase.KV_CACHE,
                kv_cache_tokens=_integer(m.group(1)),
                max_concurrency=concurrency,
            )
        elif (m := _GRAPH_DONE.search(line)) is not None:
            self._advance(StartupPhase.GRAPH_CAPTURE, graph_capture_s=_number(m.group(1)))
        elif _GRAPH_START.search(line) is not None:
            self._advance(StartupPhase.GRAPH_CAPTURE)
        elif (m := _INIT_ENGINE.search(line)) is not None:
            self._advance(StartupPhase.KV_CACHE, engine_init_s=_number(m.group(1)))
        elif (m := _API_START.search(line)) is not None:
            self._advance(StartupPhase.API_STARTING, url=m.group(1) or m.group(2))
        elif _APP_STARTED.search(line) is not None:
            self._advance(StartupPhase.APP_STARTED)
        return self.progress != before


# ---------------------------------------------------------------- failures


@dataclass(frozen=True, slots=True)
class FailureCause:
    """A recognised reason for a failed start: a short name, words for the user, a hint."""

    kind: str
    summary: str
    hint: str
    line: str
    """The log line that showed it (untrusted text: display literally)."""


_CAUSES: tuple[tuple[str, re.Pattern[str], str, str], ...] = (
    (
        "cuda-oom",
        re.compile(
            r"CUDA out of memory|torch\.OutOfMemoryError|OutOfMemoryError|"
            r"out of memory|No available memory for the cache blocks|"
            r"insufficient (?:GPU )?memory",
            re.IGNORECASE,
        ),
        "the GPU ran out of memory",
        "lower --gpu-memory-utilization, --max-model-len, --max-num-batched-tokens or "
        "--n-spec, use an fp8 KV cache, or free the GPU (nvidia-smi shows who holds it)",
    ),
    (
        "non-causal-attention",
        re.compile(
            r"non-causal attention not supported|does not support non-causal|"
            r"no attention backend supports non-causal",
            re.IGNORECASE,
        ),
        "no attention backend of this build supports the non-causal attention DFlash drafts need",
        'give the drafter its own backend (speculative config "attention_backend": '
        '"FLASH_ATTN" or "FLEX_ATTENTION"), or use a newer vLLM build',
    ),
    (
        "port-in-use",
        re.compile(r"address already in use|Errno 98", re.IGNORECASE),
        "the port is already in use",
        "choose another --port (--port 0 picks a free one), or stop what listens there",
    ),
    (
        "unknown-model",
        re.compile(
            r"RepositoryNotFoundError|Repository Not Found|is not a local folder and is not a "
            r"valid model identifier|401 Client Error|GatedRepoError|"
            r"Invalid repository ID|No such file or directory: '[^']*config\.json'|"
            r"does not appear to have a file named config\.json|"
            r"Model architectures? \[[^\]]*\] (?:are|is) not supported",
            re.IGNORECASE,
        ),
        "vLLM could not find or open the model (wrong name, gated repo, missing files, or an "
        "architecture this build does not support)",
        "check the model name, run `huggingface-cli login` (HF_TOKEN) for gated repos, or "
        "check that the build supports the architecture",
    ),
    (
        "engine-dead",
        re.compile(
            r"EngineDeadError|Engine core initialization failed|EngineCore failed to start|"
            r"Engine process failed to start|RuntimeError: Engine core",
            re.IGNORECASE,
        ),
        "the engine process died during startup",
        "the lines above it say why; re-run with VLLM_LOGGING_LEVEL=DEBUG for more",
    ),
)


def recognise_failure(lines: Iterable[str]) -> FailureCause | None:
    """The most specific recognised cause in `lines` (a specific cause beats "engine dead",
    which vLLM reports after most failures), or None."""
    found: dict[str, FailureCause] = {}
    for raw in lines:
        line = strip_ansi(raw)
        for kind, pattern, summary, hint in _CAUSES:
            if kind not in found and pattern.search(line) is not None:
                found[kind] = FailureCause(kind, summary, hint, line.strip()[:300])
    for kind, _pattern, _summary, _hint in _CAUSES:  # in order of specificity
        if kind in found:
            return found[kind]
    return None


@dataclass(frozen=True, slots=True)
class StartupFailed:
    """Why the hosted server is not (or no longer) serving: the reason, the last log lines and
    the recognised cause (None when not recognised). All log text is untrusted."""

    reason: str
    tail: tuple[str, ...]
    log_path: str
    cause: str | None = None
    hint: str | None = None
    seen_in: str | None = None
    after_ready: bool = False
    """True when the server stopped while serving (not during the start)."""

    def report(self) -> str:
        """The failure as text for stderr: the reason, the log's last lines, the likely cause."""
        head = "vLLM stopped: " if self.after_ready else "vLLM did not start: "
        lines = [head + self.reason, f"last {len(self.tail)} lines of {self.log_path}:"]
        lines += [f"  | {line}" for line in self.tail]
        if self.cause is not None:
            lines.append(f"likely cause: {self.cause}")
            lines.append(f"  seen in: {self.seen_in}")
            lines.append(f"  try: {self.hint}")
        else:
            lines.append("likely cause: not recognised (see the log lines above)")
        return "\n".join(lines)
