"""cli/args.py: the argument types and `fail`; the host-mode flags declared once (host_args)."""

from __future__ import annotations

import argparse
import math
from dataclasses import fields

import pytest

from specmon.cli import args as cli_args
from specmon.cli.host_args import add_host_arguments
from specmon.cli.main import build_parser, main
from specmon.runtime.host_plan import HOST_FIELDS, HOST_ONLY, HostFlags


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        (cli_args.positive_float, "2.5", 2.5),
        (cli_args.pace, "inf", math.inf),
        (cli_args.pace, "0.5", 0.5),
        (cli_args.positive_seconds, "30", 30.0),
        (cli_args.positive_int, "7", 7),
        (cli_args.port, "0", 0),
        (cli_args.port, "65535", 65535),
        (cli_args.key_value, "A=b=c", ("A", "b=c")),
        (cli_args.byte_count, "4MiB", 4 << 20),
        (cli_args.byte_count, "512k", 512 << 10),
        (cli_args.temperature, "0", 0.0),
        (cli_args.temperature, "100", 100.0),
        (cli_args.top_p, "1", 1.0),
        (cli_args.http_url, " http://p:9090 ", "http://p:9090"),
        (cli_args.server_url, "gpu-box:8000", "gpu-box:8000"),
        (cli_args.gpu_source, "none", "none"),
        (cli_args.gpu_source, "http://dcgm:9400/metrics", "http://dcgm:9400/metrics"),
        (cli_args.scrape_interval, "0.1", 0.1),
        (cli_args.seconds_within(0, 60), "60", 60.0),
    ],
)
def test_each_type_takes_a_good_value(kind, text, value):
    assert kind(text) == value


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        (cli_args.positive_float, "x", "not a number: 'x'"),
        (cli_args.positive_float, "inf", "must be a positive number"),
        (cli_args.positive_float, "nan", "must be a positive number"),
        (cli_args.pace, "0", "must be above 0 (inf: no pacing)"),
        (cli_args.pace, "nan", "must be above 0"),
        (cli_args.positive_seconds, "-1", "must be a positive number of seconds"),
        (cli_args.positive_seconds, "inf", "must be a positive number of seconds"),
        (cli_args.positive_int, "1.5", "not a whole number: '1.5'"),
        (cli_args.positive_int, "0", "must be at least 1"),
        (cli_args.port, "http", "not a port number"),
        (cli_args.port, "70000", "port must be 0..65535"),
        (cli_args.key_value, "=v", "expected NAME=VALUE"),
        (cli_args.byte_count, "4GiB", "expected bytes"),
        (cli_args.byte_count, "0", "at least 1 byte"),
        (cli_args.temperature, "nan", "must be from 0 to 100"),
        (cli_args.temperature, "101", "must be from 0 to 100"),
        (cli_args.top_p, "0", "above 0 and at most 1"),
        (cli_args.http_url, "p:9090", "must be an http(s) URL"),
        (cli_args.server_url, "ftp://x", "must be http or https"),
        (cli_args.server_url, "http://h:99999", "bad port"),
        (cli_args.server_url, "http://", "no host"),
        (cli_args.gpu_source, "cuda", "must be local, none or a dcgm-exporter http(s) URL"),
        (cli_args.scrape_interval, "1e308", "from 0.1 to 3600"),
        (cli_args.scrape_interval, "nan", "from 0.1 to 3600"),
        (cli_args.seconds_within(0, 60), "0", "above 0 and at most 60"),
    ],
)
def test_each_type_refuses_a_bad_value_in_one_line(kind, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        kind(text)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_fail_says_the_command_and_returns_the_status(capsys):
    assert cli_args.fail("watch", "--match goes with --prometheus") == 2
    assert cli_args.fail("bench", "every request failed", 1) == 1
    assert capsys.readouterr().err == (
        "specmon watch: --match goes with --prometheus\nspecmon bench: every request failed\n"
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["chat", "--attach", "ftp://x"], "argument --attach: server URL must be http or https"),
        (["chat", "--attach", "http://h:1", "--gpu", "cuda"], "argument --gpu: must be local"),
        (["chat", "--attach", "http://h:1", "--temperature", "nan"], "argument --temperature"),
        (["bench", "--attach", "http://h:1", "--gpu", "cuda"], "argument --gpu: must be local"),
        (["sweep", "--attach", "ftp://x"], "argument --attach: server URL must be http or https"),
        (["watch", "--attach", "http://h:1", "--rate-window", "0"], "argument --rate-window"),
        (["serve", "--model", "m", "--interval", "0"], "argument --interval: must be a number"),
        (["demo", "--requests", "0"], "argument --requests: must be at least 1"),
        (["demo", "--export", "x:y"], "argument --export: --export port must be 1..65535"),
    ],
)
def test_a_bad_value_is_refused_while_parsing_in_one_line_with_status_2(capsys, argv, said):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    first, see = err.splitlines()
    assert first.startswith(f"specmon {argv[0]}: error: ") and said in first
    assert see == f"see 'specmon {argv[0]} --help'"


@pytest.mark.parametrize(
    "argv",
    [
        ["watch", "--attach", "http://h:1", "--api-ke", "sk-abbrev-1"],
        ["chat", "--attach", "http://h:1", "--api", "sk-abbrev-1"],
        ["demo", "--spee", "2"],
        ["web", "--po", "9000", "demo"],
        ["--vers"],
    ],
)
def test_an_abbreviated_option_is_an_unknown_one(capsys, argv):
    """Options count only as written in full: `--api-ke KEY` must not be read as --api-key (a
    check for the option by its name would miss it), nor any other prefix as its option."""
    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(argv)
    assert stop.value.code == 2
    first = capsys.readouterr().err.splitlines()[0]
    assert "unrecognized arguments" in first or "invalid choice" in first, first


def test_the_demo_pace_may_be_inf_no_pacing():
    assert build_parser().parse_args(["demo", "--speed", "inf"]).speed == math.inf


def test_export_is_host_and_port_once_parsed():
    parse = build_parser().parse_args
    assert parse(["demo", "--export"]).export == ("127.0.0.1", 9464)
    assert parse(["demo", "--export", "0.0.0.0:9000"]).export == ("0.0.0.0", 9000)
    assert parse(["demo"]).export is None


# ------------------------------------------------------------------ host-mode flags


def test_every_host_mode_flag_is_a_field_of_host_flags_and_back():
    parser = argparse.ArgumentParser()
    add_host_arguments(parser)
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    assert dests == {f.name for f in fields(HostFlags)}


def test_host_only_and_saved_flags_are_derived_as_they_were_listed():
    # The lists that cli/chat_cmd.py and cli/bench_host.py wrote by hand before.
    assert [flag for _name, flag in HOST_ONLY] == [
        "--draft",
        "--method",
        "--n-spec",
        "--n-spec-per-batch",
        "--spec-option",
        "--preset",
        "--host",
        "--port",
        "--vllm",
        "--env",
        "--dry-run",
        "--ready-timeout",
        "--log-file",
        "--skip-arg-check",
        "-- VLLM_ARGS",
    ]
    assert set(HOST_FIELDS) == {
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
    }


def test_host_flags_of_a_command_line():
    args = build_parser().parse_args(
        ["serve", "--model", "m", "--env", "A=1", "--spec-option", "k=v", "--", "--seed", "3"]
    )
    flags = HostFlags.of(args)
    assert (flags.model, flags.env, flags.spec_option) == ("m", (("A", "1"),), (("k", "v"),))
    assert flags.vllm_args == ("--seed", "3")  # the `--` itself dropped
    assert HostFlags.of(flags) is flags
    attached = build_parser().parse_args(["chat", "--attach", "http://h:1", "--draft", "d"])
    assert HostFlags.of(attached).given() == ["--draft"]
