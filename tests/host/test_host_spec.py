"""sources.host.spec: speculative config, method rules, command line, masking."""

from __future__ import annotations

import json

import pytest

from specmon.core.redaction import REDACTED
from specmon.sources.host.spec import (
    HostSettings,
    HostSpecError,
    build_command,
    describe_command,
    merge_args,
    parse_per_batch,
    speculative_config,
)


def spec_of(argv: tuple[str, ...]) -> dict:
    return json.loads(argv[argv.index("--speculative-config") + 1])


def test_a_draft_alone_means_dflash_with_the_default_k():
    config = speculative_config(HostSettings(model="m", draft="z-lab/d"))
    assert config == {"method": "dflash", "model": "z-lab/d", "num_speculative_tokens": 8}


def test_ngram_gets_its_prompt_lookup_settings_and_no_model():
    config = speculative_config(HostSettings(model="m", method="ngram", n_spec=4))
    assert config == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    }


def test_no_draft_and_no_method_is_a_plain_server():
    command = build_command(HostSettings(model="m"), "vllm", detailed_metrics=True)
    assert "--speculative-config" not in command.argv
    assert "--per-request-spec-decode-metrics" not in command.argv  # nothing to measure
    assert command.spec.method is None


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (HostSettings(model="m", draft="d", method="ngram"), "take --draft: dflash, eagle3"),
        (HostSettings(model="m", draft="d", method="mtp"), "take --draft: dflash, eagle3"),
        (HostSettings(model="m", method="dflash"), "needs --draft MODEL"),
        (HostSettings(model="m", method="eagle3"), "needs --draft MODEL"),
        (HostSettings(model="m", draft="d", n_spec=16), "valid 1..15"),
        (HostSettings(model="m", draft="d", n_spec=0), "valid 1..15"),
        (HostSettings(model="m", method="ngram", n_spec=33), "valid 1..32"),
        (HostSettings(model="m", n_spec=4), "needs a speculation method"),
        (HostSettings(model="m", method="medusa"), "valid: dflash, eagle3, mtp, ngram"),
    ],
)
def test_bad_combinations_are_one_line_errors_naming_valid_values(settings, words):
    with pytest.raises(HostSpecError) as info:
        speculative_config(settings)
    message = str(info.value)
    assert words in message
    assert "\n" not in message


def test_dynamic_speculation_passes_through():
    per_batch = parse_per_batch("1-4:8,5-64:4")
    assert per_batch == ((1, 4, 8), (5, 64, 4))
    assert parse_per_batch("[[1, 4, 8], [5, 64, 4]]") == per_batch
    config = speculative_config(
        HostSettings(model="m", draft="d", n_spec=8, n_spec_per_batch=per_batch)
    )
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 4, 8], [5, 64, 4]]
    with pytest.raises(HostSpecError, match=r"valid 1\.\.15"):
        speculative_config(HostSettings(model="m", draft="d", n_spec_per_batch=((1, 2, 20),)))
    for bad in ("", "1-4", "x", "4-1:8", "[[1,2]]"):
        with pytest.raises(HostSpecError):
            parse_per_batch(bad)


def test_dynamic_speculation_follows_vllms_reader_rules():
    """What vLLM's reader refuses is refused before a server starts, and what it would silently
    change (every k clamped to num_speculative_tokens) is either avoided or said."""
    for bad, reason in (
        ("2-4:8,5-64:4", "start at batch size 1"),
        ("1-8:8,5-64:4", "overlap"),
    ):
        with pytest.raises(HostSpecError, match=reason):
            parse_per_batch(bad)
    per_batch = parse_per_batch("5-64:4,1-4:8")  # any order: sorted as vLLM sorts it
    assert per_batch == ((1, 4, 8), (5, 64, 4))
    config = speculative_config(HostSettings(model="m", draft="d", n_spec_per_batch=per_batch))
    assert config["num_speculative_tokens"] == 8  # the schedule's largest k, not the default
    with pytest.raises(HostSpecError, match="more than --n-spec 4"):
        speculative_config(HostSettings(model="m", draft="d", n_spec=4, n_spec_per_batch=per_batch))
    vanilla_at_large_batches = parse_per_batch("1-8:6,9-256:0")
    config = speculative_config(
        HostSettings(model="m", draft="d", n_spec_per_batch=vanilla_at_large_batches)
    )
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 8, 6], [9, 256, 0]]


def test_extra_arguments_override_the_same_option_in_any_spelling():
    base = ["--max-model-len", "2048", "--kv-cache-dtype", "fp8", "--enable-prefix-caching"]
    merged = merge_args(base, ["--max_model_len=4096", "--no-enable-prefix-caching"])
    assert merged == [
        "--kv-cache-dtype",
        "fp8",
        "--max_model_len=4096",
        "--no-enable-prefix-caching",
    ]


def test_the_command_binds_loopback_by_default_and_adds_detailed_metrics_when_known():
    settings = HostSettings(model="m", draft="d", n_spec=5, vllm_args=("--max-model-len", "1024"))
    command = build_command(settings, "/opt/vllm", detailed_metrics=True)
    argv = command.argv
    assert argv[:5] == ("/opt/vllm", "serve", "m", "--host", "127.0.0.1")
    assert argv[argv.index("--port") + 1] == "8000"
    assert spec_of(argv)["num_speculative_tokens"] == 5
    assert argv[-3:] == (
        "--per-request-spec-decode-metrics",
        "detailed",
        "--enable-per-request-metrics",
    )
    assert command.env_changes["NO_COLOR"] == "1"
    assert command.base_url == "http://127.0.0.1:8000"
    plain = build_command(settings, "/opt/vllm", detailed_metrics=False)
    assert "--per-request-spec-decode-metrics" not in plain.argv
    assert "--enable-per-request-metrics" not in plain.argv
    wide = build_command(HostSettings(model="m", host="0.0.0.0", port=9000), "vllm")
    assert wide.argv[wide.argv.index("--host") + 1] == "0.0.0.0"
    assert wide.base_url == "http://127.0.0.1:9000"  # reached through loopback


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (("--port", "9"), "give --port to specmon"),
        (("--host=0.0.0.0",), "give --host to specmon"),
        (("--speculative-config", "{}"), "conflicts with --draft"),
    ],
)
def test_extra_arguments_that_specmon_owns_are_refused(extra, words):
    with pytest.raises(HostSpecError, match=words):
        build_command(HostSettings(model="m", draft="d", vllm_args=extra), "vllm")


def test_a_speculative_config_after_the_separator_is_used_when_no_flag_sets_one():
    raw = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":2}'
    command = build_command(HostSettings(model="m", vllm_args=("--speculative-config", raw)), "v")
    assert command.spec.method == "ngram"
    assert command.spec.n_spec == 3


def test_the_dry_run_text_masks_every_secret():
    settings = HostSettings(
        model="m",
        draft="d",
        vllm_args=("--api-key", "sk-topsecret-1234", "--hf-token=hf_abcdefghij"),
        env={"MY_TOKEN": "tok-999999", "VLLM_USE_FLASHINFER_SAMPLER": "0"},
    )
    command = build_command(settings, "vllm")
    text = describe_command(command, {"HF_TOKEN": "hf_inheritedsecret"})
    for secret in ("sk-topsecret-1234", "hf_abcdefghij", "tok-999999", "hf_inheritedsecret"):
        assert secret not in text
    assert f"--api-key {REDACTED!r}".replace("'", "'") in text.replace('"', "'")
    assert f"MY_TOKEN={REDACTED!r}".replace('"', "'") in text.replace('"', "'")
    assert "VLLM_USE_FLASHINFER_SAMPLER=0" in text
    assert f"# inherited: HF_TOKEN={REDACTED}" in text
    assert "NO_COLOR=1" in text


@pytest.mark.parametrize(
    ("extra", "count"),
    [(("--disable-log-stats",), 0), (("--enable-per-request-metrics",), 1)],
    ids=["stats-off", "already-given"],
)
def test_the_timing_metrics_flag_is_left_out_when_stats_are_off_or_already_given(extra, count):
    # vLLM rejects --enable-per-request-metrics together with --disable-log-stats
    settings = HostSettings(model="m", draft="d", n_spec=5, vllm_args=extra)
    argv = build_command(settings, "vllm", detailed_metrics=True).argv
    assert argv.count("--enable-per-request-metrics") == count
    assert "--per-request-spec-decode-metrics" in argv
