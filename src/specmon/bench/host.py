"""Host mode for `specmon bench` and `specmon sweep`: start `vllm serve` per point.

Built on the host-mode start sequence of `specmon serve`/`chat` (runtime/host_plan.py: plan_host,
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

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from specmon.bench.config import ConfigError
from specmon.bench.servers import Endpoint, Point, ServerUnavailable
from specmon.runtime.host_plan import HostFlags

Writer = Callable[[str], None]

SECRET_MARK = "<secret: give it again>"


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def served_api_key(flags: HostFlags) -> str | None:
    """The `--api-key` given to `vllm serve` after `--` (bench's requests need it too)."""
    from specmon.sources.host.spec import option_value

    return option_value(list(flags.vllm_args), "api-key")


def point_flags(flags: HostFlags, point: Point) -> HostFlags:
    """The host-mode flags of one sweep point (ConfigError for a setting that cannot be)."""
    from specmon.runtime.host_plan import resolve_settings
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
    from specmon.core.errors import SpecmonError
    from specmon.core.redaction import REDACTED
    from specmon.runtime.host_plan import resolve_settings
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

    from specmon.core.errors import SpecmonError
    from specmon.runtime.host_launch import raise_stop_grace
    from specmon.runtime.host_plan import launch_host, plan_host
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

    from specmon.runtime.host_plan import HOST_FIELDS
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


SETUP_FIELDS: tuple[str, ...] = (
    "preset",
    "model",
    "draft",
    "method",
    "spec_option",
    "n_spec_per_batch",
    "vllm",
    "env",
    "vllm_args",
)
"""The host-mode flags that decide what a sweep's servers run: the program, its environment and
arguments, the model and the speculation. A resumed sweep takes them from the command line only,
and refuses to go on when they differ from the ones its folder records (a shared folder is not
trusted to choose what runs, and one sweep measures one setup)."""


def _setup_value(name: str, value: Any) -> Any:
    """A setup flag's value in one comparable form (pairs sorted; a shape no command line
    gives stays as it is, so it never equals one)."""
    if name in ("env", "spec_option"):
        if isinstance(value, list | tuple) and all(
            isinstance(p, list | tuple) and len(p) == 2 for p in value
        ):
            return sorted((str(k), str(v)) for k, v in value)
        return value or []
    if name == "vllm_args":
        if isinstance(value, list | tuple) and all(isinstance(a, str) for a in value):
            return list(value)
        return value or []
    return value if value not in ("", None) else None


def setup_words(saved: dict[str, Any], grid: Sequence[tuple[str, Sequence[str]]] = ()) -> list[str]:
    """The setup flags of saved host-mode flags (`saved_host_flags`' form) as command-line
    words: what a resumed sweep must be given again."""
    from specmon.runtime.host_plan import flag_of

    words: list[str] = []
    for name in SETUP_FIELDS:
        value = _setup_value(name, saved.get(name))
        if name == "vllm_args":
            continue
        if isinstance(value, list):
            for pair in value:
                two = isinstance(pair, list | tuple) and len(pair) == 2
                words += [flag_of(name), "=".join(map(str, pair)) if two else str(pair)]
        elif value is not None:
            words += [flag_of(name), str(value)]
    for name, values in grid:
        words += ["--serve-grid", f"{name}={','.join(values)}"]
    args = _setup_value("vllm_args", saved.get("vllm_args"))
    if args:
        words += ["--", *map(str, args)]
    return words


def shown_words(words: Sequence[str], limit: int = 600) -> str:
    """Words from a file, shown literally on one line: shell-quoted, control characters (a
    newline and a tab too) made visible, cut past `limit` characters."""
    import shlex

    from specmon.core.display_text import shorten, visible

    text = visible(shlex.join(words)).replace("\n", "\u240a").replace("\t", "\u2409")
    return shorten(text, limit)


def setup_differences(
    recorded: dict[str, Any],
    given: dict[str, Any],
    recorded_grid: Sequence[tuple[str, Sequence[str]]] = (),
    given_grid: Sequence[tuple[str, Sequence[str]]] = (),
) -> list[str]:
    """'--vllm (folder: X; given: Y)' for each setup flag (and the serve grid) that differs
    between the recorded and the given host-mode flags (both in `saved_host_flags`' form)."""
    from specmon.runtime.host_plan import flag_of

    out: list[str] = []

    def side(words: list[str]) -> str:
        return shown_words(words, 200) if words else "none"

    for name in SETUP_FIELDS:
        a, b = _setup_value(name, recorded.get(name)), _setup_value(name, given.get(name))
        if a != b:
            wa = setup_words({name: recorded.get(name)})
            wb = setup_words({name: given.get(name)})
            out.append(f"{flag_of(name)} (folder: {side(wa)}; given: {side(wb)})")
    if [(n, list(v)) for n, v in recorded_grid] != [(n, list(v)) for n, v in given_grid]:
        wa, wb = setup_words({}, recorded_grid), setup_words({}, given_grid)
        out.append(f"--serve-grid (folder: {side(wa)}; given: {side(wb)})")
    return out


def holds_secret(saved: dict[str, Any]) -> bool:
    """Whether saved host-mode flags had a secret left out (SECRET_MARK in its place, or the
    scrubber's mark where the file's writer found it first)."""
    from specmon.core.redaction import REDACTED

    args, env = saved.get("vllm_args"), saved.get("env")
    values = list(args) if isinstance(args, list) else []
    if isinstance(env, list):
        values += [p[1] for p in env if isinstance(p, list | tuple) and len(p) == 2]
    return SECRET_MARK in values or REDACTED in values
