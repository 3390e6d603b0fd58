"""KeptLog: the newest lines of an in-process server's log (the demo's simulator) for the app's
log pane, read as a hosted vLLM's log is (`lines_after(seen)`)."""

from __future__ import annotations

import threading

from specmon.sources.log_lines import KeptLog


def test_lines_after_gives_only_the_new_lines_and_the_count_so_far():
    log = KeptLog("in memory")
    assert log.lines_after(0) == (0, [])
    log.push("one")
    log("two")  # the sink form
    assert log.lines_after(0) == (2, ["one", "two"])
    assert log.lines_after(1) == (2, ["two"])
    assert log.lines_after(2) == (2, [])
    assert log.log_path == "in memory"


def test_only_the_newest_lines_are_kept_and_a_slow_reader_gets_those():
    log = KeptLog("in memory", max_lines=3)
    for i in range(10):
        log.push(f"line {i}")
    assert log.lines_after(0) == (10, ["line 7", "line 8", "line 9"])
    assert log.lines_after(8) == (10, ["line 8", "line 9"])


def test_lines_pushed_from_another_thread_are_all_counted():
    log = KeptLog("in memory", max_lines=50)
    threads = [
        threading.Thread(target=lambda n=n: [log.push(f"{n}-{i}") for i in range(200)])
        for n in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total, lines = log.lines_after(0)
    assert total == 800 and len(lines) == 50
