"""`specmon replay`'s door to the runtime: the recording the cli read, played back."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specmon.core.replay_timeline import ReplayPosition, ReplayTimeline
from specmon.core.views import SessionView

if TYPE_CHECKING:
    from specmon.runtime.replay_session import ReplaySession


class ReplayPort:
    """The replay's door to the runtime: a `runtime.replay_session.ReplaySession` made by the
    cli from a recording it opened (and folded once), with the header's label and the reader's
    notices (a torn line). The screen reads the view at the play head and drives the play head
    through it; a seek may read part of the recording file again."""

    def __init__(
        self, session: ReplaySession, *, label: str, notices: tuple[str, ...] = ()
    ) -> None:
        self._session = session
        self.label = label
        """The header: RECORDED, the date, server, model, draft, n_spec (and SIMULATED)."""
        self.notices = notices
        """One line each: what the reader skipped or where the recording was torn."""
        self.simulated = session.info.simulated

    def abort(self) -> None:
        """Nothing to abandon: the recording was folded before the app started."""

    def close(self) -> None:
        """Close the recording file."""
        self._session.close()

    def view(self) -> SessionView:
        """The view at the play head (moved to now first)."""
        return self._session.view()

    def position(self) -> ReplayPosition:
        """Where the play head is (as of the last `view()` or control: the view and the
        position the screen draws are of the same instant)."""
        return self._session.position()

    @property
    def timeline(self) -> ReplayTimeline:
        return self._session.timeline

    def toggle_pause(self) -> bool:
        return self._session.toggle_pause()

    def faster(self) -> float:
        return self._session.faster()

    def slower(self) -> float:
        return self._session.slower()

    def seek(self, t: float) -> ReplayPosition:
        return self._session.seek(t)

    def seek_by(self, seconds: float) -> ReplayPosition:
        return self._session.seek_by(seconds)

    def jump(self, direction: int) -> ReplayPosition | None:
        return self._session.jump(direction)

    def labels_here(self) -> tuple[str, ...]:
        """What the timeline has at the play head (marks' labels, flagged requests)."""
        return self._session.labels_here()
