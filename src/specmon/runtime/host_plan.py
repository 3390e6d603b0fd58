"""Host mode's plan and start sequence, shared by `specmon serve`, `chat`, `bench` and `sweep`.

    flags = HostFlags.of(args)            the host-mode flags as given (cli/host_args.py adds them)
    plan = plan_host(flags)               presets merged, command built, pre-launch checks run
    server = launch_host(plan, on_line=...)   started (own process group, log file, watchdog)
    server.wait_ready(on_progress=...)    /health 200, or HostStartError with tail and cause

`server.base_url`, `server.log_path`, `server.session_info` (the recording header's fields) and
`server.stop()` are what a command needs afterwards. Every error a user can cause is a
`SpecmonError` with a one-line message (`HostStartError.report()` has the log tail and cause).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specmon.core.events import SessionInfo
from specmon.core.redaction import REDACTED
from specmon.core.startup_log import StartupProgress
from specmon.sources.host.spec import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    DRAFT_METHODS,
    HostCommand,
    HostSettings,
    HostSpecError,
    build_command,
    describe_command,
    masked_argv,
    merge_args,
    parse_per_batch,
)
from specmon.sources.vllm_args import ArgsVerdict

if TYPE_CHECKING:  # type names only: imports stay lazy for `specmon --help`
    from specmon.sources.host.presets import Preset
    from specmon.sources.host.process import HostedServer

Writer = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class HostFlags:
    """The host-mode flags as given (or as a sweep point adjusts them): what `plan_host` reads.
    The one declaration of the host-mode flags: cli/host_args.py's `add_host_arguments` adds one
    option per field
    (tests/unit/test_cli_args.py checks it), `HOST_ONLY` and `HOST_FIELDS` are derived from it."""

    model: str | None = None
    draft: str | None = None
    method: str | None = None
    n_spec: int | None = None
    n_spec_per_batch: str | None = None
    spec_option: tuple[tuple[str, str], ...] = ()
    preset: str | None = None
    host: str | None = None
    port: int | None = None
    vllm: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    dry_run: bool = False
    ready_timeout: float | None = None
    log_file: str | None = None
    skip_arg_check: bool = False
    vllm_args: tuple[str, ...] = ()
    """The extra `vllm serve` arguments (after `--`; the `--` itself dropped)."""

    @classmethod
    def of(cls, args: Any) -> HostFlags:
        """The host-mode flags of a parsed command line (defaults for those it lacks)."""
        if isinstance(args, HostFlags):
            return args
        values: dict[str, Any] = {
            f.name: getattr(args, f.name)
            for f in fields(cls)
            if getattr(args, f.name, None) is not None
        }
        values["spec_option"] = _pairs(values.get("spec_option"))
        values["env"] = _pairs(values.get("env"))
        extra = [str(word) for word in values.get("vllm_args") or ()]
        values["vllm_args"] = tuple(extra[1:] if extra[:1] == ["--"] else extra)
        return cls(**values)

    def given(self) -> list[str]:
        """The host-only flags given, as the user wrote them (for the error with --attach)."""
        return [flag for name, flag in HOST_ONLY if getattr(self, name)]


def _pairs(items: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(name), str(value)) for name, value in items or ())


def flag_of(name: str) -> str:
    """How a host-mode field is written on the command line."""
    return "-- VLLM_ARGS" if name == "vllm_args" else "--" + name.replace("_", "-")


HOST_ONLY: tuple[tuple[str, str], ...] = tuple(
    (f.name, flag_of(f.name)) for f in fields(HostFlags) if f.name != "model"
)
"""Flags that only host mode reads (`specmon chat`'s --model has a meaning with --attach too):
given with --attach they are an error, not ignored."""

HOST_FIELDS: tuple[str, ...] = tuple(
    f.name for f in fields(HostFlags) if f.name not in ("n_spec", "dry_run")
)
"""The host-mode flags saved in a sweep folder so `--resume` can start the same servers (a
sweep's --n-spec is its own list; a dry run starts nothing)."""


@dataclass(frozen=True)
class HostPlan:
    """Everything decided before launch (the log file's path included)."""

    settings: HostSettings
    command: HostCommand
    preset: Preset | None
    vllm: Path | None
    python: Path | None
    vllm_version: str | None
    gpu: str | None
    detailed_metrics: bool
    log_path: Path
    warnings: tuple[str, ...] = ()

    def session_info(self, progress: StartupProgress | None = None) -> SessionInfo:
        """The recording header's fields: model, draft, method, K, vLLM version, GPU, and in
        `extra["host"]` the full command (secrets masked), the environment set and the preset."""
        version = self.vllm_version or (progress.vllm_version if progress else None)
        host: dict[str, Any] = {
            "command": " ".join(_quote(t) for t in masked_argv(self.command)),
            "argv": masked_argv(self.command),
            "env": {
                k: (REDACTED if _secret_name(k) else v) for k, v in self.command.env_changes.items()
            },
            "preset": self.preset.name if self.preset else None,
            "detailed_metrics": self.detailed_metrics,
        }
        if self.preset is not None:
            host["preset_seed"] = self.preset.seed
            host["preset_proven_on"] = self.preset.proven_on
        host["log_file"] = str(self.log_path)
        return SessionInfo(
            server=self.command.base_url,
            model=self.settings.model,
            draft_model=self.command.spec.draft,
            method=self.command.spec.method,
            n_spec=self.command.spec.n_spec,
            vllm_version=version,
            gpu=self.gpu,
            extra={"host": host},
        )


def _quote(token: str) -> str:
    import shlex

    return shlex.quote(token)


def _secret_name(name: str) -> bool:
    from specmon.sources.host.spec import mask_env

    return mask_env(name, "x") == REDACTED


def _option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def resolve_settings(
    given: Any,
) -> tuple[HostSettings, Preset | None]:
    """Preset values, overridden by flags and by the extra arguments after `--`."""
    from specmon.sources.host.presets import all_presets, find_preset

    args = HostFlags.of(given)
    preset = find_preset(args.preset, all_presets()) if args.preset else None
    extra = list(args.vllm_args)
    model = args.model or (preset.model if preset else None)
    if not model:
        raise HostSpecError("--model MODEL is needed (or --preset NAME; `specmon presets` lists)")
    draft = args.draft if args.draft is not None else (preset.draft if preset else None)
    method = args.method
    if method is None and preset is not None and args.draft is None:
        method = preset.method
    if args.method is not None and args.method not in DRAFT_METHODS and args.draft is None:
        draft = None  # --method ngram|mtp over a preset with a draft: the flag wins
    n_spec = args.n_spec if args.n_spec is not None else (preset.n_spec if preset else None)
    spec_options: dict[str, Any] = dict(preset.spec_options) if preset else {}
    for key, value in args.spec_option:
        spec_options[key] = _option_value(value)
    env = dict(preset.env) if preset else {}
    env.update(dict(args.env))
    settings = HostSettings(
        model=model,
        draft=draft or None,
        method=method,
        n_spec=n_spec,
        n_spec_per_batch=parse_per_batch(args.n_spec_per_batch) if args.n_spec_per_batch else None,
        spec_options=spec_options,
        host=args.host or DEFAULT_HOST,
        port=DEFAULT_PORT if args.port is None else args.port,
        vllm_args=tuple(merge_args(preset.vllm_args if preset else (), extra)),
        env=env,
        preset=preset.name if preset else None,
    )
    return settings, preset


def plan_host(
    given: Any,
    *,
    launching: bool = True,
    say: Writer = _stderr,
    gpu_sampler: Any = None,
) -> HostPlan:
    """Resolve settings and run the pre-launch checks. Raises a SpecmonError (one line)."""
    from specmon.sources.host.checks import (
        HostCheckError,
        check_arguments,
        find_vllm,
        gpu_memory_warning,
        pick_free_port,
        port_free,
        vllm_python,
        vllm_version,
    )

    args = HostFlags.of(given)
    settings, preset = resolve_settings(args)
    build_command(settings, "vllm")  # method / K / option errors before any slow check
    vllm: Path | None
    try:
        vllm = find_vllm(args.vllm)
    except HostCheckError:
        if launching:
            raise
        vllm = None  # a dry run still prints the command
    if settings.port == 0:
        settings = replace(settings, port=pick_free_port(settings.host))
    elif launching and not port_free(settings.host, settings.port):
        raise HostCheckError(
            f"port {settings.port} on {settings.host} is in use; choose another with --port "
            "(--port 0 picks a free one)"
        )
    python = vllm_python(vllm) if vllm is not None else None
    version = vllm_version(python)
    warnings: list[str] = []
    if vllm is None:
        warnings.append(
            "note: vLLM is not installed here; install it with: pip install 'specmon[host]'"
        )
    detailed = False
    if vllm is not None and not args.skip_arg_check:
        say("checking the arguments with vLLM's own parser ...")
        plain = build_command(settings, str(vllm))
        check = check_arguments(
            list(plain.argv[2:]), python, want_detailed=plain.spec.method is not None
        )
        if check.result.verdict is ArgsVerdict.INVALID:
            raise HostSpecError(f"vLLM's parser refused the arguments: {check.result.message}")
        if check.result.verdict is ArgsVerdict.UNCHECKED:
            warnings.append(f"note: arguments not checked by vLLM's parser: {check.result.message}")
        detailed = check.detailed_metrics
    gpu = None
    if launching or preset is not None:
        sampler = gpu_sampler
        if sampler is None:
            from specmon.sources.gpu import NvmlSampler

            sampler = NvmlSampler()
        try:
            warning, gpu = gpu_memory_warning(preset.gpu_memory_gib if preset else None, sampler)
        finally:
            close = getattr(sampler, "close", None)
            if gpu_sampler is None and close is not None:
                close()
        if warning:
            warnings.append(warning)
    command = build_command(settings, str(vllm or "vllm"), detailed_metrics=detailed)
    from specmon.sources.host.process import default_log_path

    log_path = Path(args.log_file) if args.log_file else default_log_path(settings.port)
    return HostPlan(
        settings, command, preset, vllm, python, version, gpu, detailed, log_path, tuple(warnings)
    )


def dry_run_text(plan: HostPlan, environ: dict[str, str] | None = None) -> str:
    lines = []
    if plan.preset is not None:
        lines.append(f"# preset {plan.preset.name}: {plan.preset.summary}")
        lines.append(f"#   seed: {plan.preset.seed}")
        lines.append(f"#   proven on: {plan.preset.proven_on}")
        if plan.preset.note:
            lines.append(f"#   note: {plan.preset.note}")
    if plan.vllm_version:
        lines.append(f"# vLLM {plan.vllm_version} at {plan.vllm}")
    if not plan.detailed_metrics and plan.command.spec.method is not None:
        lines.append(
            "# (--per-request-spec-decode-metrics detailed not added: this build's parser "
            "was not asked or does not know it)"
        )
    lines.append(describe_command(plan.command, os.environ if environ is None else environ))
    return "\n".join(lines)


def launch_host(
    plan: HostPlan, *, on_line: Callable[[str], None] | None = None, grace_s: float | None = None
) -> HostedServer:
    """Start the planned server (does not wait), its log in the plan's file."""
    from specmon.sources.host.process import DEFAULT_GRACE_S, HostedServer

    server = HostedServer.launch(
        plan.command, plan.log_path, grace_s=DEFAULT_GRACE_S if grace_s is None else grace_s
    )
    server.session_info = plan.session_info()
    if on_line is not None:
        server.add_line_sink(on_line, replay=True)
    return server
