"""The record (start/stop) and marker keys, shared by the chat and dashboard screens."""

from __future__ import annotations

import datetime as _dt
import os

from textual.screen import Screen
from textual.worker import Worker, WorkerState

from specmon.ui.port import SessionPort
from specmon.ui.screens.dialogs import MarkerScreen


def recording_name(now: _dt.datetime | None = None) -> str:
    """The file a recording started with the record key goes to (in the working directory)."""
    now = now or _dt.datetime.now()
    return os.path.abspath(now.strftime("specmon-%Y%m%d-%H%M%S.ndjson"))


class RecordingScreen(Screen[None]):
    """The record (start/stop) and marker keys, shared by the chat and dashboard screens."""

    port: SessionPort

    def _say(self, text: str, *, failed: bool = False) -> None:
        raise NotImplementedError

    def action_record(self) -> None:
        port = self.port
        if not port.connected:
            self._say("not connected: nothing to record", failed=True)
            return

        def toggle() -> str:
            current = port.recording
            if current is not None:
                path = port.stop_recording()
                return f"recording stopped: {path or current}"
            return f"recording to {port.start_recording(recording_name())}"

        self.run_worker(toggle, thread=True, group="record", exclusive=False)

    def action_marker(self) -> None:
        if not self.port.connected:
            self._say("not connected: no marker added", failed=True)
            return

        def add(label: str | None) -> None:
            if label is None:
                return
            try:
                self.port.mark(label)
            except RuntimeError as exc:
                self._say(f"marker not added: {exc}", failed=True)
                return
            where = self.port.recording
            self._say(f"marker: {label}" + (f" (in {where})" if where else " (not recording)"))

        self.app.push_screen(MarkerScreen(), add)

    def _record_worker_done(self, event: Worker.StateChanged) -> bool:
        """Say what the record key did; True when the event was the record worker's."""
        if event.worker.group != "record":
            return False
        if event.state == WorkerState.SUCCESS:
            self._say(str(event.worker.result))
        elif event.state == WorkerState.ERROR:
            self._say(f"recording: {event.worker.error}", failed=True)
        return True
