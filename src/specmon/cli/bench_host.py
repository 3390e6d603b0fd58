"""Host mode for `specmon bench` and `specmon sweep`: start `vllm serve` per point.

Built on the host-mode start sequence of `specmon serve`/`chat` (cli/host_args.py: plan_host,
launch_host, HostedServer.wait_ready, stop). Per sweep point the host-mode flags are copied and
adjusted: n_spec=K sets `num_speculative_tokens`; n_spec=0 drops speculation altogether (vanilla
`vllm serve` of the same model, preset arguments kept); serve-grid values are appended to the
extra `vllm serve` arguments, overriding the same option given after `--` or by a preset.

`host_point(args, point)` is the context manager the sweep's StartingProvider calls: it starts the
server, waits for /health, yields the Endpoint and stops the whole process group on exit (Ctrl-C
included). A server that exits or is not ready in time raises ServerUnavailable naming the cause
(the log tail goes to stderr), so the sweep records the point as failed and goes on.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from specmon.bench.config import ConfigError
from specmon.bench.servers import Endpoint, Point, ServerUnavailable
from specmon.cli.host_args import HostFlags

Writer = Callable[[str], None]

SECRET_MARK = "<secret: give it again>"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def host_requested(args: argparse.Namespace) -> bool:
    """Host mode: a target model or a preset, and no attached server."""
    return bool(getattr(args, "model", None) or getattr(args, "preset", None))


def served_api_key(flags: HostFlags) -> str | None:
    """The `--api-key` given to `vllm serve` after `--` (bench's requests need it too)."""
    from specmon.sources.host.spec import option_value

    return option_value(list(flags.vllm_args), "api-key")


def point_flags(flags: HostFlags, point: Point) -> HostFlags:
    """The host-mode flags of one sweep point (ConfigError for a setting that cannot be)."""
    from specmon.cli.host_args import resolve_settings
    from specmon.sources.host.spec import HostSpecError, merge_args

    if point.n_spec != 0:
        return replace(
            flags,
            n_spec=point.n_spec,
            vllm_args=tuple(merge_args(list(flags.vllm_args), point.serve_args())),
        )
    try:
        settings, _preset = resolve_settings(flags)
    except HostSpecError as exc:
        raise ConfigError(str(exc)) from None
    # Vanilla: the same model and serve arguments, no speculative config at all.
    return replace(
        flags,
        preset=None,
        model=settings.model,
        draft=None,
        method=None,
        n_spec=None,
        n_spec_per_batch=None,
        spec_option=(),
        env=tuple(settings.env.items()),
        vllm_args=tuple(merge_args(settings.vllm_args, point.serve_args())),
    )


def check_points(flags: HostFlags, points: Sequence[Point]) -> dict[str, Any]:
    """Before anything starts: the vllm executable is there and every point's command can be
    built (method, K range, option conflicts). Returns what the recommendation's command line
    needs: {"model", "draft", "method"}. Raises ConfigError (one line)."""
    from specmon.cli.host_args import resolve_settings
    from specmon.core.errors import SpecmonError
    from specmon.core.redaction import REDACTED
    from specmon.sources.host.checks import find_vllm
    from specmon.sources.host.spec import build_command, resolve_method, speculative_config
    from specmon.sources.vllm_args import secret_values

    if flags.n_spec_per_batch:
        raise ConfigError(
            "--n-spec-per-batch does not fit a sweep: sweep --concurrency 1,4,16 recommends a "
            "per-batch-size schedule instead"
        )
    try:
        if not flags.dry_run:  # a dry run prints commands without vLLM
            find_vllm(flags.vllm)
        identity: dict[str, Any] = {}
        for point in points:
            settings, _ = resolve_settings(point_flags(flags, point))
            build_command(settings, "vllm")
            if point.n_spec != 0:
                config = speculative_config(settings) or {}
                identity = {
                    "model": settings.model,
                    "draft": settings.draft,
                    "method": resolve_method(settings.draft, settings.method),
                    "spec_extra": {
                        k: v
                        for k, v in config.items()
                        if k not in ("method", "model", "num_speculative_tokens")
                    },
                }
            identity.setdefault("model", settings.model)
            base, _ = resolve_settings(point_flags(flags, Point(point.n_spec)))
            secrets = secret_values(base.vllm_args)
            identity["serve_args"] = [
                REDACTED if any(x in a for x in secrets) else a for a in base.vllm_args
            ]
    except SpecmonError as exc:
        raise ConfigError(str(exc)) from None
    return identity


@contextlib.contextmanager
def host_point(
    flags: HostFlags,
    point: Point,
    *,
    say: Writer = _stderr,
    on_line: Callable[[str], None] | None = None,
) -> Iterator[Endpoint]:
    """Start the point's server, wait until ready, yield its endpoint, stop it on exit."""
    with hosted(point_flags(flags, point), point.label, say=say, on_line=on_line) as endpoint:
        yield endpoint


@contextlib.contextmanager
def hosted(
    flags: HostFlags,
    label: str,
    *,
    say: Writer = _stderr,
    on_line: Callable[[str], None] | None = None,
) -> Iterator[Endpoint]:
    """Start the server the host-mode `flags` describe, wait until ready, yield its endpoint,
    stop its whole process group on exit. ServerUnavailable (the cause) when it does not start."""
    import shlex

    from specmon.cli.host_args import launch_host, plan_host
    from specmon.cli.host_launch import raise_stop_grace
    from specmon.core.errors import SpecmonError
    from specmon.sources.host.process import DEFAULT_READY_TIMEOUT_S, HostStartError
    from specmon.sources.host.spec import masked_argv
    from specmon.sources.metrics_scraper import metrics_url_for

    try:
        plan = plan_host(flags, say=say)
    except SpecmonError as exc:
        raise ServerUnavailable(str(exc)) from None
    for warning in plan.warnings:
        say(warning)
    command = shlex.join(masked_argv(plan.command))
    raise_stop_grace()  # a stop signal waits for the group's stop, not the default 1.5 s
    server = launch_host(plan, on_line=on_line)
    say(f"{label}: starting {command}")
    say(f"{label}: vLLM log: {server.log_path}")
    try:
        last = [-1]

        def progress(p: Any) -> None:
            if int(p.phase) != last[0]:
                last[0] = int(p.phase)
                say(f"{label}: {p.phase.name.lower().replace('_', ' ')}")

        try:
            server.wait_ready(flags.ready_timeout or DEFAULT_READY_TIMEOUT_S, on_progress=progress)
        except HostStartError as exc:
            say(exc.report())
            cause = exc.cause.summary if exc.cause is not None else exc.reason
            raise ServerUnavailable(
                f"server did not start: {cause} (log: {exc.log_path})"
            ) from None
        base = server.base_url
        yield Endpoint(base, metrics_url_for(base), f"host: {command}")
    finally:
        report = server.stop()
        if report.survivors:
            say(
                f"{label}: warning: pids {', '.join(map(str, report.survivors))} of the "
                "server survived the stop"
            )


def saved_host_flags(flags: HostFlags) -> dict[str, Any]:
    """The host-mode flags for the sweep folder, secret values replaced by SECRET_MARK."""
    from pathlib import Path

    from specmon.cli.host_args import HOST_FIELDS
    from specmon.sources.host.spec import mask_env
    from specmon.sources.vllm_args import secret_values

    out: dict[str, Any] = {name: getattr(flags, name) for name in HOST_FIELDS}
    for name in ("vllm", "log_file"):  # --resume may run from another folder
        if out[name]:
            out[name] = str(Path(out[name]).expanduser().resolve())
    secrets = set(secret_values(list(flags.vllm_args)))
    out["vllm_args"] = [SECRET_MARK if any(x in a for x in secrets) else a for a in flags.vllm_args]
    out["env"] = [[k, v if mask_env(k, v) == v else SECRET_MARK] for k, v in flags.env]
    out["spec_option"] = [list(kv) for kv in flags.spec_option]
    return out


def restore_host_flags(saved: dict[str, Any]) -> HostFlags:
    """The saved host-mode flags (ConfigError when a secret was left out of the folder: the
    flags must then be given again with --resume)."""
    from specmon.cli.host_args import HOST_FIELDS

    flat = [*(saved.get("vllm_args") or []), *(v for _k, v in saved.get("env") or [])]
    if SECRET_MARK in flat:
        raise ConfigError(
            "this sweep's host-mode flags held a secret, which is never saved: give the "
            "host-mode flags (--model ... -- ...) again with --resume"
        )
    return HostFlags.of(argparse.Namespace(**{k: saved[k] for k in HOST_FIELDS if k in saved}))
