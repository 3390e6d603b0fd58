"""One source for what every number specmon shows means: name, unit, a one-line definition and a
longer text, as data. The help screen renders these, and docs/definitions.md carries the same text
in its generated glossary (`definitions_markdown()`; tests/unit/test_definitions.py checks that
the document holds it verbatim, and `python -m tests.unit.test_definitions --write` rewrites it).

The numbers are computed elsewhere in core (the module named in each long text); this module only
says what they are. Pure data: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from specmon.core.canary import (
    AGREE_SHARE,
    CANARY_MAX_TOKENS,
    CONFIRM_PROBES,
    DEGRADED_SHARE,
    LEARN_PROBES,
    MAX_TOLERANCE_SHARE,
    MIN_TOLERANCE_AL,
    NOISE_SIGMAS,
    WORKLOAD_SHIFT,
)
from specmon.core.detectors import cycle, speed_class
from specmon.core.detectors.vanilla import DEFAULT_MARGIN, DEFAULT_MIN_TOKENS
from specmon.core.diagnosis import context_cliff, quality, thermal
from specmon.core.gpu_reasons import SLOWDOWN_REASONS
from specmon.core.position_worth import HINT_MIN_KEPT_SHARE, HINT_RATE_THRESHOLD
from specmon.core.server_window import WINDOW_VANILLA_AL
from specmon.core.step_heat import MANY_WITHOUT_K


@dataclass(frozen=True, slots=True)
class Definition:
    """What one number (or word) on screen means."""

    key: str
    """A stable identifier (e.g. "decode_tok_s"), for a help screen to look up."""
    group: str
    """The key of its group in GROUPS."""
    name: str
    """The name as shown on screen."""
    unit: str
    """The unit ("tok/s", "s", "0..1", …); "" for counts and words."""
    short: str
    """One line."""
    long: str
    """A paragraph: how it is computed, from what, and its pitfalls."""


GROUPS: tuple[tuple[str, str], ...] = (
    ("request", "Request numbers (from the stream)"),
    ("acceptance", "Acceptance"),
    ("server", "Server numbers (from /metrics)"),
    ("flag", "Vanilla-speed flag"),
    ("cycle", "Cycle report"),
    ("positions", "Draft positions and acceptance heat"),
    ("gpu", "GPU readings"),
    ("canary", "Canary probe"),
    ("diagnosis", "Diagnosis (acceptance by context, thermals, seconds saved, quality)"),
)
"""Group keys and titles, in display order."""

_MARGIN = f"{DEFAULT_MARGIN:.0%}"


def _d(key: str, group: str, name: str, unit: str, short: str, long: str) -> Definition:
    return Definition(key, group, name, unit, short, long)


DEFINITIONS: tuple[Definition, ...] = (
    # ------------------------------------------------------------ request
    _d(
        "decode_tok_s",
        "request",
        "decode tok/s",
        "tok/s",
        "A request's speed after its first token: (completion tokens - 1) / (t_last - t_first).",
        "t_first and t_last are the arrival times of the first and the last token (the chunks "
        "whose cumulative usage count grew). Missing with fewer than 2 tokens or without usage "
        "numbers. This is the speed speculation changes; the vanilla-speed flag compares it with "
        "the vanilla baseline (core/stream_stats.py).",
    ),
    _d(
        "e2e_tok_s",
        "request",
        "e2e tok/s",
        "tok/s",
        "End-to-end speed: completion tokens / (t_end - t_send).",
        "Counts the wait for the first token (queueing and prefill) as well as decoding, so it is "
        "below decode tok/s, the more so for short answers.",
    ),
    _d(
        "ttft_s",
        "request",
        "TTFT",
        "ms",
        "Time to first token: the first chunk with choices - t_send.",
        "As `vllm bench serve` defines it: the role chunk counts even when its content is empty.",
    ),
    _d(
        "tpot_s",
        "request",
        "TPOT",
        "ms",
        "Time per output token after the first: (E2EL - TTFT) / (completion tokens - 1).",
        "Only with more than one token (the `vllm bench serve` definition). With speculation it "
        "is a per-token figure: one verify step's time spread over the tokens it emitted.",
    ),
    _d(
        "itl_s",
        "request",
        "ITL",
        "ms",
        "Inter-token latency: the gaps between consecutive chunks.",
        "Per chunk, not per token: with speculation one gap covers a whole verify step (1 to "
        "K + 1 tokens), so ITL is close to the step time, not to 1 / tok/s. Percentiles are over "
        "the gaps of recent requests.",
    ),
    _d(
        "e2el_s",
        "request",
        "E2EL",
        "ms",
        "End-to-end latency: t_end - t_send.",
        "t_end is the arrival of the last data message of the stream (normally the usage-only "
        "message).",
    ),
    _d(
        "percentiles",
        "request",
        "p50 / p95 / p99",
        "",
        "Percentiles exactly as numpy.percentile (linear), as `vllm bench serve` reports them.",
        "Virtual index (n - 1) * p / 100 with linear interpolation between the two neighbours "
        "(core/percentiles.py). Without requests of this client's own (watch), TTFT and ITL come "
        "from the server's histograms over the window instead, as Grafana's histogram_quantile "
        "(linear inside a bucket; core/histogram_quantiles.py), labelled (server histograms).",
    ),
    _d(
        "merged_chunk",
        "request",
        "merged chunks",
        "",
        "Decode chunks that carried more than K + 1 tokens: several steps joined by a slow reader.",
        "One verify step emits at most K + 1 tokens, so a bigger chunk holds several steps. They "
        "are counted and left out of the client-side acceptance length; without K they cannot "
        "be recognised (shown as a dash).",
    ),
    # ------------------------------------------------------------ acceptance
    _d(
        "acceptance_length",
        "acceptance",
        "AL",
        "tokens/step",
        "Acceptance length: mean tokens per speculative step, bonus token included: "
        "1 + accepted / steps.",
        "Plain decoding is 1.0; K drafts all accepted give K + 1. Shown with its source: "
        "server, chunks or /metrics. A dash when no step was drafted (never 1.0 or 0).",
    ),
    _d(
        "al_server",
        "acceptance",
        "AL (server)",
        "tokens/step",
        "From vLLM's own per-request metrics.speculative_decoding: 1 + accepted / spec steps.",
        "Sent by vLLM started with --per-request-spec-decode-metrics summary|detailed. Exact "
        "under any concurrency, so it is preferred. Ignored, with a note on the row, when "
        "malformed or inconsistent (core/stream_stats.py).",
    ),
    _d(
        "al_chunks",
        "acceptance",
        "AL (chunks)",
        "tokens/step",
        "Client side: mean tokens per decode chunk, from continuous usage stats.",
        "The role chunk, the prefill chunk, merged chunks and the final chunk cut by the stop "
        "condition are left out. Exact per step while the client keeps up; second choice.",
    ),
    _d(
        "al_metrics",
        "acceptance",
        "AL (/metrics)",
        "tokens/step",
        "From /metrics counter deltas around a request: 1 + delta accepted / delta drafts.",
        "Exact only when the request ran alone (concurrency 1): the end-of-request scrapes poll "
        "until the generation-token delta equals the request's completion tokens; with other "
        "traffic it stays a dash. Third choice.",
    ),
    _d(
        "draft_acceptance_rate",
        "acceptance",
        "draft acceptance rate",
        "0..1",
        "Accepted draft tokens / draft tokens.",
        "From the same source as the AL beside it. Client side with K known: (AL - 1) / K. "
        "A dash when nothing was drafted.",
    ),
    _d(
        "per_position_rate",
        "acceptance",
        "per-position rate i",
        "0..1",
        "The share of steps whose first i + 1 drafts were all accepted.",
        "From /metrics: delta accepted_per_pos[i] / delta drafts. Never rises with i. vLLM "
        "labels positions from 0; specmon's sentences number them from 1.",
    ),
    _d(
        "acceptance_source",
        "acceptance",
        "acceptance source",
        "",
        "Which source a request's AL came from: server first, chunks second, /metrics third.",
        "Each source's own numbers stay on the row, labelled (core/views.py, choose_acceptance).",
    ),
    # ------------------------------------------------------------ server
    _d(
        "window",
        "server",
        "window",
        "",
        "Numbers over the last W seconds (default 10 s) of /metrics scrapes.",
        "From the oldest scrape no older than W before the newest, to the newest. Fewer than two "
        "scrapes: every window number is a dash. Counter deltas are never negative: a counter "
        "that went down is a reset (core/counters.py).",
    ),
    _d(
        "since_start",
        "server",
        "since start",
        "",
        "Numbers from the counters' absolute values: since the server started, or since its "
        "last counter reset.",
        "The same formulas as the window numbers on the latest scrape's absolute values, summed "
        "over engines. After a reset the label says since when. Garbage values (negative, "
        "non-finite, accepted above drafted) give dashes with a note.",
    ),
    _d(
        "server_decode_tok_s",
        "server",
        "decode tok/s (server)",
        "tok/s",
        "delta vllm:generation_tokens_total / delta t over the window.",
        "Every emitted token of every request, accepted drafts and bonus tokens included.",
    ),
    _d(
        "n_spec",
        "server",
        "K (n_spec)",
        "",
        "Draft tokens proposed per step: the number of distinct positions of the per-position "
        "counter.",
        "Or what the recording header or --n-spec says.",
    ),
    _d(
        "spec_configured",
        "server",
        "speculation configured",
        "",
        "The /metrics page has a vllm:spec_decode_* family (vLLM registers them only with "
        "--speculative-config).",
        "A page with no vllm: family at all (--disable-log-stats) leaves it unknown.",
    ),
    _d(
        "running_waiting",
        "server",
        "running / waiting",
        "",
        "vllm:num_requests_running / vllm:num_requests_waiting, summed over engines.",
        "Running above 1 during a request is batch contention for the vanilla-speed flag.",
    ),
    _d(
        "kv_cache_usage",
        "server",
        "KV cache usage",
        "0..1",
        "vllm:kv_cache_usage_perc (a 0..1 fraction), the largest engine's.",
        "Older servers' vllm:gpu_cache_usage_perc is read as the same number.",
    ),
    _d(
        "counter_reset",
        "server",
        "counter reset",
        "",
        "A counter that went down between two scrapes: the server restarted.",
        "Marked on the timeline; the series takes the new value as its baseline and the "
        "since-start numbers restart from the reset.",
    ),
    _d(
        "server_status",
        "server",
        "up / stale / down / unreadable",
        "",
        "Whether the server's /metrics answers: up, stale (late), down (no answer), unreadable "
        "(a page that cannot be parsed).",
        "Shown with the last error; the other servers keep updating.",
    ),
    # ------------------------------------------------------------ flag
    _d(
        "vanilla_flag",
        "flag",
        "VANILLA SPEED",
        "",
        f"A finished request at or below the vanilla baseline + {_MARGIN}, or whose AL stays "
        "near 1.0 while drafts are proposed, or on a server without speculation.",
        "One-sided: slower than vanilla is the worst case of the same flag. The baseline comes "
        "from --baseline, from a stored n_spec 0 bench for the same model + GPU + vLLM version, "
        "or is absent (then only acceptance and configuration reasons apply). Each reason below "
        "is decided on its own inputs (core/detectors/vanilla.py).",
    ),
    _d(
        "acceptance_near_zero",
        "flag",
        "acceptance_near_zero",
        "",
        "AL <= 1.1, or draft acceptance rate <= 5% with K known, while drafts are proposed.",
        "Drafts are proposed when the server's per-request numbers show drafts, or the server "
        "runs speculation and at least 4 client decode chunks were seen.",
    ),
    _d(
        "net_loss",
        "flag",
        "net_loss",
        "",
        "AL above 1.1 but decode speed at or below vanilla + margin, with no other cause: the "
        "verify cost eats the gain.",
        "No throttling, contention or shortness explains it.",
    ),
    _d(
        "throttling",
        "flag",
        "throttling",
        "",
        "A GPU reading during the request shows a thermal or power clock-event reason, or a "
        "temperature at or above its slowdown threshold.",
        f"Reasons: {', '.join(sorted(SLOWDOWN_REASONS))} (core/gpu_reasons.py).",
    ),
    _d(
        "batch_contention",
        "flag",
        "batch_contention",
        "",
        "Other requests of the session overlapped it, or vllm:num_requests_running > 1 during it.",
        "Per-request /metrics numbers are then server-wide, and the step is shared.",
    ),
    _d(
        "spec_not_configured",
        "flag",
        "spec_not_configured",
        "",
        "No vllm:spec_decode_* family on the server, or n_spec = 0.",
        "The server decodes without speculation: vanilla speed is expected.",
    ),
    _d(
        "short_request",
        "flag",
        "short_request",
        "",
        f"Fewer than {DEFAULT_MIN_TOKENS} completion tokens: prefill and the first step "
        "dominate its speed.",
        "Its decode speed says little about speculation.",
    ),
    _d(
        "vanilla_speed",
        "flag",
        "vanilla_speed",
        "",
        "Slow, and none of the reasons above explains it (e.g. AL unknown).",
        "The request is flagged without a known cause.",
    ),
    _d(
        "verdict",
        "flag",
        "an answer's badge",
        "",
        "One verdict per answer, the same on every screen: LOOP or GARBLED first, then "
        "TRANSITION or VANILLA SPEED from its speed class, then the vanilla-speed flag, else ok.",
        "Quality is judged before speed: a loop runs fast and a garbled answer slow, but neither "
        "says how the server runs, so neither sets a speed level, the cycle or the thermal "
        "attribution. The panel's counts, the timeline's flags, the answers table, --json "
        "(requests.summary.verdicts, each row's verdict) and the exporter count the same "
        "verdicts over all answers (core/verdict.py).",
    ),
    _d(
        "speed_levels",
        "flag",
        "TRANSITION / at the slow level",
        "tok/s",
        "An answer between the session's fast and slow speed levels is a TRANSITION; at the "
        "slow level it is VANILLA SPEED, unless its own acceptance is healthy (then it is ok: "
        "load or a bursty stream, not failed speculation).",
        f"The levels are the medians of a fast and a slow cluster of the last "
        f"{speed_class.DEFAULT_WINDOW} answers' decode speeds (loops and garbled answers left "
        f"out), with at least {speed_class.MIN_FAST} fast and {speed_class.MIN_SLOW} slow "
        "answers, the slow level at least 25% below the fast one, the gap at least 4 robust "
        "spreads (1.4826 x MAD) of each, and the two-means split of all the speeds "
        f"{speed_class.SEPARATION:g} spreads apart. A level reaches "
        f"{speed_class.LEVEL_SPREADS:g} of its own spreads from its median (at least an eighth "
        "of the gap, at most half): below the fast level's reach and above the slow level's is "
        "between. An answer that ends before the levels exist (at its end and at the answer "
        "before) waits and is classed once they do (ok if they do not while it is among the "
        f"last {speed_class.DEFAULT_WINDOW}); a class, once given, does not change, except "
        "a TRANSITION, which is one only at a change of level: the nearest answers at a level "
        "before and after it are at different levels (until an answer after it is at a level "
        "it is shown ok, between_levels_waiting; the same level either side, or none at a "
        f"level in the {speed_class.NEIGHBOURS_AFTER} after it, is ok, no_change_of_level: an "
        "answer's own text changes its speed on a real engine); a transition is judged again "
        "when the "
        f"{speed_class.NEIGHBOURS_AFTER} answers after it are known, among the last "
        f"{2 * cycle.LOCAL_REACH + 1} answers known then (the cycle detector's "
        "classification), and is ok (fast_among_neighbours) when it is fast there: a fast "
        "level that slides as acceptance falls with the context stays one level. "
        "When the GPU is sampled and the thermal clock fit is usable, each speed is taken at "
        "the session's first clock (speed x fit(its clock) / fit(first clock)) before it sets "
        "a level or is classed; the badge tells the levels at the answer's own clock. "
        "An answer at the slow level whose AL is known and at least "
        f"{speed_class.HEALTHY_AL_SHARE:.0%} of the fast level's AL (the median AL of the "
        "answers classed fast) is not VANILLA SPEED: it stays ok with the reason "
        "slow_healthy_acceptance (core/detectors/speed_class.py).",
    ),
    # ------------------------------------------------------------ cycle
    _d(
        "cycle_period",
        "cycle",
        "period",
        "requests",
        "Requests from the start of one degradation episode to the next.",
        "Exact when the episodes' pattern repeats exactly (a run of transitions alone is no "
        "episode; three cycles, or three episode starts, seen), else the rounded mean spacing; "
        "the range (period_min..period_max) shows how it varies (core/detectors/cycle.py, over "
        "the last 200 completed requests).",
    ),
    _d(
        "cycle_phases",
        "cycle",
        "fast / transition / degraded / recovery",
        "requests per cycle",
        "Each request is fast, degraded, or a transition between the two levels; a fast request "
        "right after a non-fast one is a recovery.",
        "The two levels are the medians of a high and a low cluster of decode speeds; no cycle "
        "unless the low level is at least 25% below the high one. When the two levels show no "
        f"cycle, each request is classed again among the {2 * cycle.LOCAL_REACH + 1} requests "
        "centred on it: a fast level that drifts with the context is still one level. "
        "A loop or garbled answer keeps "
        "its place (the period counts requests) but takes no part in the levels: it takes its "
        "neighbours' phase when both agree, else fast, and the exact period's agreement "
        "leaves out the pairs that hold it (its phase is a guess).",
    ),
    _d(
        "cycle_episodes",
        "cycle",
        "episodes / strays",
        "",
        "Degradation episodes of the cycle seen; strays are one-off dips left out of it.",
        "An episode is a run of non-fast requests holding at least one degraded one.",
    ),
    _d(
        "share_degraded",
        "cycle",
        "share degraded",
        "0..1",
        "Degraded requests / all requests of the cycle.",
        "",
    ),
    _d(
        "flags_own_requests",
        "cycle",
        "flags (answers, cycle)",
        "",
        "The flags block counts only the requests specmon itself sent (chat, demo, the canary "
        "excluded), never other clients' traffic.",
        "A `watch` of a busy server sends none, so its counts stay at 0: the block then says it "
        "counts specmon's own requests only (the server generated tokens, in its window or since "
        "it started, and specmon has no answer), and the server's own traffic is in the speed, "
        "acceptance and load sections (core/server_window.py).",
    ),
    _d(
        "window_vanilla",
        "cycle",
        "window vanilla speed",
        "",
        f"The server's window AL (1 + accepted / drafts) is at most {WINDOW_VANILLA_AL:g} while "
        "drafts are proposed: almost every draft is rejected, so the server runs at about plain "
        "decoding's speed, whoever sends the requests.",
        "Judged from /metrics alone, so it holds for other clients' traffic too; shown in the "
        "flags block as `window AL 1.02 with drafts: VANILLA SPEED` (core/server_window.py).",
    ),
    _d(
        "long_run_vs_peak",
        "cycle",
        "long-run vs fast",
        "tok/s",
        "The long-run mean decode speed (all requests) against the fast-phase mean (fast "
        "requests, recoveries excluded).",
        "Their ratio (long-run / fast) is what the cycle costs.",
    ),
    # ------------------------------------------------------------ positions
    _d(
        "expected_tokens",
        "positions",
        "expected tokens per step for n_spec n",
        "tokens/step",
        "1 + the sum of the first n per-position rates.",
        "What a step would emit with n drafts, assuming the first n positions accept as they do "
        "now (core/position_worth.py). Window or since start, labelled.",
    ),
    _d(
        "position_share",
        "positions",
        "share of accepted tokens",
        "0..1",
        "Position i's rate / the sum of all rates: the share of the accepted tokens it brings.",
        "A dash when nothing was accepted.",
    ),
    _d(
        "trim_hint",
        "positions",
        "trim hint",
        "",
        f"Shown when the last positions each accept < {HINT_RATE_THRESHOLD:.0%} of steps and a "
        f"smaller n_spec keeps at least {HINT_MIN_KEPT_SHARE:.0%} of the accepted tokens.",
        "The kept share is rounded down. No hint when every position pulls its weight, when even "
        "position 1 rarely accepts (the vanilla flag speaks then), when the rare tail together "
        f"brings more than {1 - HINT_MIN_KEPT_SHARE:.0%} of the accepted tokens, or with fewer "
        "than 100 steps since start; the F8 screen names the gate that stopped it.",
    ),
    _d(
        "heat",
        "positions",
        "acceptance heat",
        "",
        "Each engine step of an answer coloured by the drafts it accepted: many (at least half "
        "of K), some, single-token (vanilla-like), unknown.",
        "Steps come from the server's per-step array when present (exact), else from chunks and "
        "their token counts; merged, cut or uncounted chunks are unknown; the first token is the "
        f"prefill's. Without K the bar for many is {MANY_WITHOUT_K} accepted "
        "(core/step_heat.py).",
    ),
    _d(
        "server_ttft_s",
        "request",
        "server TTFT",
        "ms",
        "The engine's share of TTFT: queue time + vLLM's own TTFT (first token - scheduled).",
        "From vLLM's per-request timing metrics (`--enable-per-request-metrics`, which host mode "
        "turns on; newest vLLM only), sent in the final usage chunk. Missing when the server does "
        "not send them (core/server_timing.py).",
    ),
    _d(
        "ttft_outside_s",
        "request",
        "TTFT outside engine",
        "ms",
        "Client TTFT - server TTFT: the network, the API server's own work, the client's reading.",
        "Large when the client is far from the server, the API server is busy (tokenising, the "
        "chat template) or the reader lags. It can be slightly negative: the server counts from "
        "when the request was queued, the client from when it sent it (core/server_timing.py).",
    ),
    # ------------------------------------------------------------ canary
    _d(
        "canary_al",
        "canary",
        "canary AL",
        "tokens/step",
        "The acceptance length of the canary: one fixed greedy request (temperature 0, fixed "
        f"prompt, {CANARY_MAX_TOKENS} tokens) sent now and then.",
        "The server's per-request AL when it gives one, else the client's chunk AL. Greedy and "
        "fixed, so it changes with the engine (model, drafter, K, kernels), not with the "
        "workload. Sent only while the server has live traffic (`watch --canary [SECONDS]`, "
        "chat's host mode; core/canary.py).",
    ),
    _d(
        "canary_expected_al",
        "canary",
        "expected AL",
        "tokens/step",
        f"The mean AL of {LEARN_PROBES} canary probes of this server+model+draft+method+K that "
        f"agree (within {AGREE_SHARE:.0%} of each other), stored under XDG data.",
        "Learned only while the server is steady: the highest group of agreeing probes, and "
        f"none while a learning probe lies {DEGRADED_SHARE:.0%} or more above it (the group is a "
        "slow stretch). Kept once learned (a drifting engine must not teach it its drift); a "
        f"probe {DEGRADED_SHARE:.0%} or more above it learns it again. To learn it again by hand: "
        "`watch --canary --canary-relearn` (docs/canary.md).",
    ),
    _d(
        "canary_tolerance",
        "canary",
        "noise",
        "tokens/step",
        f"How far below the expected AL a probe may fall: {NOISE_SIGMAS:g} standard deviations "
        f"of the agreeing probes, at least {MIN_TOLERANCE_AL:g} and at most "
        f"{MAX_TOLERANCE_SHARE:.0%} of the expected AL (a probe {DEGRADED_SHARE:.0%} below it is "
        "never ok). Shown as `± noise` after the expected AL. A recorded probe is judged with "
        "the tolerance it carries, held to the same cap (a recording by an older specmon may "
        "carry a wider one).",
        "Greedy answers vary a little with the batch they share with live traffic; the spread "
        "of the learning probes measures that noise on this server.",
    ),
    _d(
        "canary_status",
        "canary",
        "canary",
        "",
        "learning, ok, drifting (one probe beyond the noise), drifted (several in a row), or "
        "failed (the probe did not complete).",
        f"Drifted after {CONFIRM_PROBES} probes in a row below expected AL - noise: the engine "
        "lost acceptance on a request that did not change, which a restart of the server "
        "usually cures (acceptance that decays with uptime).",
    ),
    _d(
        "canary_diagnosis",
        "canary",
        "diagnosis",
        "",
        "engine drift (the canary fell), workload change (live AL moved while the canary held), "
        "or steady.",
        "Live AL is the live traffic's acceptance between two probes, from the /metrics "
        "counters with the canary's own steps taken out; a workload change is live AL more "
        f"than {WORKLOAD_SHIFT:.0%} away from its level while the baseline was learned.",
    ),
    # ------------------------------------------------------------ gpu
    _d(
        "gpu_temperature",
        "gpu",
        "temperature",
        "°C",
        "GPU temperature (NVML, or dcgm-exporter DCGM_FI_DEV_GPU_TEMP).",
        "Compared with the GPU's slowdown threshold for the throttling reason.",
    ),
    # ------------------------------------------------ diagnosis (docs/diagnosis.md)
    _d(
        "al_by_context",
        "diagnosis",
        "AL by context",
        "tokens/step",
        "Acceptance length binned by the context length at each step (prompt + tokens so far).",
        "Each decode chunk of an answer is one speculative step at a context of prompt tokens "
        "plus the tokens generated before it; a bin's AL is its tokens / steps. The first chunk "
        "(the prefill's token), merged chunks (more than K+1 tokens) and the final chunk cut by "
        "the stop are left out, as in client AL. Bins are fixed (0, 512, 1k, 2k, 4k, 6k, 8k, 12k, "
        "16k, 20k, 24k, 32k, 48k, 64k, 96k, 128k+), so the state has one size whatever the "
        "session length; replay recomputes them from the recorded chunks "
        "(core/diagnosis/context_cliff.py).",
    ),
    _d(
        "context_cliff",
        "diagnosis",
        "context cliff",
        "",
        'Where acceptance falls off with context, e.g. "AL 3.4 below 8k, 1.6 past 20k".',
        "The split of the bins with the largest drop of pooled AL from below to above it, "
        f"reported when it is at least {context_cliff.MIN_DROP_FRAC:.0%} with at least "
        f"{context_cliff.MIN_STEPS_PER_SIDE} steps from at least "
        f"{context_cliff.MIN_ANSWERS_PER_SIDE} answers on each side (fewer answers: a "
        "degradation cycle in a growing chat would look like a cliff; bench --context-sweep, "
        'a controlled workload, needs only the steps). "Past" is the first bin (with enough '
        "steps) whose AL is below the midpoint of the two sides.",
    ),
    _d(
        "thermal_attribution",
        "diagnosis",
        "slowdown cause",
        "share",
        "How much of a slow stretch is the GPU clock, how much acceptance, how much neither.",
        f"The latest {thermal.RECENT_ANSWERS} answers against the fastest quarter of the earlier "
        "ones. Speed is AL / step time, so ln(speed ratio) = ln(step-time ratio) + ln(AL "
        "ratio): the clock's share is the step-time ratio the clock fit predicts between the two "
        "clocks (the clock ratio until the fit is usable), acceptance's share is the AL ratio, "
        f"the rest is other (batching, context, power). A stretch is slow when at least "
        f"{thermal.SLOW_FRAC:.0%} below the reference and either {thermal.SLOW_FRAC:.0%} below "
        "the median of the earlier answers or run at a clock at least "
        f"{thermal.CLOCK_FELL_FRAC:.0%} below the reference's (the fastest quarter of varied "
        "answers is fast by chance alone; core/diagnosis/thermal.py).",
    ),
    _d(
        "clock_fit",
        "diagnosis",
        "step time vs clock",
        "s",
        "Least-squares fit of decode step time on 1000 / SM clock (MHz), over every answer.",
        "Step time is an answer's decode span / its decode chunks; the clock is the mean SM "
        "clock of the GPU samples taken while it ran. Kept as five running sums; used once it "
        f"has {thermal.MIN_FIT_POINTS} answers, a positive slope and clocks spanning at least "
        f"{thermal.MIN_CLOCK_SPREAD_FRAC:.0%}.",
    ),
    _d(
        "power_limit_requested",
        "diagnosis",
        "power limit (requested / enforced)",
        "W",
        "The power limit set by the administrator against the one the GPU enforces.",
        "NVML's power management limit (requested), default limit and enforced limit; when "
        "enforced differs from requested another cap won (board, thermal policy), and the GPU "
        "runs below what was asked for.",
    ),
    _d(
        "seconds_saved",
        "diagnosis",
        "seconds saved",
        "s",
        "Time speculation saved (positive) or cost (negative), per answer and for the session.",
        "Vanilla decode time of the answer's N-1 tokens at the baseline (--baseline, the stored "
        "baseline, or a sweep's n=0) minus its decode span; the prefill is the same either way "
        "and is left out. Needs a baseline for this model, GPU and vLLM "
        "(core/diagnosis/seconds_saved.py).",
    ),
    _d(
        "seconds_saved_reason",
        "diagnosis",
        "why it cost time",
        "",
        "The reason an answer that ran slower than vanilla did.",
        "The vanilla-speed flag's reason when it has one (no acceptance, throttling, a crowded "
        "batch…), else the acceptance length that did not pay for the draft and verify passes.",
    ),
    _d(
        "quality_loop",
        "diagnosis",
        "possible loop",
        "",
        "An answer whose text repeats itself: at a very high AL, or by its text alone.",
        f"Flagged when its AL is at least {quality.LOOP_Z:g} spreads above the session's "
        f"healthy AL (or at least {quality.LOOP_AL_FRAC:.0%} of the K+1 ceiling) over at "
        f"least {quality.MIN_TOKENS} tokens, and at least {quality.LOOP_REPEAT_SHARE:.0%} of "
        f"its word {quality.NGRAM}-grams repeat; or, at any AL, at least "
        f"{quality.LOOP_TEXT_SHARE:.0%} of them repeat and less than "
        f"{quality.GARBLED_ODD_SHARE:.0%} of its pieces are symbols (the text's own evidence: a "
        "loop served at AL 1.0 while the drafter fails); or, at any AL, its last "
        f"{quality.TAIL_CHARS} characters repeat at least {quality.LOOP_TAIL_SHARE:.0%} of "
        f"their {quality.CHAR_NGRAM}-character pieces (a loop inside one word has no word "
        "n-grams; a small drafter may fail to follow a loop); or, at any AL, its end repeats "
        f"one piece of at most {quality.LOOP_MAX_PERIOD} characters exactly, at least "
        f"{quality.LOOP_END_REPEATS} times over at least {quality.LOOP_END_CHARS} characters "
        "(a loop that starts late, whatever the answer's length). Checked once at the answer's "
        "end (core/diagnosis/quality.py).",
    ),
    _d(
        "quality_garbled",
        "diagnosis",
        "possibly garbled",
        "",
        "An answer with extremely low AL on a drafter that normally does well.",
        f"Flagged when its AL is at least {quality.GARBLED_Z:g} spreads below the session's "
        f"healthy AL or within {quality.GARBLED_NEAR_ONE:g} of 1.0, the healthy AL is at least "
        f"{quality.GOOD_DRAFTER_AL:g}, and at least "
        f"{quality.GARBLED_ODD_SHARE:.0%} of its text is not words (pieces without a letter or "
        "digit): the target went where the drafter could not follow (wrong template, broken "
        "quantisation, a runaway sampler). Low acceptance alone (an answer at vanilla speed "
        "that reads normally) is not flagged.",
    ),
    _d(
        "repeated_ngram_share",
        "diagnosis",
        "repeated n-grams",
        "0..1",
        f"Share of an answer's word {quality.NGRAM}-grams that repeat an earlier one.",
        f"1 - distinct / total over the last {quality.MAX_TEXT_CHARS} characters of the text; "
        f"none under {quality.MIN_NGRAMS} n-grams.",
    ),
    _d(
        "al_z_score",
        "diagnosis",
        "AL z-score",
        "sd",
        "How far an answer's AL is from the session's healthy AL, in spreads.",
        f"The healthy AL is the median of the upper half of the last {quality.HEALTHY_WINDOW} "
        "unflagged answers' AL (the fast answers while at most half are degraded: a degradation "
        "cycle's AL 1.0 answers do not hide a garbled one), the spread 1.4826 x their median "
        f"absolute deviation, at least {quality.MIN_SPREAD:g}; none before "
        f"{quality.MIN_HISTORY} answers.",
    ),
    _d("gpu_power", "gpu", "power", "W", "Power draw, and the enforced power limit.", ""),
    _d("gpu_sm_clock", "gpu", "SM clock", "MHz", "The streaming multiprocessor clock.", ""),
    _d(
        "gpu_memory",
        "gpu",
        "VRAM",
        "GiB",
        "Memory used / total.",
        "NVML's v2 memory info, which leaves out the driver's reserved memory (as nvidia-smi).",
    ),
    _d("gpu_utilization", "gpu", "utilization", "%", "NVML's GPU utilization.", ""),
    _d(
        "gpu_clock_events",
        "gpu",
        "clock events",
        "",
        "Active clock-event (throttle) reasons, decoded from NVML's or DCGM's bitmask.",
        "None active: no reason; a dash: they could not be read (docs/gpu.md).",
    ),
    _d(
        "missing",
        "request",
        "—",
        "",
        "A number that is not known. Never 0.",
        "Applies to every number on every screen.",
    ),
)
"""Every definition, grouped in GROUPS order."""


_BY_KEY = {d.key: d for d in DEFINITIONS}


def definition(key: str) -> Definition:
    """The definition with this key (KeyError when there is none)."""
    return _BY_KEY[key]


def by_group() -> tuple[tuple[str, tuple[Definition, ...]], ...]:
    """(group title, its definitions) in display order."""
    return tuple((title, tuple(d for d in DEFINITIONS if d.group == key)) for key, title in GROUPS)


BEGIN_MARK = "<!-- BEGIN glossary: generated from src/specmon/core/definitions.py -->"
END_MARK = "<!-- END glossary -->"


def definitions_markdown() -> str:
    """The glossary block of docs/definitions.md, markers included."""
    lines = [
        BEGIN_MARK,
        "",
        "## Glossary",
        "",
        "The same text as the app's help screen (one source: `core/definitions.py`).",
    ]
    for title, items in by_group():
        lines += ["", f"### {title}", ""]
        for d in items:
            unit = f" ({d.unit})" if d.unit else ""
            text = f"{d.short} {d.long}".rstrip()
            lines.append(f"- **{d.name}**{unit}: {text}")
    lines += ["", END_MARK]
    return "\n".join(lines) + "\n"
