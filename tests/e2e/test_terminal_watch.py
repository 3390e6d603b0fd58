"""`specmon watch` on two simulators in a real terminal: tmux runs the INSTALLED `specmon` command
attached to two `specmon sim` processes while a load thread keeps both busy; one simulator is
stopped and started again on the same port mid-test. Read from the captured screen as a person
would: the stopped server's row says down with its last error while the other's numbers keep
changing, then it comes back up (its counters reset: "restarted") with numbers again; q quits
with status 0 and leaves nothing running. In CI a missing tmux or specmon command is a failure,
not a skip.
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.support.terminal import MISSING, SPECMON, Terminal, needs_terminal

pytestmark = needs_terminal

ROW = re.compile(r"(?P<state>up|restarted|stale|down|unreadable|connecting)\s+(?P<tok_s>\S+)")


class Sim:
    """One `specmon sim` process (the installed command) on a loopback port."""

    def __init__(self, port: int = 0) -> None:
        assert SPECMON is not None, MISSING
        self.proc = subprocess.Popen(
            [SPECMON, "sim", "--port", str(port), "--speed", "20", "--log-interval", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        self.url = next(word for word in line.split() if word.startswith("http://"))
        self.port = int(self.url.rsplit(":", 1)[1])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


class Load:
    """Keeps both servers busy (one short request at a time each) until stopped; requests to a
    server that is down fail quietly and are tried again."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(u,), daemon=True) for u in urls]
        for t in self.threads:
            t.start()

    def _run(self, url: str) -> None:
        body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 40}
        while not self.done.is_set():
            try:
                httpx.post(url + "/v1/chat/completions", json=body, timeout=10)
            except httpx.HTTPError:
                self.done.wait(0.2)

    def stop(self) -> None:
        self.done.set()
        for t in self.threads:
            t.join(15)


@pytest.fixture
def sims() -> Iterator[list[Sim]]:
    started = [Sim(), Sim()]
    try:
        yield started
    finally:
        for sim in started:
            sim.stop()


def _row(screen: str, url: str) -> tuple[str, str] | None:
    """(state, tok/s cell) of a server's row on the screen, None when it is not shown."""
    name = url.split("://", 1)[1]
    for line in screen.splitlines():
        if name in line:
            m = ROW.search(line.split(name, 1)[1])
            if m:
                return m.group("state"), m.group("tok_s")
    return None


def _is_number(cell: str) -> bool:
    return re.fullmatch(r"\d+\.\d", cell) is not None


def test_watch_two_servers_one_restarted_the_other_keeps_moving(sims, tmp_path: Path) -> None:
    a, b = sims
    load = Load([a.url, b.url])
    term = Terminal(
        f"{SPECMON} watch --attach {a.url} --attach {b.url} --interval 0.5 --gpu none",
        tmp_path / "exit-code",
    )
    try:
        for sim in (a, b):
            term.wait_for(
                lambda s=sim: (
                    (r := _row(term.screen(), s.url)) is not None
                    and r[0] == "up"
                    and _is_number(r[1])
                ),
                f"{sim.url} up with a tok/s",
            )
        b.stop()
        term.wait_for(
            lambda: (r := _row(term.screen(), b.url)) is not None and r[0] == "down",
            "the stopped server shown down",
        )
        screen = term.screen()
        assert "last error:" in screen
        assert _row(screen, b.url) == ("down", "—")
        # The other server's numbers keep changing while B is down.
        seen = {_row(term.screen(), a.url)}
        term.wait_for(
            lambda: seen.add(_row(term.screen(), a.url)) or len(seen) >= 3,
            "the other server's tok/s to keep changing",
        )
        assert all(r is not None and r[0] == "up" and _is_number(r[1]) for r in seen)
        assert _row(term.screen(), b.url)[0] == "down"
        # B comes back on the same port, its counters from 0: shown restarted, then numbers.
        sims[1] = b2 = Sim(b.port)
        assert b2.url == b.url
        term.wait_for(
            lambda: (
                (r := _row(term.screen(), b.url)) is not None
                and r[0] in ("restarted", "up")
                and _is_number(r[1])
            ),
            "the restarted server up again with a tok/s",
        )
        assert "Traceback" not in term.screen()
        term.key("q")
        term.wait_for(term.exit_file.exists, "watch to exit after q")
        assert term.exit_file.read_text().strip() == "0"
        pane = term.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip()
        left = subprocess.run(
            ["pgrep", "-f", "-P", pane, "specmon watch"], capture_output=True, text=True
        ).stdout.split()
        assert left == []
    finally:
        load.stop()
        term.close()


def test_watch_adds_and_removes_a_server_from_inside_the_app(sims, tmp_path: Path) -> None:
    a, b = sims
    term = Terminal(
        f"{SPECMON} watch --attach {a.url} --interval 0.5 --gpu none", tmp_path / "exit-code"
    )
    b_name = b.url.split("://", 1)[1]
    try:
        term.wait_for(lambda: _row(term.screen(), a.url) is not None, "the first server's row")
        term.key("a")
        term.wait_for(lambda: "Watch one more server" in term.screen(), "the add dialog")
        term.type("ftp://nowhere")
        term.key("Enter")
        term.wait_for(lambda: "must be http or https" in term.screen(), "the refusal")
        term.key("C-u")  # clear the field
        term.type(b.url)
        term.key("Enter")
        term.wait_for(
            lambda: (r := _row(term.screen(), b.url)) is not None and r[0] == "up",
            "the added server's row, up",
        )
        term.key("Down")
        term.wait_for(lambda: f"▶ {b_name}" in term.screen(), "the added server selected")
        term.key("x")
        term.wait_for(lambda: _row(term.screen(), b.url) is None, "the removed server gone")
        term.key("x")
        term.wait_for(lambda: "no server: press a to add one" in term.screen(), "the empty table")
        assert "Traceback" not in term.screen()
        term.key("q")
        term.wait_for(term.exit_file.exists, "watch to exit after q")
        assert term.exit_file.read_text().strip() == "0"
    finally:
        term.close()
