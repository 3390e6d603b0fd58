"""The user's defaults in config.toml (cli.user_config): each key checked, a flag beats the file,
the file beats the built-in default, a bad file is one line naming the file and the key."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specmon.cli.main import build_parser
from specmon.cli.user_config import (
    ConfigError,
    UserConfig,
    apply_user_config,
    effective_settings,
    load_user_config,
)


def _config(tmp_path: Path, text: str) -> UserConfig:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_user_config(path)


FULL = """
[watch]
attach = ["http://gpu-box:8000", "other:8001"]
interval = 2.5
canary = 600

[chat]
attach = "http://chat-box:8000"

[app]
theme = "specmon-light"

[baseline]
tok_s = 41.5

[presets.mine]
model = "m"
"""


def _parsed(argv: list[str], config: UserConfig) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    apply_user_config(args, config)
    return args


def test_the_file_beats_the_default(tmp_path: Path) -> None:
    config = _config(tmp_path, FULL)
    args = _parsed(["watch"], config)
    assert args.attach == ["http://gpu-box:8000", "other:8001"]
    assert args.interval == 2.5
    assert args.canary == 600.0
    assert args.baseline == 41.5
    assert args.theme == "specmon-light"
    chat = _parsed(["chat"], config)
    assert chat.attach == "http://chat-box:8000"
    assert chat.theme == "specmon-light"
    assert _parsed(["replay", "x.ndjson"], config).theme == "specmon-light"


def test_a_flag_beats_the_file(tmp_path: Path) -> None:
    config = _config(tmp_path, FULL)
    argv = ["watch", "--attach", "http://mine:1", "--interval", "0.5", "--canary", "60"]
    args = _parsed([*argv, "--baseline", "9", "--theme", "specmon-dark"], config)
    assert args.attach == ["http://mine:1"]
    assert args.interval == 0.5
    assert args.canary == 60.0
    assert args.baseline == 9.0
    assert args.theme == "specmon-dark"  # the default's own text, given: still the flag's
    assert _parsed(["chat", "--attach", "http://mine:2"], config).attach == "http://mine:2"


def test_fleet_takes_the_theme_and_baseline_as_watch_prometheus_does(tmp_path: Path) -> None:
    config = _config(tmp_path, FULL)
    for argv in (["fleet", "http://prom:9090"], ["watch", "--prometheus", "http://prom:9090"]):
        args = _parsed(argv, config)
        assert (args.theme, args.baseline) == ("specmon-light", config.baseline_tok_s), argv
        assert args.interval != config.watch_interval  # for servers; a Prometheus: 5 s
    assert _parsed(["fleet", "http://p:1", "--baseline", "9"], config).baseline == 9.0


def test_file_settings_that_do_not_fit_the_command_line_are_left_out(tmp_path: Path) -> None:
    config = _config(tmp_path, FULL)
    fleet = _parsed(["watch", "--prometheus", "http://prom:9090"], config)
    assert fleet.attach is None and fleet.interval is None and fleet.canary is None
    assert _parsed(["watch", "--once"], config).canary is None  # no canary for one snapshot
    assert _parsed(["chat", "--preset", "mine"], config).attach is None  # host mode
    assert _parsed(["chat", "--resume"], config).attach is None  # the saved server
    assert _parsed(["chat", "--model", "m"], config).attach == "http://chat-box:8000"


def test_without_a_file_nothing_changes(tmp_path: Path) -> None:
    config = load_user_config(tmp_path / "absent.toml")
    assert not config.found
    args = _parsed(["watch"], config)
    assert args.attach is None and args.interval is None and args.canary is None
    assert args.theme == "specmon-dark"
    assert {source for _, _, source in effective_settings(config)} == {"default"}


def test_effective_settings_name_their_source(tmp_path: Path) -> None:
    rows = {
        name: (value, source)
        for name, value, source in effective_settings(
            _config(tmp_path, '[watch]\ncanary = false\n[app]\ntheme = "nord"\n')
        )
    }
    assert rows["app.theme"] == ('"nord"', "file")
    assert rows["watch.canary"] == ("off", "file")
    assert rows["watch.attach"][1] == "default"
    assert rows["watch.interval"] == ("1 s", "default")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[watch]\nattch = 1\n",
            "unknown key watch.attch; [watch] takes: attach, interval, canary",
        ),
        ("[colours]\nx = 1\n", "unknown section or key 'colours'"),
        ("theme = 'x'\n", "unknown section or key 'theme'"),
        ("[watch]\ninterval = 0\n", "watch.interval: must be a number of seconds from 0.1"),
        ("[watch]\ninterval = 'fast'\n", "watch.interval: must be a number, got str"),
        ("[watch]\ncanary = 1\n", "watch.canary: must be a number of seconds from 10"),
        ("[watch]\nattach = []\n", "watch.attach: must be a URL or a non-empty list of URLs"),
        ("[watch]\nattach = ['ftp://x']\n", "watch.attach: "),
        ("[chat]\nattach = ['http://a:1']\n", "chat.attach: must be a server URL"),
        ("[baseline]\ntok_s = -3\n", "baseline.tok_s: must be a positive number of tok/s"),
        ("[baseline]\ntok_s = nan\n", "baseline.tok_s: must be a positive number of tok/s"),
        ("[app]\ntheme = ''\n", "app.theme: must be a theme name"),
        ("[app]\nx = 1\n", "unknown key app.x"),
        ("[watch]\ninterval = 1\ninterval = 2\n", ":3: TOML error"),
        ("[chat]\nattach = 'http://a:1'\n[chat]\n", "TOML error"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_file_and_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _config(tmp_path, text)
    message = str(caught.value)
    assert message.startswith(str(tmp_path / "config.toml"))
    assert expected in message
    assert "\n" not in message


def test_the_demos_canned_config_is_one_specmon_reads(tmp_path: Path) -> None:
    """The simulator's answer that shows a [watch] section shows keys specmon takes."""
    from specmon.sim.corpus import ANSWERS

    (answer,) = [a for a in ANSWERS if "[watch]" in a]
    block = answer.split("```toml\n", 1)[1].split("```", 1)[0]
    config = _config(tmp_path, block)
    assert config.watch_attach == ("http://gpu-box:8000",)
    assert set(config.set_keys) == {"watch.attach", "watch.interval", "watch.canary"}
