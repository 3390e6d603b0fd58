"""The functions `specmon chat` (and serve) use: plan_host, launch_host (through
tests.support.host_mode.start_host: plan, launch, wait until ready); the parser fallback for
`--per-request-spec-decode-metrics detailed` on builds that do not know it."""

from __future__ import annotations

import argparse
import stat
import sys
from pathlib import Path

import pytest
from tests.support.host_mode import start_host
from tests.support.waiting import wait_for

from specmon.cli.host_args import add_host_arguments
from specmon.core.startup_log import StartupPhase
from specmon.runtime.host_plan import plan_host
from specmon.sources.host.checks import check_arguments
from specmon.sources.host.spec import HostSpecError
from specmon.sources.vllm_args import RESULT_MARKER


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_host_arguments(parser)
    return parser.parse_args(list(argv))


def old_parser_python(tmp_path: Path, *, reject: str | None = None) -> Path:
    """A stand-in python for the parser check: an older vLLM that does not know the detailed
    flag (and optionally refuses `reject` with argparse's words)."""
    script = tmp_path / "python"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        "(args,) = json.load(sys.stdin)\n"
        f"marker = {RESULT_MARKER!r}\n"
        "def say(v, m=''):\n"
        "    print(marker + json.dumps({'index': 0, 'verdict': v, 'message': m}))\n"
        f"reject = {reject!r}\n"
        "if reject and reject in args:\n"
        "    say('invalid', 'unrecognized arguments: ' + reject)\n"
        "elif '--per-request-spec-decode-metrics' in args:\n"
        "    say('invalid', 'unrecognized arguments: --per-request-spec-decode-metrics detailed')\n"
        "else:\n"
        "    say('valid')\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_an_older_build_is_started_without_the_detailed_flag(tmp_path):
    check = check_arguments(["m"], old_parser_python(tmp_path), want_detailed=True)
    assert check.result.ok
    assert not check.detailed_metrics


def test_a_rejected_extra_argument_stops_before_launch_with_vllms_words(fake_vllm, tmp_path):
    python = old_parser_python(tmp_path, reject="--bogus")
    # The fake vllm's `#!` line names this python; point it at the stand-in parser instead.
    fake_vllm.write_text(f"#!{python}\n")
    args = parse("--vllm", str(fake_vllm), "--model", "m", "--method", "ngram", "--", "--bogus")
    with pytest.raises(HostSpecError, match="vLLM's parser refused the arguments: unrecognized "
                       "arguments: --bogus"):  # fmt: skip
        plan_host(args, say=lambda _m: None)


def test_start_host_returns_a_ready_server_with_what_a_recording_needs(fake_vllm, monkeypatch):
    monkeypatch.setenv("FAKE_VLLM_MODE", "ok")
    args = parse(
        "--vllm", str(fake_vllm), "--model", "tiny", "--method", "ngram", "--port", "0",
        "--skip-arg-check",
    )  # fmt: skip
    progress: list[StartupPhase] = []
    lines: list[str] = []
    server = start_host(
        args,
        on_progress=lambda p: progress.append(p.phase),
        on_line=lines.append,
        say=lambda _m: None,
    )
    try:
        assert progress[-1] is StartupPhase.READY
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.log_path.exists()
        info = server.session_info
        assert info is not None
        assert info.method == "ngram" and info.n_spec == 4 and info.vllm_version == "0.0.1-fake"
        assert info.extra["host"]["argv"][1] == "serve"
        # The log's reader thread hands lines on as they come: /health may answer before the
        # server's own "startup complete" line has been read.
        wait_for(
            lambda: any("Application startup complete" in line for line in lines),
            "the server's startup line on the line sink",
        )
    finally:
        assert server.stop().survivors == ()


def test_flags_override_a_preset_method_and_k(fake_vllm):
    from specmon.runtime.host_plan import resolve_settings

    args = parse("--preset", "rtx5090-gemma4-26b-dflash", "--method", "ngram", "--n-spec", "3")
    settings, preset = resolve_settings(args)
    assert preset is not None and settings.preset == preset.name
    assert settings.method == "ngram" and settings.draft is None and settings.n_spec == 3
    assert settings.model == preset.model
    other = resolve_settings(parse("--preset", "rtx5090-gemma4-26b-dflash", "--draft", "my/d"))[0]
    assert other.draft == "my/d" and other.method is None and other.n_spec == 13


def test_a_parser_with_its_own_model_flag_shares_it():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default=None)  # as `specmon chat` has
    add_host_arguments(parser, model=False)
    args = parser.parse_args(["--model", "m", "--draft", "d", "--", "--max-model-len", "64"])
    from specmon.runtime.host_plan import resolve_settings

    settings, _ = resolve_settings(args)
    assert (settings.model, settings.draft, settings.method) == ("m", "d", None)
    assert settings.vllm_args == ("--max-model-len", "64")
