"""sources.host.presets and `specmon presets`: the seeds' configurations and the user's own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from tests.support.host_mode import settings_of

from specmon.cli.main import main
from specmon.sources.host.presets import (
    BUILTIN_PRESETS,
    MAX_CONFIG_BYTES,
    PresetError,
    all_presets,
    config_path,
    find_preset,
    load_user_presets,
)
from specmon.sources.host.spec import build_command


def test_the_four_seed_presets_with_their_seed_and_build():
    by_name = {p.name: p for p in BUILTIN_PRESETS}
    assert set(by_name) == {
        "rtx5090-gemma4-26b-dflash",
        "rtx5090-laptop-gemma4-26b-dflash",
        "h100-gemma4-26b-dflash",
        "dgx-spark-gemma4-31b-dflash",
    }
    assert [by_name[n].n_spec for n in sorted(by_name)] == [8, 15, 13, 8]
    for preset in BUILTIN_PRESETS:
        assert "seed" in preset.seed and preset.proven_on, preset.name
        command = build_command(settings_of(preset), "vllm")
        spec = json.loads(command.argv[command.argv.index("--speculative-config") + 1])
        assert spec["method"] == "dflash" and spec["num_speculative_tokens"] == preset.n_spec
    desktop = build_command(settings_of(by_name["rtx5090-gemma4-26b-dflash"]), "vllm")
    assert desktop.env_changes["VLLM_USE_FLASHINFER_SAMPLER"] == "0"
    assert "0.93" in desktop.argv and "8192" in desktop.argv
    spark = by_name["dgx-spark-gemma4-31b-dflash"]
    assert "--enforce-eager" in spark.vllm_args
    assert "patches" in spark.note


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_user_presets_load_inherit_and_replace(tmp_path: Path):
    path = write_config(
        tmp_path,
        """
[presets.mine]
based_on = "rtx5090-gemma4-26b-dflash"
n_spec = 10
env = { EXTRA = "1" }

[presets.fresh]
model = "Qwen/Qwen3-8B"
method = "ngram"
n_spec = 5
vllm_args = ["--max-model-len", "4096"]
proven_on = "vLLM 0.32.0"
""",
    )
    mine, fresh = load_user_presets(path)
    assert mine.n_spec == 10
    assert mine.draft == "z-lab/gemma-4-26B-A4B-it-DFlash"
    assert mine.env == {"VLLM_USE_FLASHINFER_SAMPLER": "0", "EXTRA": "1"}
    assert mine.source == str(path)
    assert "based on rtx5090-gemma4-26b-dflash" in mine.seed
    assert fresh.vllm_args == ("--max-model-len", "4096")
    presets = all_presets(path)
    assert {"mine", "fresh", "h100-gemma4-26b-dflash"} <= set(presets)


def test_a_toml_error_names_the_file_and_line(tmp_path: Path):
    path = write_config(tmp_path, '[presets.a]\nmodel = "m"\nn_spec = = 3\n')
    with pytest.raises(PresetError) as info:
        load_user_presets(path)
    assert str(info.value).startswith(f"{path}:3: TOML error")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('[presets.a]\nmodel = "m"\nk = 3\n', "unknown key 'k'; valid keys:"),
        ('[presets.a]\nmodel = "m"\nn_spec = "3"\n', "presets.a.n_spec: wrong type str"),
        ('[presets.a]\nbased_on = "nope"\n', "no preset 'nope'"),
        ("[presets.a]\nn_spec = 3\n", "needs model"),
        ('[presets.a]\nmodel = "m"\nvllm_args = [1]\n', "list of strings"),
    ],
)
def test_bad_presets_say_where_and_what(tmp_path: Path, text: str, words: str):
    with pytest.raises(PresetError, match=words.replace("(", r"\(")):
        load_user_presets(write_config(tmp_path, text))


def test_an_unknown_preset_lists_the_known_ones():
    with pytest.raises(PresetError) as info:
        find_preset("rtx9090", all_presets())
    message = str(info.value)
    for preset in BUILTIN_PRESETS:
        assert preset.name in message


def test_the_config_file_lives_in_the_xdg_config_dir(tmp_path: Path):
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "specmon" / "config.toml"
    assert config_path({"SPECMON_CONFIG": "/x/y.toml"}) == Path("/x/y.toml")


def test_specmon_presets_lists_builtin_and_user_presets(tmp_path, monkeypatch, capsys):
    path = write_config(
        tmp_path, '[presets.mine]\nmodel = "m"\nenv = { HF_TOKEN = "hf_abcdefgh" }\n'
    )
    monkeypatch.setenv("SPECMON_CONFIG", str(path))
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "dgx-spark-gemma4-31b-dflash" in out and "proven on:" in out
    # what "seed:" means, once, with where to read about the seeds
    assert out.count("The published runs ('the seeds')") == 1
    assert "mine" in out
    assert "hf_abcdefgh" not in out
    assert main(["presets", "nope"]) == 2
    assert "known presets:" in capsys.readouterr().err
    path.write_text("[presets\n")
    assert main(["presets"]) == 2
    assert f"{path}:1: TOML error" in capsys.readouterr().err


@pytest.mark.timeout(30)
def test_a_device_a_fifo_or_a_huge_config_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# padding\n" * (MAX_CONFIG_BYTES // 10 + 1))
    for path, words in (
        (fifo, "not a regular file"),
        (Path("/dev/zero"), "not a regular file"),
        (huge, "larger than 1 MiB"),
        (tmp_path, "a directory"),
    ):
        monkeypatch.setenv("SPECMON_CONFIG", str(path))
        assert main(["presets"]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        (line,) = captured.err.strip().splitlines()
        assert line.startswith(f"specmon presets: {path}: ") and words in line
