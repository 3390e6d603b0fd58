"""Suite-wide settings."""

from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest
from hypothesis import settings

# Real `vllm serve` fixtures (vllm_draft_same, vllm_ngram, ...) for every test folder.
pytest_plugins = ["tests.real_vllm.fixtures"]

# pytest keeps each test module, its asserts rewritten, as a .pyc in the module's __pycache__
# (git-ignored), unless bytecode writing is off: where PYTHONDONTWRITEBYTECODE is set (the project's
# machine image sets it), every run, in each pytest-xdist worker, parsed and rewrote all ~340 test
# modules again, about 7 s of CPU per process before the first test. The suite writes them anyway;
# the programs the tests start inherit the environment unchanged.
sys.dont_write_bytecode = False

# Shared, noisy machines: no per-example deadline (timing is never what a property tests). CI runs
# derandomized, so a run is repeatable; local runs explore new examples each time.
settings.register_profile("ci", deadline=None, print_blob=True, derandomize=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist's workers run with COLUMNS=80 and LINES=24 in their environment; every program a
    # test starts would inherit them (Textual sizes itself from them, tmux panes included), so a
    # worker's tests would see another terminal than a serial run's.
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


@pytest.fixture(autouse=True)
def _isolated_user_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> None:
    """No test reads or writes the user's own specmon data or config (stored baselines, ...).
    XDG_CACHE_HOME is left alone: the real-vLLM environment is cached there on purpose."""
    root = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_DATA_HOME", str(root / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / "config"))


# Tiers (docs/testing.md). A test gets its tier markers from what it needs, so a new test in the
# right place is in the right tier without anyone remembering to mark it:
TIER_FIXTURES: dict[str, tuple[str, ...]] = {
    "chromium": ("browser", "process", "slow"),
    "prometheus_bin": ("prometheus", "process", "slow"),
    "snap_compare": ("slow",),  # an SVG snapshot runs the whole app and renders it (~3 s)
}
"""Fixture -> markers (and every real-vLLM fixture -> `real_vllm`, below)."""

TIER_FOLDERS: dict[str, tuple[str, ...]] = {
    "e2e": ("process", "slow"),
    "host": ("process", "slow"),
    "web": ("process", "slow"),
}
"""Folder under tests/ -> markers: every test there spawns specmon, a server or a browser (and
waits for it: none belongs in the inner loop)."""

IMPLIED: dict[str, tuple[str, ...]] = {
    "real_vllm": ("process", "slow"),
    "terminal": ("process", "slow"),
}
"""A marker that brings others: a real server or a terminal is never the inner loop."""

TESTS_DIR = Path(__file__).parent
TERMINAL_TOOLS = shutil.which("tmux") is not None and shutil.which("specmon") is not None
XDIST_GROUP_REAL = "real_vllm"


def _tier_markers(item: pytest.Item) -> set[str]:
    names = {mark.name for mark in item.iter_markers()}
    from tests.real_vllm.fixtures import REAL_FIXTURES  # a plugin: pytest imports it first

    fixtures = set(getattr(item, "fixturenames", ()))
    if fixtures & REAL_FIXTURES:
        names.add("real_vllm")
    for fixture, markers in TIER_FIXTURES.items():
        if fixture in fixtures:
            names.update(markers)
    parts = item.path.relative_to(TESTS_DIR).parts if item.path.is_relative_to(TESTS_DIR) else ()
    if parts:
        names.update(TIER_FOLDERS.get(parts[0], ()))
    for name in list(names):
        names.update(IMPLIED.get(name, ()))
    return names


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for name in sorted(_tier_markers(item) - {mark.name for mark in item.iter_markers()}):
            item.add_marker(name)
        present = {mark.name for mark in item.iter_markers()}
        if "terminal" in present and not os.environ.get("CI") and not TERMINAL_TOOLS:
            # Skipped where tmux or the command is missing, except in CI: there the test fails.
            item.add_marker(pytest.mark.skip(reason="needs tmux and the installed specmon command"))
        if "real_vllm" in present:
            # One worker runs the whole real tier, in collection order, so the server pool plans
            # its servers' lifetimes as in a serial run (and at most its cap run at once).
            item.add_marker(pytest.mark.xdist_group(XDIST_GROUP_REAL))


def pytest_configure(config: pytest.Config) -> None:
    """A suite started under `nohup` inherits SIGHUP ignored, and so would every specmon it
    starts, which keeps an ignored SIGHUP ignored as nohup asks: the tests of what SIGHUP does
    would then see nothing happen. They test a command started the usual way, so the suite
    gives its processes SIGHUP's default action (each xdist worker imports this file too)."""
    if hasattr(signal, "SIGHUP") and signal.getsignal(signal.SIGHUP) == signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (addopts): one worker per core this process may run on, plus one. A good part of
    the suite waits rather than computes (on vLLM servers starting, terminals redrawing, processes
    stopping, a slow server's timeouts): with one worker per core the cores sat idle for much of
    the run (docs/testing.md, "Workers", for the figures). PYTEST_XDIST_AUTO_NUM_WORKERS still
    decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own hook reads it
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) + 1
