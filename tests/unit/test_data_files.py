"""specmon's XDG data files (sources/data_files.py): where they live, and atomic replacement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specmon.sources.data_files import data_path, write_atomic


def test_the_data_path_follows_xdg_and_ignores_a_relative_value(tmp_path: Path) -> None:
    assert data_path("x.json", {"XDG_DATA_HOME": str(tmp_path)}) == tmp_path / "specmon/x.json"
    home = Path.home() / ".local/share/specmon/x.json"
    assert data_path("x.json", {"XDG_DATA_HOME": "relative/dir"}) == home
    assert data_path("x.json", {}) == home


def test_write_atomic_replaces_the_whole_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "store.json"
    write_atomic(path, "first\n")
    write_atomic(path, "second\n")
    assert path.read_text() == "second\n"
    assert os.listdir(path.parent) == ["store.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "store.json"
    write_atomic(path, "kept\n")
    with pytest.raises(UnicodeEncodeError):
        write_atomic(path, "\ud800")  # a lone surrogate cannot be encoded: the write fails
    assert path.read_text() == "kept\n"
    assert os.listdir(tmp_path) == ["store.json"]
