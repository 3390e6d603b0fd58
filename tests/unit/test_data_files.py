"""specmon's XDG data files (sources/data_files.py): where they live, and atomic replacement."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from specmon.sources.data_files import data_path, new_file_mode, write_atomic


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


def test_a_planted_temporary_or_link_is_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("the user's own\n")
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "store.json.tmp").symlink_to(victim)  # the old fixed temporary name
    (folder / "linked.json").symlink_to(victim)
    write_atomic(folder / "store.json", "new\n")
    # A link at the target is replaced (never followed); with refuse_link it is refused.
    write_atomic(folder / "linked.json", "replaced\n")
    assert victim.read_text() == "the user's own\n"
    assert not (folder / "linked.json").is_symlink()
    (folder / "linked.json").unlink()
    (folder / "linked.json").symlink_to(victim)
    with pytest.raises(OSError, match="symbolic link"):
        write_atomic(folder / "linked.json", "refused\n", refuse_link=True)
    assert victim.read_text() == "the user's own\n" and (folder / "linked.json").is_symlink()
    assert (folder / "store.json").read_text() == "new\n"


def test_the_mode_is_the_owners_unless_given(tmp_path: Path) -> None:
    write_atomic(tmp_path / "private.json", "x")
    write_atomic(tmp_path / "shared.json", "x", mode=0o644)
    assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "shared.json").stat().st_mode & 0o777 == 0o644
    old = os.umask(0o027)
    try:
        assert new_file_mode() == 0o640
    finally:
        os.umask(old)
