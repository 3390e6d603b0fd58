"""What a hosted `vllm serve` runs: the settings, the speculative config and the command line.

`HostSettings` is the merged intent (a preset's values, overridden by flags and by the extra
arguments after `--`). `speculative_config()` turns method, draft and K into vLLM's
`--speculative-config` JSON, refusing a draft without a fitting method or a K out of range with a
one-line message that names the valid values. `build_command()` makes the exact argv and the
environment changes; `describe_command()` prints them with secrets masked (core.redaction).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.core.errors import SpecmonError
from specmon.core.per_batch_k import ScheduleError, check_schedule
from specmon.core.redaction import REDACTED, redact_text
from specmon.sources.vllm_args import secret_values

METHODS: tuple[str, ...] = ("dflash", "eagle3", "mtp", "ngram", "draft_model")
"""Speculation methods `--method` accepts."""
DRAFT_METHODS: tuple[str, ...] = ("dflash", "eagle3", "draft_model")
"""Methods that run a separate draft model (`--draft` is required)."""
K_RANGE: dict[str, tuple[int, int]] = {
    # DFlash drafts a block in one pass; the published drafters (z-lab, RedHatAI) use 16-token
    # blocks: the bonus token plus up to 15 drafts.
    "dflash": (1, 15),
    "eagle3": (1, 32),
    "mtp": (1, 32),
    "ngram": (1, 32),
    "draft_model": (1, 32),
}
DEFAULT_K: dict[str, int] = {"dflash": 8, "eagle3": 4, "mtp": 1, "ngram": 4, "draft_model": 4}
NGRAM_LOOKUP_DEFAULTS: dict[str, int] = {"prompt_lookup_max": 4, "prompt_lookup_min": 2}
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DETAILED_METRICS_FLAG = "--per-request-spec-decode-metrics"
TIMING_METRICS_FLAG = "--enable-per-request-metrics"
"""vLLM's per-request timing metrics (queue, server TTFT, generation time, mean ITL; reference
§3.3). Older than the detailed spec-decode flag (#46768 before #48915), so a build that takes
that one takes this one; vLLM rejects it together with `--disable-log-stats`."""

# Variables set for every hosted server: plain (uncoloured) log lines to parse.
BASE_ENV: dict[str, str] = {"NO_COLOR": "1"}
_SECRET_ENV_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD", re.IGNORECASE)
INHERITED_SECRET_VARS: tuple[str, ...] = (
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "VLLM_API_KEY",
    "OPENAI_API_KEY",
)


class HostSpecError(SpecmonError, ValueError):
    """Settings that cannot make a valid `vllm serve` command (one line, names valid values)."""


@dataclass(frozen=True)
class HostSettings:
    """Everything that decides the command line (preset values already merged with flags)."""

    model: str
    draft: str | None = None
    method: str | None = None
    n_spec: int | None = None
    n_spec_per_batch: tuple[tuple[int, int, int], ...] | None = None
    spec_options: Mapping[str, Any] = field(default_factory=dict)
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    vllm_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    preset: str | None = None


@dataclass(frozen=True)
class SpecSummary:
    """The speculation a command runs, for the session header and the progress display."""

    method: str | None
    draft: str | None
    n_spec: int | None


@dataclass(frozen=True)
class HostCommand:
    """The exact argv and the environment changes (the rest of the environment is inherited)."""

    argv: tuple[str, ...]
    env_changes: Mapping[str, str]
    spec: SpecSummary
    base_url: str

    def environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env.update(self.env_changes)
        return env

    @property
    def secrets(self) -> tuple[str, ...]:
        """Secret values in the command line and the environment changes."""
        found = list(secret_values(self.argv))
        found += [v for k, v in self.env_changes.items() if _SECRET_ENV_NAME.search(k) and v]
        return tuple(found)


def mask_env(name: str, value: str) -> str:
    """An environment value as it may be printed: the redaction marker for secret names."""
    return REDACTED if _SECRET_ENV_NAME.search(name) else value


def resolve_method(draft: str | None, method: str | None) -> str | None:
    """The method: the given one, dflash when only a draft is given, None for no speculation."""
    if method is not None:
        if method not in METHODS:
            raise HostSpecError(f"--method {method!r} is not known; valid: {', '.join(METHODS)}")
        return method
    return "dflash" if draft else None


def speculative_config(settings: HostSettings) -> dict[str, Any] | None:
    """vLLM's speculative config for the settings, or None when nothing asks for speculation."""
    method = resolve_method(settings.draft, settings.method)
    if method is None:
        if settings.n_spec is not None or settings.n_spec_per_batch:
            raise HostSpecError(
                "--n-spec needs a speculation method: --draft MODEL (dflash by default) or "
                f"--method {'|'.join(METHODS)}"
            )
        return None
    if method in DRAFT_METHODS and not settings.draft:
        raise HostSpecError(
            f"--method {method} needs --draft MODEL; methods without a draft model: mtp, ngram"
        )
    if method not in DRAFT_METHODS and settings.draft:
        raise HostSpecError(
            f"--draft does not fit --method {method} (it drafts without a separate model); "
            f"methods that take --draft: {', '.join(DRAFT_METHODS)}"
        )
    low, high = K_RANGE[method]
    schedule_k = max((kk for _s, _e, kk in settings.n_spec_per_batch or ()), default=None)
    if settings.n_spec is not None:
        k = settings.n_spec
        if schedule_k is not None and schedule_k > k:
            # vLLM clamps every k of the schedule to num_speculative_tokens, silently.
            raise HostSpecError(
                f"--n-spec-per-batch asks for K {schedule_k}, more than --n-spec {k}: vLLM would "
                f"lower it to {k}; leave --n-spec out (it becomes the schedule's largest K)"
            )
    else:
        k = schedule_k or DEFAULT_K[method]
    if not low <= k <= high:
        raise HostSpecError(f"--n-spec {k} is out of range for {method}: valid {low}..{high}")
    config: dict[str, Any] = {"method": method}
    if settings.draft:
        config["model"] = settings.draft
    config["num_speculative_tokens"] = k
    if method == "ngram":
        config.update(NGRAM_LOOKUP_DEFAULTS)
    for key, value in settings.spec_options.items():
        if key in ("method", "model", "num_speculative_tokens"):
            raise HostSpecError(
                f"speculative option {key!r} is set by --method/--draft/--n-spec, not as an option"
            )
        config[key] = value
    if settings.n_spec_per_batch:
        for start, end, kk in settings.n_spec_per_batch:
            if kk != 0 and not low <= kk <= high:  # 0: no speculation at those batch sizes
                raise HostSpecError(
                    f"dynamic K {kk} (batch sizes {start}-{end}) is out of range for {method}: "
                    f"valid {low}..{high}"
                )
        config["num_speculative_tokens_per_batch_size"] = [
            list(entry) for entry in settings.n_spec_per_batch
        ]
    return config


def parse_per_batch(text: str) -> tuple[tuple[int, int, int], ...]:
    """Dynamic speculation: "1-4:8,5-16:4" or JSON [[1,4,8],[5,16,4]] -> ((1,4,8), (5,16,4))."""
    text = text.strip()
    entries: list[tuple[int, int, int]] = []
    try:
        if text.startswith("["):
            for item in json.loads(text):
                start, end, k = (int(v) for v in item)
                entries.append((start, end, k))
        else:
            for part in text.split(","):
                sizes, _, k_text = part.strip().partition(":")
                start_text, _, end_text = sizes.partition("-")
                entries.append((int(start_text), int(end_text or start_text), int(k_text)))
    except (ValueError, TypeError) as exc:
        raise HostSpecError(
            f"--n-spec-per-batch {text!r} is not BS_START-BS_END:K[,...] (e.g. 1-4:8,5-64:4) "
            f"nor a JSON list of [bs_start, bs_end, k]: {exc}"
        ) from None
    try:
        return tuple(check_schedule(entries))
    except ScheduleError as exc:
        raise HostSpecError(f"--n-spec-per-batch {text!r}: {exc}") from None


# ---------------------------------------------------------------- argument lists


def _flag_key(token: str) -> str | None:
    """The option a token names ("--max_model_len=2" -> "max-model-len"; "--no-x" -> "x")."""
    if not token.startswith("--") or token == "--":
        return None
    name = token[2:].split("=", 1)[0].replace("_", "-")
    return name[3:] if name.startswith("no-") else name


def _is_value(token: str) -> bool:
    return not token.startswith("-") or bool(re.match(r"^-\d", token))


def split_options(args: Sequence[str]) -> list[tuple[str | None, list[str]]]:
    """Group an argument list into (option key, tokens); positionals get key None."""
    groups: list[tuple[str | None, list[str]]] = []
    i = 0
    while i < len(args):
        token = args[i]
        key = _flag_key(token)
        if key is None:
            groups.append((None, [token]))
            i += 1
            continue
        tokens = [token]
        if "=" not in token and i + 1 < len(args) and _is_value(args[i + 1]):
            tokens.append(args[i + 1])
            i += 1
        groups.append((key, tokens))
        i += 1
    return groups


def merge_args(base: Sequence[str], override: Sequence[str]) -> list[str]:
    """`base` with every option that `override` also sets replaced by override's (flags win)."""
    overridden = {key for key, _ in split_options(override) if key is not None}
    merged: list[str] = []
    for key, tokens in split_options(base):
        if key is None or key not in overridden:
            merged += tokens
    return merged + list(override)


def option_value(args: Sequence[str], key: str) -> str | None:
    """The last value given for option `key` in `args` (None if absent or valueless)."""
    found: str | None = None
    for k, tokens in split_options(args):
        if k == key:
            if "=" in tokens[0]:
                found = tokens[0].split("=", 1)[1]
            elif len(tokens) > 1:
                found = tokens[1]
    return found


def has_option(args: Sequence[str], key: str) -> bool:
    return any(k == key for k, _ in split_options(args))


_OWN_OPTIONS = ("host", "port", "model")


def metrics_flags(args: Sequence[str]) -> list[str]:
    """The per-request metrics flags host mode adds to `args` (what follows `vllm serve`): the
    detailed spec-decode object and, unless the user turned stats off or gave it, the timing
    metrics."""
    flags = [DETAILED_METRICS_FLAG, "detailed"]
    if not has_option(args, TIMING_METRICS_FLAG[2:]) and not has_option(args, "disable-log-stats"):
        flags.append(TIMING_METRICS_FLAG)
    return flags


def build_command(
    settings: HostSettings, vllm: str, *, detailed_metrics: bool = False
) -> HostCommand:
    """The exact `vllm serve` argv and environment for `settings` (raises HostSpecError)."""
    for key in _OWN_OPTIONS:
        if has_option(settings.vllm_args, key):
            raise HostSpecError(
                f"give --{key} to specmon, not after `--` (specmon needs to know it)"
            )
    config = speculative_config(settings)
    passed_config = option_value(settings.vllm_args, "speculative-config")
    if passed_config is None and has_option(settings.vllm_args, "sc"):
        passed_config = option_value(settings.vllm_args, "sc")
    if config is not None and (
        passed_config is not None or has_option(settings.vllm_args, "speculative-config")
    ):
        raise HostSpecError(
            "--speculative-config after `--` conflicts with --draft/--method/--n-spec; "
            "use one or the other"
        )
    argv: list[str] = [vllm, "serve", settings.model, "--host", settings.host]
    argv += ["--port", str(settings.port)]
    argv += list(settings.vllm_args)
    if config is not None:
        argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
        spec = SpecSummary(config["method"], config.get("model"), config["num_speculative_tokens"])
    else:
        spec = _summary_of_passed(passed_config)
    if (
        detailed_metrics
        and spec.method is not None
        and not has_option(settings.vllm_args, DETAILED_METRICS_FLAG[2:])
    ):
        argv += metrics_flags(settings.vllm_args)
    env = dict(BASE_ENV)
    env.update(settings.env)
    host = settings.host
    url_host = "127.0.0.1" if host in ("0.0.0.0", "") else host
    url_host = f"[{url_host}]" if ":" in url_host and url_host != "::" else url_host
    if host == "::":
        url_host = "[::1]"
    return HostCommand(tuple(argv), env, spec, f"http://{url_host}:{settings.port}")


def _summary_of_passed(config_text: str | None) -> SpecSummary:
    """Method, draft and K of a `--speculative-config` passed after `--` (best effort)."""
    if config_text is None:
        return SpecSummary(None, None, None)
    try:
        config = json.loads(config_text)
    except ValueError:
        return SpecSummary("unknown", None, None)
    if not isinstance(config, dict):
        return SpecSummary("unknown", None, None)
    k = config.get("num_speculative_tokens")
    draft = config.get("model")
    method = config.get("method") or ("dflash" if draft and "dflash" in str(draft) else None)
    return SpecSummary(
        str(method) if method else "unknown",
        str(draft) if draft else None,
        k if isinstance(k, int) else None,
    )


def masked_argv(command: HostCommand) -> list[str]:
    """The argv with secret values (--api-key ...) replaced by the redaction marker."""
    secrets = command.secrets
    return [redact_text(token, secrets) for token in command.argv]


def describe_command(command: HostCommand, environ: Mapping[str, str] | None = None) -> str:
    """The dry-run text: the environment set, inherited secrets (masked), the command line."""
    env = os.environ if environ is None else environ
    lines = ["# environment set by specmon (the rest is inherited):"]
    for name, value in command.env_changes.items():
        lines.append(f"{name}={shlex.quote(mask_env(name, value))}")
    inherited = [n for n in INHERITED_SECRET_VARS if env.get(n) and n not in command.env_changes]
    for name in inherited:
        lines.append(f"# inherited: {name}={REDACTED}")
    lines.append("# command:")
    lines.append(shlex.join(masked_argv(command)))
    return "\n".join(lines)
