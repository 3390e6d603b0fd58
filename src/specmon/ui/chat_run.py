"""`specmon chat`'s run, once its command line (and `--resume`) is read into a `ChatPlan`
(cli/chat_cmd.py): the chat app on an attached server, or host mode's (vLLM started, its startup
view, then the chat), with the conversation saved as it goes (docs/chat.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specmon.core.stream_limits import DEFAULT_LIMITS, StreamLimits
from specmon.runtime.host_plan import HostFlags
from specmon.ui.saved_chats import HistoryFlags

if TYPE_CHECKING:
    from specmon.core.chat_record import SavedConversation
    from specmon.core.redaction import Scrubber
    from specmon.runtime.host_plan import HostPlan
    from specmon.runtime.session import SessionConfig
    from specmon.ui.app_runner import Dashboard

NAME = "chat"


@dataclass(frozen=True, slots=True)
class ChatPlan:
    """What `specmon chat` does, read from its command line (`plan_from`); `--resume` gives a
    new plan with what the saved conversation fills in (cli/chat_cmd.py `resumed_plan`)."""

    attach: str | None = None
    metrics_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    model: str | None = None
    record: str | None = None
    redact: tuple[str, ...] = ()
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    system: str | None = None
    gpu: str | None = None
    theme: str | None = None
    export: tuple[str, int] | None = None
    limits: StreamLimits = DEFAULT_LIMITS
    host: HostFlags = field(default_factory=HostFlags)
    history: HistoryFlags = field(default_factory=HistoryFlags)
    resumed: SavedConversation | None = None
    """The conversation `--resume` reopened (None: a new one)."""


def scrubbed(plan: ChatPlan) -> Scrubber:
    """What every saved or exported text of this chat goes through (saved_chats.chat_scrubber)."""
    from specmon.ui.saved_chats import chat_scrubber

    return chat_scrubber(plan.api_key, (plan.attach, plan.metrics_url), plan.redact)


def run_chat(plan: ChatPlan, gpu: str) -> int:
    """The chat app on `plan`'s server (`--attach`), or host mode's (`--model`); `gpu`: where
    its GPU numbers come from. The exit status (see `specmon chat --help`)."""
    if plan.attach is None:
        return _run_hosted(plan, gpu)
    return _run_attached(plan, gpu)


def _run_hosted(plan: ChatPlan, gpu: str) -> int:
    """Host mode: plan and check as serve does, start vLLM, then the app (startup view, chat)."""
    from specmon.runtime.host_launch import plan_or_exit, raise_stop_grace, stop_signals

    host = plan_or_exit(plan.host, "chat")
    if isinstance(host, int):
        return host
    raise_stop_grace()
    # The bounded shutdown handles SIGTERM and SIGHUP (KeyboardInterrupt, exit 143 / 129); where
    # it is not installed, SIGHUP (the terminal closed) must stop the server too.
    import signal

    with stop_signals((signal.SIGHUP,)):
        return _chat_hosted(plan, host, gpu)


def _chat_hosted(plan: ChatPlan, host_plan: HostPlan, gpu: str) -> int:
    from specmon.runtime.host_launch import (
        AppHost,
        Terminated,
        launch_or_exit,
        ready_timeout,
        stop_server,
        stopped_status,
        wait_in_text,
    )
    from specmon.runtime.terminal import on_terminal
    from specmon.ui.app_runner import run_dashboard
    from specmon.ui.saved_chats import chat_history_for, close_history

    server = None
    history = None
    try:
        launched = launch_or_exit(host_plan, "chat")
        if isinstance(launched, int):
            return launched
        server = launched
        host = AppHost(server, host_plan, ready_timeout(plan.host))
        if not on_terminal():
            # No terminal to show the startup view on: progress lines, and a failed start
            # reported at once.
            ready = wait_in_text(server, plan.host)
            if ready is None:
                return 1
            host.mark_ready(ready)
            host.exit_on_failure = True  # a death while serving ends the app at once
        base_url = server.base_url

        def config() -> SessionConfig:  # called once the server answered /health 200
            from specmon.core.canary import DEFAULT_INTERVAL_S
            from specmon.runtime.monitor import pair_targets
            from specmon.runtime.session import SessionConfig

            return SessionConfig(
                tuple(pair_targets([base_url], [])),
                api_key=plan.api_key,
                gpu=gpu,
                record=plan.record,
                redact=plan.redact,
                quiet=True,
                stream_limits=plan.limits,
                canary_s=DEFAULT_INTERVAL_S,  # host mode probes its server (docs/canary.md)
            )

        history = chat_history_for(plan.history.no_save, plan.resumed, scrubbed(plan))
        return run_dashboard(config, _dashboard(plan), host=host, chat_history=history)
    except (KeyboardInterrupt, Terminated) as stop:
        return stopped_status(stop)
    finally:
        close_history(history)
        stop_server(server, "chat")


def _dashboard(plan: ChatPlan, model: str | None = None) -> Dashboard:
    from specmon.ui.app_runner import Dashboard
    from specmon.ui.conversation import ChatSettings

    return Dashboard(
        NAME,
        "chat",
        theme=plan.theme,
        export=plan.export,
        model=model,
        settings=ChatSettings(plan.temperature, plan.top_p, plan.max_tokens),
        system=plan.system,
        idle_timeout_s=plan.limits.idle_timeout_s,
    )


def _run_attached(plan: ChatPlan, gpu: str) -> int:
    # Only Textual is imported before the first paint; the runtime and the stream client load in
    # the app's connect worker (`config` below), so the screen shows at once.
    from specmon.ui.app_runner import run_dashboard
    from specmon.ui.saved_chats import chat_history_for, close_history

    attach = plan.attach
    assert attach is not None

    def config() -> SessionConfig:
        from specmon.runtime.monitor import pair_targets
        from specmon.runtime.session import SessionConfig

        targets = pair_targets([attach], [plan.metrics_url] if plan.metrics_url else [])
        return SessionConfig(
            tuple(targets),
            api_key=plan.api_key,
            gpu=gpu,
            record=plan.record,
            redact=plan.redact,
            quiet=True,
            stream_limits=plan.limits,
        )

    history = chat_history_for(plan.history.no_save, plan.resumed, scrubbed(plan))
    try:
        return run_dashboard(config, _dashboard(plan, plan.model), chat_history=history)
    finally:
        close_history(history)
