"""What each draft position is worth (worth_screen.py): the modal's numbers for a known
per-position vector, the trim hint sentence, and the side panel's one-line hint."""

from __future__ import annotations

import dataclasses

from tests.support.fake_views import session_view

from specmon.core.views import SessionView
from specmon.ui.screens.worth import worth_text
from specmon.ui.widgets.side_panel import hint_line, positions_section

# 13 drafted positions; the last five accept < 5% of steps. Accepted per step: 4.4 from the
# first eight, 0.105 from the last five: n_spec 8 keeps 4.4 / 4.505 = 97.67% of them.
RATES = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.04, 0.03, 0.02, 0.01, 0.005)
HINT = "positions 9-13 accept < 5%: n_spec 8 keeps 97% of the accepted tokens at lower verify cost"


def _view(window: tuple[float, ...] | None, lifetime: tuple[float, ...] | None, drafts: float):
    view = session_view()
    server = view.servers[0]
    assert server.lifetime is not None
    server = dataclasses.replace(
        server,
        n_spec=len(window or lifetime or ()),
        window=dataclasses.replace(server.window, per_position_rates=window),
        lifetime=dataclasses.replace(server.lifetime, per_position_rates=lifetime, drafts=drafts),
    )
    return dataclasses.replace(view, servers=(server,))


def _row(text: str, first: str) -> list[str]:
    return next(ln.split() for ln in text.splitlines() if ln.split()[:1] == [first])


def test_expected_tokens_and_kept_share_for_every_n_spec() -> None:
    half = tuple(r / 2 for r in RATES)  # the window: every position at half the rate
    text = worth_text(_view(half, RATES, drafts=1000.0)).plain
    lines = text.splitlines()
    table = lines[lines.index(next(ln for ln in lines if ln.strip().startswith("n_spec"))) :]
    # n_spec 0: plain decoding, 1 token per step, keeps nothing.
    assert _row("\n".join(table), "0") == ["0", "1.00", "0.0%", "1.00", "0.0%"]
    # n_spec 8: window 1 + 2.2 = 3.20 (kept 2.2 / 2.2525), since start 5.40 (4.4 / 4.505).
    assert _row("\n".join(table), "8") == ["8", "3.20", "97.7%", "5.40", "97.7%"]
    assert _row("\n".join(table), "1") == ["1", "1.45", "20.0%", "1.90", "20.0%"]
    assert _row("\n".join(table), "13")[-1] == "100.0%"
    # Per position: rate and share of the accepted tokens (position 1: 0.9 / 4.505 = 20.0%).
    per_position = text[text.index("Each position") :]
    assert _row(per_position, "1") == ["1", "45.0%", "20.0%", "90.0%", "20.0%"]
    assert _row(per_position, "13") == ["13", "0.2%", "0.1%", "0.5%", "0.1%"]
    assert HINT + " (since start)." in text


def test_no_hint_with_few_steps_since_start_but_the_windows_own() -> None:
    # Since start gates the hint on 100 steps; the window has no count and gives it.
    text = worth_text(_view(RATES, RATES, drafts=20.0)).plain
    assert HINT + " (window)." in text
    flat = (0.8,) * 8
    text = worth_text(_view(flat, flat, drafts=1000.0)).plain
    assert "No trim hint" in text and "n_spec 8 keeps" not in text


def test_without_rates_every_number_is_a_dash() -> None:
    text = worth_text(_view(None, None, drafts=0.0)).plain
    assert "No per-position acceptance" in text
    assert "No server numbers yet" in worth_text(None).plain
    empty = dataclasses.replace(session_view(), servers=())
    assert isinstance(empty, SessionView) and "No server numbers" in worth_text(empty).plain


def test_the_side_panel_hint_says_its_numbers_and_key() -> None:
    view = _view(RATES, RATES, drafts=1000.0)
    line = hint_line(view.servers[0]).plain
    # It says which numbers it used (the bars above it may be the window's) and which key opens
    # the whole sentence.
    assert line == "\nhint (since start): n_spec 8 keeps 97%\n  pos 9-13 < 5% · press w"
    assert all(len(part) <= 48 for part in line.splitlines())  # fits the panel's width
    section = positions_section(view.servers[0], 13).plain
    assert section.endswith(line)
    no_hint = _view((0.8,) * 8, (0.8,) * 8, drafts=1000.0)
    assert hint_line(no_hint.servers[0]).plain == ""
    assert hint_line(None).plain == ""


def test_no_hint_names_the_gate_that_stopped_it() -> None:
    """Positions 6-8 all accept < 5%, but dropping them would keep only 86% of the accepted
    tokens (the hint needs 90%): F8 says so, not that every position pulls its weight."""
    rates = (0.3, 0.2, 0.1, 0.08, 0.06, 0.04, 0.04, 0.04)
    text = worth_text(_view(rates, rates, drafts=1000.0)).plain
    assert "pulls its weight" not in text
    assert "since start: positions 6-8 each accept < 5%, but n_spec 5 would keep only 86%" in text
    assert "needs 90%" in text
    flat = (0.8,) * 8
    text = worth_text(_view(flat, flat, drafts=1000.0)).plain
    assert "every position pulls its weight (the last, position 8, accepts ≥ 5%)" in text
