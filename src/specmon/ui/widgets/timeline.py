"""The replay's timeline: the recording's span with what happened where, and the play head.

Four lines, as wide as the widget:

    ticks   ▼ a vanilla-speed request (where it ended)  ◆ a marker  ↺ a counter reset
            (server restart)  · a server status change
    band    the degradation cycle's phases when one was detected (green fast, yellow
            transition, red degraded, cyan recovery), else a plain line
    head    ▲ where the play head is
    status  PLAYING/PAUSED/END, the speed, elapsed / total time, the cycle's period

A click anywhere on it asks to seek there (`Timeline.Seek`). The text is built by a pure function
(`timeline_text`), tested without an app.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from specmon.ui.styles import CONSOLE_STYLES, Styles, theme_styles

if TYPE_CHECKING:
    from specmon.core.replay_timeline import (
        PhaseKind,
        ReplayPosition,
        ReplayTimeline,
        TickKind,
    )

BAND = "━"
PLAIN = "─"
HEAD = "▲"


def clock_text(seconds: float) -> str:
    """Recorded time as m:ss.s (h:mm:ss from an hour on)."""
    seconds = max(0.0, seconds)
    if seconds >= 3600:
        h, rest = divmod(int(seconds), 3600)
        m, s = divmod(rest, 60)
        return f"{h}:{m:02d}:{s:02d}"
    minutes, secs = divmod(seconds, 60.0)
    return f"{int(minutes)}:{secs:04.1f}"


def column(t: float, start: float, end: float, width: int) -> int:
    """The column (0..width-1) of recorded time t."""
    if width <= 1 or end <= start:
        return 0
    frac = (t - start) / (end - start)
    return min(width - 1, max(0, math.floor(frac * (width - 1) + 0.5)))  # half up


def time_at(col: int, start: float, end: float, width: int) -> float:
    """The recorded time a column stands for (the inverse of `column`)."""
    if width <= 1 or end <= start:
        return start
    return start + (end - start) * min(1.0, max(0.0, col / (width - 1)))


def state_word(position: ReplayPosition) -> str:
    if position.at_end and not position.playing:
        return "■ END"
    return "▶ PLAYING" if position.playing else "‖ PAUSED"


def speed_text(speed: float) -> str:
    return f"×{speed:g}"  # noqa: RUF001 (the multiplication sign is meant)


def tick_glyphs(styles: Styles) -> dict[TickKind, tuple[str, str, int]]:
    """Glyph, style and priority (a higher one wins a shared column) of each kind of tick."""
    return {
        "status": ("·", "dim", 0),
        "marker": ("◆", styles.warning, 1),
        "flag": ("▼", f"bold {styles.error}", 2),
        "reset": ("↺", f"bold {styles.other}", 3),
    }


def phase_styles(styles: Styles) -> dict[PhaseKind, tuple[str, int]]:
    """Style and priority (the worst phase in a column is shown) of each cycle phase."""
    return {
        "fast": (styles.ok, 0),
        "recovery": (styles.accent, 1),
        "transition": (styles.warning, 2),
        "degraded": (styles.error, 3),
    }


TickColumns = list[tuple[str, str, int] | None]
"""Each column's tick glyph, style and priority (None: nothing there)."""


def tick_columns(timeline: ReplayTimeline, width: int, styles: Styles) -> TickColumns:
    """The ticks line's glyphs, one per column: where several points share a column, the kind
    with the highest priority wins. Goes over every flag and mark once (the widget keeps the
    result for its width: a long recording has many flags)."""
    width = max(2, width)
    glyphs = tick_glyphs(styles)
    start, end = timeline.start, timeline.end
    ticks: TickColumns = [None] * width
    flag = glyphs["flag"]
    last = -1
    for t in timeline.flags:
        c = column(t, start, end, width)
        if c != last:  # the flags are in order: one column after the other
            last = c
            here = ticks[c]
            if here is None or flag[2] >= here[2]:
                ticks[c] = flag
    for tick in timeline.marks:
        c = column(tick.t, start, end, width)
        glyph = glyphs[tick.kind]
        here = ticks[c]
        if here is None or glyph[2] >= here[2]:
            ticks[c] = glyph
    return ticks


def timeline_text(
    timeline: ReplayTimeline,
    position: ReplayPosition,
    width: int,
    *,
    styles: Styles = CONSOLE_STYLES,
    ticks: TickColumns | None = None,
) -> Text:
    """The timeline's four lines for a widget `width` columns wide (`ticks`: the ticks line
    from `tick_columns` for this width, when kept)."""
    width = max(2, width)
    phases = phase_styles(styles)
    start, end = timeline.start, timeline.end
    if ticks is None:
        ticks = tick_columns(timeline, width, styles)
    out = Text(no_wrap=True, overflow="crop")
    for mark in ticks:
        if mark is None:
            out.append(" ")
        else:
            out.append(mark[0], style=mark[1])
    out.append("\n")
    band: list[tuple[str, int] | None] = [None] * width
    for span in timeline.phases:
        c0 = column(span.t0, start, end, width)
        c1 = column(span.t1, start, end, width)
        phase = phases[span.phase]
        for c in range(c0, max(c0, c1) + 1):
            cell = band[c]
            if cell is None or phase[1] > cell[1]:
                band[c] = phase
    for shade in band:
        if shade is None:
            out.append(PLAIN, style="dim")
        else:
            out.append(BAND, style=shade[0])
    out.append("\n")
    head = column(position.t, start, end, width)
    out.append(" " * head)
    out.append(HEAD, style="bold")
    out.append(" " * (width - head - 1))
    out.append("\n")
    state = state_word(position)
    out.append(state, style="bold reverse" if not position.playing else "bold")
    out.append(f"  {speed_text(position.speed)}", style="bold")
    out.append(f"  {clock_text(position.elapsed_s)} / {clock_text(position.total_s)}")
    flags = timeline.count("flag")
    out.append(f"  ▼ {flags} flagged", style=styles.error if flags else "dim")
    resets = timeline.count("reset")
    if resets:
        out.append(f"  ↺ {resets} reset{'s' if resets != 1 else ''}", style=styles.other)
    markers = timeline.count("marker")
    if markers:
        out.append(f"  ◆ {markers} marker{'s' if markers != 1 else ''}", style=styles.warning)
    if timeline.cycle_period is not None:
        out.append(f"  cycle every {timeline.cycle_period} requests", style=styles.warning)
    return out


class Timeline(Widget):
    """The replay's timeline (see the module doc); `show()` redraws it for a position."""

    DEFAULT_CSS = """
    Timeline { height: 4; width: 1fr; }
    """

    class Seek(Message):
        """The user clicked the timeline: seek to recorded time `t`."""

        def __init__(self, t: float) -> None:
            super().__init__()
            self.t = t

    def __init__(self, timeline: ReplayTimeline, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeline = timeline
        self.position: ReplayPosition | None = None
        self._ticks: tuple[int, Styles, TickColumns] | None = None
        """The ticks line kept for a width and styles (they do not change as the head moves)."""

    def show(self, position: ReplayPosition) -> None:
        if position != self.position:
            self.position = position
            self.refresh()

    def render(self) -> Text:
        if self.position is None:
            return Text("")
        width = self.content_size.width
        styles = theme_styles(self.app.theme_variables)
        kept = self._ticks
        if kept is None or kept[0] != width or kept[1] != styles:
            kept = self._ticks = (width, styles, tick_columns(self.timeline, width, styles))
        return timeline_text(self.timeline, self.position, width, styles=styles, ticks=kept[2])

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        tl = self.timeline
        self.post_message(
            Timeline.Seek(time_at(offset.x, tl.start, tl.end, self.content_size.width))
        )
