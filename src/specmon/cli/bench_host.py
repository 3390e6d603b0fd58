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
import copy
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from specmon.bench.config import ConfigError
from specmon.bench.servers import Endpoint, Point, ServerUnavailable

Writer = Callable[[str], None]

HOST_FIELDS = (
    "model",
    "draft",
    "method",
    "n_spec_per_batch",
    "spec_option",
    "preset",
    "host",
    "port",
    "vllm",
    "env",
    "ready_timeout",
    "log_file",
    "skip_arg_check",
    "vllm_args",
)
"""The host-mode flags saved in a sweep folder so `--resume` can start the same servers."""

SECRET_MARK = "<secret: give it again>"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def host_requested(args: argparse.Namespace) -> bool:
    """Host mode: a target model or a preset, and no attached server."""
    return bool(getattr(args, "model", None) or getattr(args, "preset", None))


def _extra_args(args: argparse.Namespace) -> list[str]:
    extra = list(getattr(args, "vllm_args", None) or [])
    return extra[1:] if extra[:1] == ["--"] else extra


def served_api_key(args: argparse.Namespace) -> str | None:
    """The `--api-key` given to `vllm serve` after `--` (bench's requests need it too)."""
    from specmon.sources.host.spec import option_value

    return option_value(_extra_args(args), "api-key")


def point_namespace(args: argparse.Namespace, point: Point) -> argparse.Namespace:
    """The host-mode flags of one sweep point (ConfigError for a setting that cannot be)."""
    from specmon.cli.host_args import resolve_settings
    from specmon.sources.host.spec import HostSpecError, merge_args

    ns = copy.copy(args)
    if point.n_spec == 0:
        try:
            settings, _preset = resolve_settings(args)
        except HostSpecError as exc:
            raise ConfigError(str(exc)) from None
        # Vanilla: the same model and serve arguments, no speculative config at all.
        ns.preset = None
        ns.model = settings.model
        ns.draft = None
        ns.method = None
        ns.n_spec = None
        ns.n_spec_per_batch = None
        ns.spec_option = []
        ns.env = list(settings.env.items())
        ns.vllm_args = merge_args(settings.vllm_args, point.serve_args())
    else:
        ns.n_spec = point.n_spec
        ns.vllm_args = merge_args(_extra_args(args), point.serve_args())
    return ns


def check_points(args: argparse.Namespace, points: Sequence[Point]) -> dict[str, Any]:
    """Before anything starts: the vllm executable is there and every point's command can be
    built (method, K range, option conflicts). Returns what the recommendation's command line
    needs: {"model", "draft", "method"}. Raises ConfigError (one line)."""
    from specmon.cli.host_args import resolve_settings
    from specmon.core.errors import SpecmonError
    from specmon.core.redaction import REDACTED
    from specmon.sources.host.checks import find_vllm
    from specmon.sources.host.spec import build_command, resolve_method, speculative_config
    from specmon.sources.vllm_args import secret_values

    if getattr(args, "n_spec_per_batch", None):
        raise ConfigError(
            "--n-spec-per-batch does not fit a sweep: sweep --concurrency 1,4,16 recommends a "
            "per-batch-size schedule instead"
        )
    try:
        if not getattr(args, "dry_run", False):  # a dry run prints commands without vLLM
            find_vllm(args.vllm)
        identity: dict[str, Any] = {}
        for point in points:
            settings, _ = resolve_settings(point_namespace(args, point))
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
            base, _ = resolve_settings(point_namespace(args, Point(point.n_spec)))
            secrets = secret_values(base.vllm_args)
            identity["serve_args"] = [
                REDACTED if any(x in a for x in secrets) else a for a in base.vllm_args
            ]
    except SpecmonError as exc:
        raise ConfigError(str(exc)) from None
    return identity


@contextlib.contextmanager
def host_point(
    args: argparse.Namespace,
    point: Point,
    *,
    say: Writer = _stderr,
    on_line: Callable[[str], None] | None = None,
) -> Iterator[Endpoint]:
    """Start the point's server, wait until ready, yield its endpoint, stop it on exit."""
    with hosted(point_namespace(args, point), point.label, say=say, on_line=on_line) as endpoint:
        yield endpoint


@contextlib.contextmanager
def hosted(
    ns: argparse.Namespace,
    label: str,
    *,
    say: Writer = _stderr,
    on_line: Callable[[str], None] | None = None,
) -> Iterator[Endpoint]:
    """Start the server the host-mode flags `ns` describe, wait until ready, yield its endpoint,
    stop its whole process group on exit. ServerUnavailable (the cause) when it does not start."""
    import shlex

    from specmon.cli.host_args import launch_host, plan_host
    from specmon.cli.host_launch import raise_stop_grace
    from specmon.core.errors import SpecmonError
    from specmon.sources.host.process import DEFAULT_READY_TIMEOUT_S, HostStartError
    from specmon.sources.host.spec import masked_argv
    from specmon.sources.metrics_scraper import metrics_url_for

    try:
        plan = plan_host(ns, say=say)
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
            server.wait_ready(ns.ready_timeout or DEFAULT_READY_TIMEOUT_S, on_progress=progress)
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


def saved_host_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The host-mode flags for the sweep folder, secret values replaced by SECRET_MARK."""
    from specmon.sources.host.spec import mask_env
    from specmon.sources.vllm_args import secret_values

    out: dict[str, Any] = {name: getattr(args, name, None) for name in HOST_FIELDS}
    from pathlib import Path

    for name in ("vllm", "log_file"):  # --resume may run from another folder
        if out[name]:
            out[name] = str(Path(out[name]).expanduser().resolve())
    out["vllm_args"] = _extra_args(args)
    secrets = set(secret_values(out["vllm_args"]))
    out["vllm_args"] = [
        SECRET_MARK if any(x in a for x in secrets) else a for a in out["vllm_args"]
    ]
    out["env"] = [[k, v if mask_env(k, v) == v else SECRET_MARK] for k, v in (args.env or [])]
    out["spec_option"] = [list(kv) for kv in (args.spec_option or [])]
    return out


def restore_host_flags(args: argparse.Namespace, saved: dict[str, Any]) -> argparse.Namespace:
    """`args` with the saved host-mode flags (ConfigError when a secret was left out of the
    folder: the flags must then be given again with --resume)."""
    flat = [*(saved.get("vllm_args") or []), *(v for _k, v in saved.get("env") or [])]
    if SECRET_MARK in flat:
        raise ConfigError(
            "this sweep's host-mode flags held a secret, which is never saved: give the "
            "host-mode flags (--model ... -- ...) again with --resume"
        )
    ns = copy.copy(args)
    for name in HOST_FIELDS:
        if name in saved:
            setattr(ns, name, saved[name])
    ns.env = [tuple(kv) for kv in saved.get("env") or []]
    ns.spec_option = [tuple(kv) for kv in saved.get("spec_option") or []]
    return ns
