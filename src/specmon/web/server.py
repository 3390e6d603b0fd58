"""`specmon web`'s server: textual-serve's aiohttp server with one app process per browser tab.

`start(plan)` listens, makes or reads the token (web/auth.py) and serves until Ctrl-C or
SIGTERM; every tab's app runs in a process group of its own, stopped within a bound when the
tab closes or the server stops. textual-serve is used below its documented API (docs/web.md
names the parts); nothing heavy is imported before serving.
"""

from __future__ import annotations

import functools
import os
import signal
import socket
import sys
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specmon.sources.addresses import is_loopback
from specmon.web.net import bind, public_url_for
from specmon.web.plan import ARGV_SECRETS_ENV, WebPlan

if TYPE_CHECKING:  # imported when serving: `specmon --help` must not import aiohttp or textual
    import asyncio

    from specmon.web.limits import RateLog

STOP_BUDGET_S = 1.0
"""Server stop: from the signal to SIGKILL of every app group still there. The whole stop must end
within runtime.shutdown's 1.5 s bound, and the time counts from the signal: starting an app
blocks this loop (fork and exec), so under load the stop may begin late."""
STOP_KILL_MARGIN_S = 0.5
"""Server stop: the apps get SIGTERM at once; SIGKILL comes this long later, or at the budget's
end if that is sooner."""
TAB_TERM_AFTER_S = 5.0
"""A closed tab: how long its app may take to quit on request before SIGTERM."""
TAB_KILL_AFTER_S = 7.0
"""A closed tab: when its app's group gets SIGKILL if still there."""
CLOSE_S = 0.1
"""Server stop, after the apps: the most it waits for the pages to answer the websocket's close,
and for aiohttp's own shutdown."""
REAP_S = 0.2
"""After SIGKILL: how long to wait for the app process to be reaped."""


def tabs_full_message(max_tabs: int) -> str:
    return (
        f"\r\n  specmon web: {max_tabs} tab(s) are open already, each with its own app "
        "(--max-tabs). Close one, then reload this page.\r\n"
    )


def not_loopback_warning(host: str) -> str:
    return (
        f"specmon web: warning: --host {host} is not a loopback address: the page and its "
        "token travel unencrypted (http) to whoever is on the path, and every page load starts a "
        "process here; prefer an SSH tunnel to 127.0.0.1"
    )


# ------------------------------------------------------------------ process groups


def signal_process(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        return


def signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return


def parent_death_signal() -> Any:
    """A function for `preexec_fn` (Linux; None elsewhere) that, in the forked app process
    before exec, asks for SIGTERM when this server dies without its clean stop (SIGKILL, a
    second Ctrl-C), so no app outlives it. libc is loaded here, in the parent: the forked child
    only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    pr_set_pdeathsig = 1
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    term = int(signal.SIGTERM)

    def ask() -> None:
        prctl(pr_set_pdeathsig, term, 0, 0, 0)

    return ask


# ------------------------------------------------------------------ the server


def start(plan: WebPlan) -> int:
    """Listen, take the token and serve `plan` until Ctrl-C or SIGTERM (130, or 143 through the
    process's shutdown). BindError or WebAuthError (one line) when it cannot start serving."""
    from specmon.web.auth import token_from_file

    if not is_loopback(plan.host):
        print(not_loopback_warning(plan.host), file=sys.stderr, flush=True)
    sock = bind(plan.host, plan.port)
    token: str | None = None
    token_file: Path | None = None
    remove_file = False
    try:
        if not plan.no_token:
            given = Path(plan.token_file).expanduser() if plan.token_file else None
            token, token_file, remove_file = token_from_file(given, sock.getsockname()[1])
    except BaseException:
        sock.close()
        raise
    try:
        return serve(plan, sock, token=token, token_file=token_file)
    finally:
        if remove_file and token_file is not None:
            token_file.unlink(missing_ok=True)


def serve(
    plan: WebPlan,
    sock: socket.socket,
    *,
    token: str | None = None,
    token_file: Path | None = None,
) -> int:
    """Serve until Ctrl-C or SIGTERM; stop every app process and the server; 130 (or 143).
    `token` None serves without one (--no-token)."""
    import asyncio
    import json
    import logging

    from specmon.runtime import shutdown

    port = sock.getsockname()[1]
    url = plan.public_url or public_url_for(plan.host, port)
    # textual-serve gives each app a copy of this environment.
    if plan.api_key is not None:
        os.environ["OPENAI_API_KEY"] = plan.api_key
    if plan.url_secrets:
        os.environ[ARGV_SECRETS_ENV] = json.dumps([list(p) for p in plan.url_secrets])
    logging.basicConfig(level=logging.WARNING, format="specmon web: %(message)s")

    from specmon.web.limits import RateLog, loop_exception_handler

    loop = asyncio.new_event_loop()
    log = RateLog(logging.getLogger("specmon.web").warning)
    # Whatever the loop reports (an accept() without file descriptors left, a connection
    # reset) is one line per kind and interval, not a traceback per occurrence.
    loop.set_exception_handler(loop_exception_handler(log))
    stop = asyncio.Event()
    process_shutdown = shutdown.current()
    web: _WebServer | None = None

    def request_stop() -> None:  # in the signal handler: note the time, hand the stop over
        if web is not None:
            web.stop_requested_at = time.monotonic()
        loop.call_soon_threadsafe(stop.set)

    if process_shutdown is not None:  # the `specmon` process: stop from the loop, not by raising
        process_shutdown.on_signal(request_stop)
    web = _WebServer(plan, url, sock, stop, token=token, token_file=token_file, log=log)
    try:
        loop.run_until_complete(web.run())
    except KeyboardInterrupt:  # library use (no shutdown installed): Ctrl-C raises here
        loop.run_until_complete(web.close())
    finally:
        if process_shutdown is not None:
            process_shutdown.on_signal(None)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
        sock.close()
    return 130


@dataclass(eq=False)
class _Session:
    """One browser tab: its websocket and the app process serving it."""

    websocket: Any
    service: Any
    started: asyncio.Event
    stopping: asyncio.Task[None] | None = field(default=None)
    found_nothing: bool = False


class _WebServer:
    """textual-serve's Server, with each app process in a process group of its own and a
    bounded stop of all of them."""

    def __init__(
        self,
        plan: WebPlan,
        url: str,
        sock: socket.socket,
        stop: asyncio.Event,
        *,
        token: str | None = None,
        token_file: Path | None = None,
        log: RateLog | None = None,
    ) -> None:
        from specmon.web.auth import Guard, allowed_origins, cookie_name
        from specmon.web.limits import ConnectionLimits, RateLog, caps_for

        self.plan = plan
        self.token = token
        self.token_file = token_file
        port = sock.getsockname()[1]
        self.guard = Guard(
            token=token,
            cookie=cookie_name(port),
            origins=allowed_origins(url, plan.host, port, loopback=is_loopback(plan.host)),
            secure=url.startswith("https:"),
        )
        self.url = url
        self.sock = sock
        self.stop = stop
        self.sessions: set[_Session] = set()
        self.closing = False
        self.stop_requested_at: float | None = None
        """time.monotonic() of the signal (the stop's budget counts from it)."""
        self.kill_at = 0.0
        """Once closing: when every app group still there gets SIGKILL."""
        self._runner: Any = None
        self._listener: asyncio.Server | None = None
        self.limits = ConnectionLimits(caps_for(plan.max_tabs), log or RateLog(logging_warning))
        self._server = _make_textual_server(self, plan, url)

    async def run(self) -> None:
        import asyncio

        from aiohttp import web

        from specmon.web.auth import make_middleware
        from specmon.web.limits import BACKLOG

        app = await self._server._make_app()
        app.middlewares.append(make_middleware(self.guard, let_in=self.limits.let_in))
        # keepalive_timeout: a connection without a complete request head for that long is
        # closed, a new one too (aiohttp >= 3.14.4); web/limits.py has the rest.
        self._runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            shutdown_timeout=CLOSE_S,
            keepalive_timeout=self.plan.idle_timeout_s,
        )
        await self._runner.setup()
        # Not an aiohttp site: each connection goes through the limits' protocol first, which
        # counts it by address and hands it to aiohttp's RequestHandler (`runner.server`), or
        # closes it (web/limits.py says why this cannot be a middleware).
        self._listener = await asyncio.get_running_loop().create_server(
            self.limits.protocol_factory(self._runner.server), sock=self.sock, backlog=BACKLOG
        )
        if self.token is None:
            address = self.url
            guard = (
                "no token: every user of this machine can open it (--no-token); "
                "every tab runs its own app; Ctrl-C stops"
            )
        else:
            address = f"{self.url.rstrip('/')}/?token={self.token}"
            guard = f"token also in {self.token_file}; every tab runs its own app; Ctrl-C stops"
        print(f"specmon web: serving `{self.plan.title}` at {address} ({guard})", flush=True)
        try:
            await self.stop.wait()
        finally:
            await self.close()

    async def close(self) -> None:
        """Refuse new tabs, end every app process (SIGTERM, then SIGKILL to its group: within
        STOP_BUDGET_S of the signal), close the pages' websockets, stop the server."""
        import asyncio
        import logging

        from specmon.sources.host.process import group_members

        self.closing = True
        # An app stopped before its first frame is not news while everything stops.
        logging.getLogger("textual-serve").setLevel(logging.CRITICAL)
        begun = self.stop_requested_at or time.monotonic()
        kill_at = begun + min(STOP_BUDGET_S, (time.monotonic() - begun) + STOP_KILL_MARGIN_S)
        sessions = list(self.sessions)
        # A tab whose app is being started right now: its process is there once the start
        # returns (the start runs in this loop: it ends before this goes on, or soon after).
        self.kill_at = kill_at
        await _bounded([s.started.wait() for s in sessions], kill_at - time.monotonic())
        stops = [self.end(s, term_at=None, kill_at=kill_at) for s in sessions]
        # A stop already under way for a closed tab may have a longer grace: the deadline holds
        # for every app all the same.
        await _bounded([asyncio.shield(t) for t in stops], kill_at + REAP_S - time.monotonic())
        for session in sessions:
            process = session.service.process
            if process is not None and group_members(process.pid):
                signal_group(process.pid, signal.SIGKILL)
        await _bounded([asyncio.shield(t) for t in stops], REAP_S)
        # Closing waits for each page's answer: bounded (the apps are already gone).
        await _bounded([s.websocket.close() for s in sessions], CLOSE_S)
        if self._listener is not None:
            self._listener.close()  # no new connection; aiohttp's cleanup closes the others
            self._listener = None
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def end(
        self, session: _Session, *, term_at: float | None, kill_at: float
    ) -> asyncio.Task[None]:
        """Stop `session`'s app process group (see `_stop_app`). Once: later calls share the
        first stop, unless that one found no process yet (the app was still being started)."""
        import asyncio

        stopping = session.stopping
        if stopping is None or (stopping.done() and session.found_nothing):
            session.found_nothing = session.service.process is None
            stopping = asyncio.ensure_future(_stop_app(session.service, term_at, kill_at))
            session.stopping = stopping
        return stopping

    async def handle_websocket(self, request: Any) -> Any:
        """A tab connected: start its app, relay until either side ends, then stop the app."""
        import asyncio

        from aiohttp import web
        from textual_serve.server import to_int

        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)
        if self.closing:
            await websocket.close()
            return websocket
        if len(self.sessions) >= self.plan.max_tabs:
            # Said in the page's terminal, then the page shows "Session ended".
            await websocket.send_bytes(tabs_full_message(self.plan.max_tabs).encode())
            await websocket.close()
            return websocket
        service = app_service_class()(
            self._server.command,
            write_bytes=websocket.send_bytes,
            write_str=websocket.send_str,
            close=websocket.close,
            download_manager=self._server.download_manager,
        )
        session = _Session(websocket, service, asyncio.Event())
        self.sessions.add(session)
        try:
            try:
                await service.start(width, height)
            finally:
                session.started.set()
            if self.closing:  # the server began to stop while this app started
                return websocket
            # Until the page goes (its messages end) or the app does (its output ends: the
            # page is then closed, not left showing a screen that no longer changes).
            relay = asyncio.ensure_future(self._server._process_messages(websocket, service))
            try:
                await asyncio.wait({relay, service.output_done}, return_when="FIRST_COMPLETED")
            finally:
                relay.cancel()
                await asyncio.gather(relay, return_exceptions=True)
        except asyncio.CancelledError:
            pass
        except Exception as exc:  # a broken app start or relay: this tab's problem only
            logging_error(f"a browser session failed: {exc!r}")
        finally:
            now = time.monotonic()
            if self.closing:  # the server's stop, with its deadline
                stopping = self.end(session, term_at=None, kill_at=self.kill_at)
            else:
                stopping = self.end(
                    session, term_at=now + TAB_TERM_AFTER_S, kill_at=now + TAB_KILL_AFTER_S
                )
            await asyncio.shield(stopping)
            self.sessions.discard(session)
            await websocket.close()
        return websocket


def logging_error(message: str) -> None:
    import logging

    logging.getLogger("specmon.web").error(message)


def logging_warning(message: str) -> None:
    import logging

    logging.getLogger("specmon.web").warning(message)


async def _stop_app(service: Any, term_at: float | None, kill_at: float) -> None:
    """Stop one app and its process group. With `term_at` (a time.monotonic() value): ask the app
    to quit (Textual's web driver's "quit"), and send it SIGTERM at `term_at` if it has not;
    without: SIGTERM at once (Textual's web driver quits on it; an app still starting gets
    specmon's own clean stop). At `kill_at`, SIGKILL to whatever is left of its group (the app,
    its collector process, multiprocessing's resource tracker: the rest of the group follows
    the app out by itself until then). Then end the relay of the app's output."""
    import asyncio

    from specmon.sources.host.process import group_members

    process = service.process
    if process is None:
        return
    pgid = process.pid  # the app leads its own group (start_new_session)
    if process.returncode is None:
        if term_at is None:
            signal_process(pgid, signal.SIGTERM)
        else:
            await service.send_meta({"type": "quit"})
            if not await _wait(process, term_at - time.monotonic()):
                signal_process(pgid, signal.SIGTERM)
        if not await _wait(process, kill_at - time.monotonic()):
            signal_group(pgid, signal.SIGKILL)
            await _wait(process, REAP_S)
    while group_members(pgid) and time.monotonic() < kill_at:
        await asyncio.sleep(0.02)
    if group_members(pgid):
        signal_group(pgid, signal.SIGKILL)
    await service.finish(REAP_S)


async def _bounded(awaitables: list[Awaitable[object]], seconds: float) -> None:
    """Run `awaitables` together for at most `seconds`; cancel what is left."""
    import asyncio

    if not awaitables:
        return
    seconds = max(0.0, seconds)
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    _done, pending = await asyncio.wait(tasks, timeout=seconds)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def _wait(process: Any, seconds: float) -> bool:
    import asyncio

    if process.returncode is not None:
        return True
    if seconds <= 0:
        return False
    try:
        await asyncio.wait_for(process.wait(), seconds)
    except TimeoutError:
        return False
    return True


def _make_textual_server(owner: _WebServer, plan: WebPlan, url: str) -> Any:
    """A textual-serve Server whose websocket handler is `owner`'s; nothing printed at start."""
    from textual_serve.server import Server

    class _Server(Server):
        async def on_startup(self, app: Any) -> None:
            return None

        async def handle_websocket(self, request: Any) -> Any:
            return await owner.handle_websocket(request)

    port = owner.sock.getsockname()[1]
    return _Server(
        plan.command(sys.executable),
        host=plan.host,
        port=port,
        title=plan.title,
        public_url=url,
        templates_path=Path(__file__).resolve().parent / "page",
    )


@functools.cache
def app_service_class() -> Any:
    """textual-serve's AppService, starting the app in a new session (its own process group,
    out of reach of the terminal's Ctrl-C, which this server handles) with a parent-death
    signal. Built on first use: textual-serve is imported only when serving."""
    from textual_serve.app_service import AppService

    preexec = parent_death_signal()

    class GroupedAppService(AppService):
        @property
        def process(self) -> Any:
            return self._process

        @property
        def output_done(self) -> Any:
            """The task relaying the app's output to the page: done when the app's stdout
            closes (started by `start`)."""
            return self._task

        async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
            import asyncio

            environment = self._build_environment(width=width, height=height)
            self._process = process = await asyncio.create_subprocess_shell(
                self.command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=environment,
                start_new_session=True,
                preexec_fn=preexec,
            )
            self._stdin = process.stdin
            return process

        async def finish(self, seconds: float) -> None:
            """End the relay task (it ends by itself when the app's output closes)."""
            import asyncio

            task = self._task
            self._task = None
            if task is None:
                return
            try:
                await asyncio.wait_for(task, seconds)
            except (TimeoutError, asyncio.CancelledError):
                task.cancel()

    return GroupedAppService
