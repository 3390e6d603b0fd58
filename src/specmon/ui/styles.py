"""The one home of the UI's colours: semantic roles (ok, warning, error, accent, other,
simulated) mapped to the current theme's colours, and the Rich styles built from them.

The text builders (the panel's sections, the servers table, the timeline, the worth screen) take
a `Styles` and never name a colour; the widgets pass `theme_styles(self.app.theme_variables)`,
so `app.theme = "specmon-light"` redraws them in that theme's colours. Text styles that are not
colours ("dim", "bold", "italic", "reverse") stay in the builders. `watch --once`'s Rich text has no
Textual theme: it uses CONSOLE_STYLES, the fixed palette of terminal colour names. This module is
the only one in ui/ that names colours (tests/ui/test_styles.py checks that); HEAT_DEFAULTS are
the heat shades of a theme without `heat-*` variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from specmon.core.step_heat import HeatClass
from specmon.ui.formatting import FlagKind


@dataclass(frozen=True, slots=True)
class Styles:
    """A colour per role (Rich colour words or #hex)."""

    ok: str
    """Good: a server up, a request ok, fast phases, accepted-position bars."""
    warning: str
    """Needs a look: stale, flagged, throttled, cycles, hints."""
    error: str
    """Wrong: down, failed, errors, hot GPU."""
    accent: str
    """The theme's primary; stands out without judging: restarted, recovery, window graphs."""
    other: str
    """The theme's secondary: lifetime graphs, resets, the console's border."""
    simulated: str
    """`watch`'s simulated banner and border (the panel's label is a warning, as the header's)."""

    def status(self, state: str) -> str:
        """The style of a server state (up, restarted, stale, down, unreadable, connecting)."""
        return {
            "up": self.ok,
            "restarted": f"bold {self.accent}",
            "stale": self.warning,
            "down": f"bold {self.error}",
            "unreadable": f"bold {self.error}",
            "connecting": "dim",
        }.get(state, "")

    def flag(self, kind: FlagKind) -> str:
        """The style of a request's flag kind."""
        return {
            "failed": self.error,
            "flagged": f"bold {self.warning}",
            "ok": self.ok,
            "unknown": "",
        }[kind]


CONSOLE_STYLES = Styles(
    ok="green",
    warning="yellow",
    error="red",
    accent="cyan",
    other="blue",
    simulated="magenta",
)
"""`watch --once`'s Rich text (no Textual theme): the terminal's own colour names."""


def theme_styles(variables: Mapping[str, str]) -> Styles:
    """The roles in a Textual theme's colours (`App.theme_variables`); a variable the theme
    lacks keeps CONSOLE_STYLES' colour."""

    def pick(name: str, default: str) -> str:
        value = variables.get(name)
        return value if value else default

    d = CONSOLE_STYLES
    return Styles(
        ok=pick("success", d.ok),
        warning=pick("warning", d.warning),
        error=pick("error", d.error),
        accent=pick("primary", d.accent),
        other=pick("secondary", d.other),
        simulated=pick("simulated", d.simulated),
    )


HEAT_DEFAULTS: dict[HeatClass, str] = {
    "many": "#187E36",
    "some": "#1E307E",
    "single": "#7B272A",
    "unknown": "#3A3F47",
    "prefill": "#242A30",
}
"""The acceptance-heat shades when the theme has no `heat-*` variables (specmon-dark's)."""
