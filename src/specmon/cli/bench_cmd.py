"""`specmon bench`: benchmark one vLLM server the way the seeds tuned DFlash.

The server is attached (--attach URL) or started by specmon (host mode: --model M [--draft D]
[--method ...] [--n-spec K] [--preset NAME] [-- extra vllm serve args]; specmon waits for
/health, benches, then stops the server's whole process group).

Random prompts of --input-len tokens (sized with the server's own /tokenize: no tokenizer, no model
hub, vLLM is never imported), --output-len tokens each, --warmups unmeasured requests first, then
--num-prompts measured requests (or a --duration soak). Reports output and total tok/s; TTFT,
TPOT, ITL and E2EL (mean, median, p95, p99) as `vllm bench serve` defines them; acceptance
length and per-position acceptance from the server's /metrics deltas over the run, and per
request from vLLM's per-request metrics when the server sends them (else tokens per stream
chunk); requests that ran at vanilla speed, with reasons; the degradation-cycle report; GPU
temperature, power and SM clock (min/mean/max) during the run.

The seeds' method: --input-len 256 --output-len 1024 --ignore-eos --temperature 0 --concurrency 1
--warmups 2. --dataset FILE takes JSON Lines prompts instead ({"prompt": "...", "output_len": N}
per line; see docs/bench.md). --context-sweep LIST runs the bench once per prompt length; with
--dataset FILE each prompt is the file's text cut to the length (coherent context), without it
random words (junk context: the report says a fall there may not be a context limit).
--replay FILE recomputes the report from a --record recording.

Interrupted (Ctrl-C, SIGTERM, or SIGHUP when the terminal closes) during the measured phase, the
requests that finished are reported and written to every output asked for (--json, --csv,
--markdown, --record), marked interrupted with the count finished of planned; requests in flight
are cancelled and not counted. Interrupted before the measured phase, nothing was measured and
no result is written (a --record recording is closed whole). A second signal ends the process at
once.

Exit status: 0 done; 1 the run could not start (server unreachable, a /tokenize answer that is
not usable), every request failed, or the engine died; 2 bad arguments or a bad --dataset file
(one line naming the valid range, or FILE:LINE and what is wrong); 130 interrupted by Ctrl-C, 143
by SIGTERM, 129 by SIGHUP (what was measured is kept and written).
"""

from __future__ import annotations

import argparse
from typing import Any

from specmon.bench.command import (
    BenchAttached,
    BenchDryRun,
    BenchHosted,
    BenchPlan,
    BenchReplay,
    BenchRun,
    Outputs,
    check_baseline,
    check_output_paths,
)
from specmon.cli.args import (
    PlanError,
    add_api_key_argument,
    add_command,
    add_gpu_argument,
    api_key_of,
    server_url,
)
from specmon.cli.host_args import add_host_arguments
from specmon.cli.session_setup import gpu_choice

NAME = "bench"
SUMMARY = "benchmark a running server: tok/s, latency, acceptance, vanilla-speed requests"


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    add_server_arguments(p, single=True)
    add_host_arguments(p, model=False)
    add_workload_arguments(p)
    p.add_argument("--json", metavar="FILE", help="write the result as JSON (compare reads it)")
    p.add_argument("--csv", metavar="FILE", help="write one CSV row per measured request")
    p.add_argument("--markdown", metavar="FILE", help="write the summary as Markdown")
    p.add_argument("--record", metavar="FILE", help="record every event (.gz compresses)")
    p.add_argument(
        "--replay",
        metavar="FILE",
        help="no server: recompute the report from a recording made with --record",
    )
    p.add_argument("--label", default=None, help="a name for this run in compare tables")
    p.add_argument(
        "--context-sweep",
        metavar="LIST",
        default=None,
        help="run the bench once per prompt length (e.g. 1024,8192,20480) and report acceptance "
        "by context length; --json writes the sweep. Random prompts are random words (junk "
        "context: a fall may be the drafter's answer to junk, not a context limit); with "
        "--dataset FILE each prompt is the file's text joined in order, starting at prompt "
        "(seed + i), cut to the length by /tokenize, each asking --output-len tokens",
    )


def add_server_arguments(p: argparse.ArgumentParser, *, single: bool) -> None:
    if single:
        p.add_argument(
            "--attach",
            type=server_url,
            metavar="URL",
            help="the server's base URL, e.g. http://127.0.0.1:8000",
        )
        p.add_argument(
            "--metrics-url",
            type=server_url,
            metavar="URL",
            help="where the server's /metrics page is when not at URL/metrics",
        )
    add_api_key_argument(p)
    p.add_argument(
        "--model",
        default=None,
        help="host mode: the target model (a preset can give it); attached: the model to "
        "request (default: the server's first)",
    )
    add_gpu_argument(p, "local when the server is on this machine, else none")
    p.add_argument(
        "--baseline",
        default=None,
        metavar="TOK_S",
        help="vanilla (n_spec 0) decode tok/s for the vanilla-speed flag (default: none; a "
        "sweep uses its n=0 point; --replay: the one the recording was judged against); "
        "--record writes it to the recording's header",
    )


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    from specmon.cli.stream_args import add_stream_args
    from specmon.core.stream_limits import BENCH_IDLE_TIMEOUT_S

    add_stream_args(p, idle_timeout_s=BENCH_IDLE_TIMEOUT_S)
    p.add_argument("--input-len", default="256", metavar="N", help="prompt tokens (default 256)")
    p.add_argument("--output-len", default="1024", metavar="N", help="max tokens (default 1024)")
    p.add_argument(
        "--num-prompts", default="20", metavar="N", help="measured requests (default 20)"
    )
    p.add_argument(
        "--warmups", default="2", metavar="N", help="unmeasured requests first (default 2)"
    )
    p.add_argument("--concurrency", default="1", metavar="N", help="requests in flight (default 1)")
    p.add_argument(
        "--request-rate",
        default="inf",
        metavar="R",
        help="requests per second, Poisson arrivals (default inf: as fast as --concurrency allows)",
    )
    p.add_argument(
        "--duration",
        default=None,
        metavar="T",
        help="soak: send requests for T (seconds, or 90s, 15m, 2h) instead of --num-prompts; "
        "errors are counted and the run goes on",
    )
    p.add_argument(
        "--temperature", default="0", metavar="T", help="sampling temperature (default 0)"
    )
    p.add_argument(
        "--ignore-eos", action="store_true", help="generate exactly --output-len tokens per request"
    )
    p.add_argument(
        "--dataset", default="random", metavar="random|FILE", help="random prompts, or a JSONL file"
    )
    p.add_argument(
        "--seed", default="0", metavar="N", help="seed of the random prompts (default 0)"
    )
    p.add_argument(
        "--scrape-interval",
        default="5",
        metavar="S",
        help="seconds between /metrics scrapes during the run (default 5; each scrape costs the "
        "server a little time; before and after the run it is always scraped)",
    )
    p.add_argument(
        "--max-consecutive-errors",
        default="10",
        metavar="N",
        help="stop as 'engine dead' after N failed requests in a row (default 10)",
    )


def workload_config(
    args: argparse.Namespace, *, concurrency: int | None = None, hosted: bool = False
) -> Any:
    """BenchConfig from the parsed flags (ConfigError on a bad value); `concurrency` overrides
    the flag (sweep parses its own list). `hosted`: specmon starts the server, so --model is
    what it serves, not the name to request (`--served-model-name` may rename it, a local path
    is served under its path): the requests use the model the started server lists."""
    from specmon.bench.config import (
        MAX_CONCURRENCY,
        MAX_CONSECUTIVE_ERRORS,
        MAX_PROMPTS,
        MAX_REQUEST_RATE,
        MAX_SEED,
        MAX_TEMPERATURE,
        MAX_TOKENS_LIMIT,
        MAX_WARMUPS,
        BenchConfig,
        ConfigError,
        parse_duration,
        parse_float,
        parse_int,
    )

    dataset = args.dataset
    output_len = parse_int("--output-len", args.output_len, 1, MAX_TOKENS_LIMIT)
    if dataset != "random":
        from pathlib import Path

        from specmon.bench.prompts import DatasetError, load_dataset

        if not Path(dataset).exists():
            raise ConfigError(
                f"--dataset must be 'random' or a JSONL file, got {dataset!r} (no such file)"
            )
        try:  # checked whole before any server is touched; the run reads it again
            loaded = load_dataset(dataset, output_len)
        except DatasetError as exc:
            raise ConfigError(str(exc)) from None
        sweep = getattr(args, "context_sweep", None)
        if sweep is not None:
            _check_sweep_text(dataset, loaded, sweep)
    return BenchConfig(
        input_len=parse_int("--input-len", args.input_len, 1, MAX_TOKENS_LIMIT),
        output_len=output_len,
        num_prompts=parse_int("--num-prompts", args.num_prompts, 1, MAX_PROMPTS),
        warmups=parse_int("--warmups", args.warmups, 0, MAX_WARMUPS),
        concurrency=concurrency
        if concurrency is not None
        else parse_int("--concurrency", args.concurrency, 1, MAX_CONCURRENCY),
        request_rate=parse_float(
            "--request-rate", args.request_rate, 0, MAX_REQUEST_RATE, lo_open=True, allow_inf=True
        ),
        duration_s=parse_duration(args.duration) if args.duration is not None else None,
        temperature=parse_float("--temperature", args.temperature, 0, MAX_TEMPERATURE),
        ignore_eos=bool(args.ignore_eos),
        dataset=dataset,
        seed=parse_int("--seed", args.seed, 0, MAX_SEED),
        model=None if hosted else args.model,
        max_consecutive_errors=parse_int(
            "--max-consecutive-errors", args.max_consecutive_errors, 1, MAX_CONSECUTIVE_ERRORS
        ),
    )


def _check_sweep_text(dataset: str, prompts: Any, sweep: str) -> None:
    """--context-sweep cuts the dataset's text to each length: text of fewer UTF-8 bytes than the
    longest length cannot hold that many tokens (a token is at least a byte) and is refused
    before any server is touched; text that is long enough in bytes but not in tokens is found
    when it is cut (the run stops with one line)."""
    from specmon.bench.config import ConfigError
    from specmon.bench.context_sweep import parse_lengths
    from specmon.bench.prompts import DATASET_JOINER

    longest = parse_lengths(sweep)[-1]
    size = sum(len(p.text.encode("utf-8")) for p in prompts)
    size += len(DATASET_JOINER) * (len(prompts) - 1)
    if size < longest:
        raise ConfigError(
            f"--context-sweep {longest:,} needs at least {longest:,} bytes of text; the dataset "
            f"{dataset} has {size:,} in all (a longer file, or shorter lengths)"
        )


def scrape_interval(args: argparse.Namespace) -> float:
    from specmon.bench.config import parse_float

    return parse_float("--scrape-interval", args.scrape_interval, 0.1, 3600.0)


def _bench_run(
    args: argparse.Namespace,
    config: Any,
    gpu: str,
    baseline: float | None,
    api_key: str | None,
) -> BenchRun:
    from specmon.cli.stream_args import stream_limits_from

    interval, limits = scrape_interval(args), stream_limits_from(args)
    return BenchRun(
        config,
        gpu,
        baseline,
        api_key,
        interval,
        limits,
        args.record,
        _outputs(args),
        getattr(args, "context_sweep", None),
    )


def _outputs(args: argparse.Namespace) -> Outputs:
    return Outputs(args.json, args.csv, args.markdown, args.label)


def plan_from(args: argparse.Namespace) -> BenchPlan:
    """The bench the command line asks for; PlanError (one line, exit 2) for a setting that
    cannot be."""
    from specmon.bench.config import ConfigError

    try:
        return _plan(args)
    except ConfigError as exc:
        raise PlanError(str(exc)) from None


def _plan(args: argparse.Namespace) -> BenchPlan:
    from specmon.bench.config import ConfigError

    baseline = check_baseline(args.baseline)
    check_output_paths(args.json, args.csv, args.markdown, args.record)
    if getattr(args, "context_sweep", None) is not None:
        from specmon.bench.context_sweep import parse_lengths

        parse_lengths(args.context_sweep)
        if args.replay is not None or args.record or args.csv or args.markdown:
            raise ConfigError(
                "--context-sweep runs several benches: it takes --json, not --replay, "
                "--record, --csv or --markdown"
            )
    if args.replay is not None:
        return BenchReplay(args.replay, baseline, _outputs(args))
    from specmon.cli.host_args import host_requested

    if not args.attach and host_requested(args):
        return _host_plan(args, baseline)
    if not args.attach:
        raise ConfigError(
            "--attach URL is required (the server to benchmark), or host mode: --model M "
            "(or --preset NAME) to start one"
        )
    if args.vllm_args:
        raise ConfigError("extra `vllm serve` arguments after `--` need host mode, not --attach")
    config = workload_config(args)
    from specmon.bench.servers import endpoint_for

    try:
        endpoint = endpoint_for(args.attach, args.metrics_url)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    gpu = gpu_choice(args.gpu, [args.attach])
    return BenchAttached(_bench_run(args, config, gpu, baseline, api_key_of(args)), endpoint)


def _host_plan(args: argparse.Namespace, baseline: float | None) -> BenchHosted | BenchDryRun:
    """Host mode: the flags checked (a plan, the command built, vLLM found) before anything
    starts."""
    from specmon.bench.config import ConfigError
    from specmon.bench.host import served_api_key
    from specmon.core.errors import SpecmonError
    from specmon.runtime.host_plan import HostFlags, resolve_settings
    from specmon.sources.host.checks import find_vllm
    from specmon.sources.host.spec import build_command

    flags = HostFlags.of(args)
    config = workload_config(args, hosted=True)
    gpu = gpu_choice(args.gpu, [f"http://{flags.host or '127.0.0.1'}:1"])
    # Without --api-key: the server's own key, given after `--`.
    # Without --api-key: the server's own key, given after `--`.
    api_key = api_key_of(args, served_api_key(flags))
    bench = _bench_run(args, config, gpu, baseline, api_key)
    if flags.n_spec == 0:
        raise ConfigError(
            "--n-spec 0 in host mode: leave out --n-spec, --draft and --method for vanilla"
        )
    if flags.dry_run:
        return BenchDryRun(flags)
    try:
        settings, _ = resolve_settings(flags)
        build_command(settings, "vllm")
        find_vllm(flags.vllm)
    except SpecmonError as exc:
        raise ConfigError(str(exc)) from None
    return BenchHosted(bench, flags)


def run(plan: BenchPlan) -> int:
    from specmon.bench.command import run_bench_plan

    return run_bench_plan(plan)
