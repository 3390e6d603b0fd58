"""Fixtures for the `specmon web` tests: a headless Chromium (installed with apt-get when missing,
under the machine-wide apt lock; with CI set, a Chromium that cannot be had fails the test)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from tests.web.browser import chromium_path

APT_LOCK = "/tmp/specmon-apt.lock"
"""The lock every test fixture that installs a Debian package holds (one apt-get at a time)."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def install_chromium() -> tuple[str | None, str]:
    """`apt-get install -y chromium` under the apt lock: (path or None, what happened)."""
    apt = shutil.which("apt-get")
    flock = shutil.which("flock")
    if apt is None or flock is None:
        return None, "chromium is not installed and there is no apt-get (or flock) to install it"
    command = f"{apt} install -y chromium"
    if os.geteuid() != 0:
        sudo = shutil.which("sudo")
        if sudo is None:
            return None, "chromium is not installed and apt-get needs root"
        command = f"{sudo} -n {command}"
    done = subprocess.run(
        [flock, APT_LOCK, "-c", command],
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    found = chromium_path()
    if found is None:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        return None, f"apt-get install chromium failed ({done.returncode}):\n{tail}"
    return found, "installed"


@pytest.fixture(scope="session")
def chromium() -> str:
    """The Chromium executable."""
    found = chromium_path()
    if found is not None:
        return found
    found, what = install_chromium()
    if found is not None:
        return found
    if in_ci():
        pytest.fail(f"the browser test needs Chromium: {what}", pytrace=False)
    pytest.skip(f"needs Chromium: {what}")
