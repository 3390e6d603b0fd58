"""`specmon web`: the same Textual app, in a browser, served by textual-serve.

  specmon web [demo|watch|replay] [ARGS...] [--host 127.0.0.1] [--port 8000] [--max-tabs 8]
              [--token-file FILE] [--no-token --allow-any-local-user]

Open the printed address in a browser: every page load (every tab) starts its own
`python -m specmon <demo|watch|replay> ARGS...` process, the app a terminal would show, drawn by
xterm.js in the page. Without a command it serves `demo`. The command's own options follow it
(`specmon web watch --attach http://gpu-box:8000`); `--host`, `--port`, `--max-tabs` and
`--public-url` are specmon web's wherever they stand (after `--`, everything goes to the
command). At most --max-tabs pages are served at once; another is told so and closed.

A secret token guards the page: it is printed once, in the address to open
(http://127.0.0.1:8000/?token=...), and kept in a file only you can read (--token-file FILE, or
a file under $XDG_RUNTIME_DIR/specmon or ~/.local/state/specmon, removed at stop). Opening that
address sets a cookie (HttpOnly, SameSite=Strict); any request without it gets 403 and starts no
app. An existing --token-file (mode 0600) is reused, so the address can stay the same.
`--no-token` serves without one, and only on a loopback host with `--allow-any-local-user`: every
user of this machine can then drive the app and whatever keys it holds.

It listens on 127.0.0.1 unless `--host` says otherwise, and warns when that address is not
loopback. `--port 0` takes a free port. A port in use is a one-line error (exit status 2).

Closing a tab ends its app. Ctrl-C (or SIGTERM) ends every app (each runs in a process group of
its own: SIGTERM, then SIGKILL to the group) and the server, within 2 s; the apps also get SIGTERM
if this process dies without that clean stop.

Exit status: 130 after Ctrl-C (SIGINT), 143 after SIGTERM; 2 for bad arguments or a port that
cannot be bound.
"""

from __future__ import annotations

import argparse
import errno
import functools
import ipaddress
import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported in run(): `specmon --help` must not import aiohttp or textual
    import asyncio

APPS: tuple[str, ...] = ("demo", "watch", "replay")
DEFAULT_APP = "demo"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_TABS = 8
"""Pages served at once (each runs an app process of ~150 MiB, docs/web.md); more are told so."""

WEB_OPTIONS: tuple[str, ...] = ("--host", "--port", "--public-url", "--max-tabs", "--token-file")
"""specmon web's own options, taken from anywhere in the command line before a `--`."""
WEB_FLAGS: tuple[str, ...] = ("--no-token", "--allow-any-local-user")
"""specmon web's own flags (no value), taken the same way."""
NO_TOKEN_CONFIRM = "--allow-any-local-user"

REFUSED_OPTIONS: dict[str, str] = {
    "json": "--json prints data instead of opening the app",
    "once": "--once prints one snapshot instead of opening the app",
    "record": "--record: every browser tab runs its own app, and all would write the same file "
    "(record from a terminal, then serve `specmon web replay FILE`)",
}
"""Options of the served commands that make no sense behind a browser page, and why."""

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


class WebArgsError(ValueError):
    """A command line `specmon web` cannot serve (the message is one line)."""


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "web",
        help="serve the app to a browser (textual-serve; 127.0.0.1 unless --host)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to listen on (default {DEFAULT_HOST}; anything else is reachable by "
        "others, and the token travels unencrypted)",
    )
    p.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free)"
    )
    p.add_argument(
        "--public-url",
        default=None,
        help="the address browsers use to reach this server, when it is not http://HOST:PORT "
        "(behind a proxy, or listening on 0.0.0.0)",
    )
    p.add_argument(
        "--max-tabs",
        type=int,
        default=DEFAULT_MAX_TABS,
        help=f"pages served at once, each with its own app process (default {DEFAULT_MAX_TABS})",
    )
    p.add_argument(
        "--token-file",
        default=None,
        metavar="FILE",
        help="the token's file: read when it exists (it must be mode 0600), else a new token is "
        "written there (default: a new token in a private file, removed at stop)",
    )
    p.add_argument(
        "--no-token",
        action="store_true",
        help=f"serve without a token (loopback only, and only with {NO_TOKEN_CONFIRM})",
    )
    p.add_argument(
        NO_TOKEN_CONFIRM,
        dest="allow_any_local_user",
        action="store_true",
        help="with --no-token: confirm that every user of this machine may drive the app",
    )
    p.add_argument(
        "app", nargs="?", default=DEFAULT_APP, help=f"{' | '.join(APPS)} (default {DEFAULT_APP})"
    )
    p.add_argument("app_args", nargs=argparse.REMAINDER, help="the command's own arguments")


# ------------------------------------------------------------------ command line (pure)


@dataclass(frozen=True)
class WebPlan:
    """What to serve, where: the result of reading `specmon web`'s command line."""

    app: str
    app_args: tuple[str, ...]
    host: str
    port: int
    public_url: str | None = None
    max_tabs: int = DEFAULT_MAX_TABS
    api_key: str | None = field(default=None, repr=False)
    """Given to the app processes as $OPENAI_API_KEY (see `take_api_key`)."""
    token_file: str | None = None
    no_token: bool = False
    url_secrets: tuple[tuple[int, str], ...] = field(default=(), repr=False)
    """The served words that held `user:password@` credentials, by index, as given: the app
    processes get them through their environment (see `take_url_credentials`)."""

    def app_argv(self, python: str) -> list[str]:
        """The argv of one app process."""
        return [python, "-m", "specmon", self.app, *self.app_args]

    def command(self, python: str) -> str:
        """The shell command textual-serve runs per browser session (`exec`: the shell becomes
        the app, so the process textual-serve holds is the app and its group's leader)."""
        return "exec " + shlex.join(self.app_argv(python))

    @property
    def title(self) -> str:
        """The command as the page and the terminal show it (secrets scrubbed all the same)."""
        from specmon.core.redaction import redact_text

        return redact_text(shlex.join(["specmon", self.app, *self.app_args]))


def split_web_options(
    words: Sequence[str],
) -> tuple[dict[str, str], list[str]]:
    """Take `--host`, `--port` and `--public-url` (as `--opt VALUE` or `--opt=VALUE`) out of the
    served command's words, up to a `--`; the rest, in order, is the command's."""
    found: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            rest.extend(words[i + 1 :])
            break
        if word in WEB_FLAGS:
            found[word[2:].replace("-", "_")] = "1"
            i += 1
            continue
        name, eq, value = word.partition("=")
        if name in WEB_OPTIONS:
            if not eq:
                if i + 1 >= len(words):
                    raise WebArgsError(f"{name} needs a value")
                value = words[i + 1]
                i += 1
            found[name[2:].replace("-", "_")] = value
        else:
            rest.append(word)
        i += 1
    return found, rest


def plan_from_args(args: argparse.Namespace) -> WebPlan:
    """Read the parsed command line into a WebPlan (options after the command included)."""
    app = args.app
    words = list(args.app_args)
    if app is not None and app.startswith("-"):  # `specmon web -- --speed 2`: no command named
        words.insert(0, app)
        app = DEFAULT_APP
    if app not in APPS:
        raise WebArgsError(f"serves {', '.join(APPS)}; got {app!r}")
    found, rest = split_web_options(words)
    host = found.get("host", args.host)
    port_text = found.get("port", str(args.port))
    try:
        port = int(port_text)
    except ValueError:
        raise WebArgsError(f"--port must be a number, got {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise WebArgsError(f"--port must be from 0 to 65535, got {port}")
    public_url = found.get("public_url", args.public_url)
    tabs_text = found.get("max_tabs", str(args.max_tabs))
    try:
        max_tabs = int(tabs_text)
    except ValueError:
        raise WebArgsError(f"--max-tabs must be a number, got {tabs_text!r}") from None
    if max_tabs < 1:
        raise WebArgsError(f"--max-tabs must be at least 1, got {max_tabs}")
    rest, api_key = take_api_key(rest)
    rest, url_secrets = take_url_credentials(rest)
    no_token = bool(found.get("no_token")) or bool(getattr(args, "no_token", False))
    confirmed = bool(found.get("allow_any_local_user")) or bool(
        getattr(args, "allow_any_local_user", False)
    )
    token_file = found.get("token_file", getattr(args, "token_file", None))
    if no_token:
        if token_file is not None:
            raise WebArgsError("--no-token and --token-file do not go together")
        if not is_loopback(host):
            raise WebArgsError(
                f"--no-token is refused on --host {host}, which is not a loopback address"
            )
        if not confirmed:
            raise WebArgsError(
                "--no-token lets every user of this machine open the app and use the keys it "
                f"holds; add {NO_TOKEN_CONFIRM} to confirm"
            )
    elif confirmed:
        raise WebArgsError(f"{NO_TOKEN_CONFIRM} goes with --no-token")
    return WebPlan(
        app=app,
        app_args=tuple(rest),
        host=host,
        port=port,
        public_url=public_url,
        max_tabs=max_tabs,
        api_key=api_key,
        token_file=token_file,
        no_token=no_token,
        url_secrets=tuple(url_secrets),
    )


def take_api_key(words: Sequence[str]) -> tuple[list[str], str | None]:
    """Take `--api-key KEY` (or `--api-key=KEY`) out of the served command's words: the key goes
    to the app processes through their environment ($OPENAI_API_KEY, which the app reads when no
    --api-key is given), never through their command line, which `ps` shows and the page's title
    would."""
    rest: list[str] = []
    key: str | None = None
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--api-key" and i + 1 < len(words):
            key = words[i + 1]
            i += 2
            continue
        if word.startswith("--api-key="):
            key = word.partition("=")[2]
        else:
            rest.append(word)
        i += 1
    return rest, key


ARGV_SECRETS_ENV = "SPECMON_ARGV_SECRETS"
"""The environment variable that carries the served command's words holding credentials
(`[[index, word], ...]` as JSON) to the app processes; `restore_argv_secrets` puts them back."""


def take_url_credentials(words: Sequence[str]) -> tuple[list[str], list[tuple[int, str]]]:
    """The served words with `user:password@` taken out of every URL in them, and the words as
    given, by index: those go to the app processes through their environment, never through
    their command line (which `ps` shows to every user)."""
    from specmon.core.redaction import redact_url

    rest: list[str] = []
    secrets: list[tuple[int, str]] = []
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        as_option = bool(eq) and name.startswith("--")
        url = value if as_option else word
        bare = redact_url(url)
        if bare is not None and bare != url and "://" in url:
            secrets.append((i, word))
            word = f"{name}={bare}" if as_option else bare
        rest.append(word)
    return rest, secrets


def restore_argv_secrets(argv: list[str], environ: Any = None) -> list[str]:
    """In an app process of `specmon web`: `argv` (the words after `specmon`) with the words
    that held credentials put back from the environment (the variable is removed, so nothing
    this process starts inherits it). Unchanged when the variable is absent or does not fit."""
    import json

    env = os.environ if environ is None else environ
    text = env.pop(ARGV_SECRETS_ENV, None)
    if not text:
        return argv
    try:
        pairs = json.loads(text)
    except ValueError:
        return argv
    out = list(argv)
    offset = 1  # argv[0] is the served command (demo, watch, replay)
    for pair in pairs if isinstance(pairs, list) else ():
        if (
            isinstance(pair, list)
            and len(pair) == 2
            and isinstance(pair[0], int)
            and isinstance(pair[1], str)
            and 0 <= pair[0] + offset < len(out)
        ):
            out[pair[0] + offset] = pair[1]
    return out


def check_served_args(plan: WebPlan, parse: Any) -> None:
    """Parse the served command's arguments with its own parser now (`parse(argv)` returns the
    namespace; argparse itself reports a bad one and exits 2), so a mistake shows here, once, not
    in every browser tab; refuse the options that would not open the app."""
    words = list(plan.app_args)
    for index, word in plan.url_secrets:
        words[index] = word
    ns = parse([plan.app, *words])
    for name, why in REFUSED_OPTIONS.items():
        if getattr(ns, name, None):
            raise WebArgsError(f"cannot serve {plan.app} with {why}")
    if plan.app == "replay":
        file = Path(ns.file)
        if not file.is_file():
            raise WebArgsError(f"{ns.file}: no such recording")


def tabs_full_message(max_tabs: int) -> str:
    return (
        f"\r\n  specmon web: {max_tabs} tab(s) are open already, each with its own app "
        "(--max-tabs). Close one, then reload this page.\r\n"
    )


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback address (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    if host == "":
        return False  # every interface
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(a).is_loopback for a in addresses)


def not_loopback_warning(host: str) -> str:
    return (
        f"specmon web: warning: --host {host} is not a loopback address: the page and its "
        "token travel unencrypted (http) to whoever is on the path, and every page load starts a "
        "process here; prefer an SSH tunnel to 127.0.0.1"
    )


def public_url_for(host: str, port: int) -> str:
    """The address printed and given to the page for its websocket: the listening address,
    with this machine's name for a wildcard (0.0.0.0, ::)."""
    name = host.strip("[]")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return f"http://{name}:{port}"
    if address.is_unspecified:
        return f"http://{socket.gethostname()}:{port}"
    if address.version == 6:
        return f"http://[{address}]:{port}"
    return f"http://{address}:{port}"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (non-blocking), or WebArgsError with one line."""
    bind_host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(
            bind_host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        raise WebArgsError(f"cannot listen on {host!r}: {exc.strerror or exc}") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not over a live listener
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise WebArgsError(f"port {port} on {host} is in use") from None
        raise WebArgsError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


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


def run(args: argparse.Namespace) -> int:
    from specmon.cli.main import build_parser
    from specmon.cli.web_auth import WebAuthError, token_from_file

    sock: socket.socket | None = None
    try:
        plan = plan_from_args(args)
        check_served_args(plan, build_parser().parse_args)
        if not is_loopback(plan.host):
            print(not_loopback_warning(plan.host), file=sys.stderr, flush=True)
        sock = bind(plan.host, plan.port)
        token: str | None = None
        token_file: Path | None = None
        remove_file = False
        if not plan.no_token:
            given = Path(plan.token_file).expanduser() if plan.token_file else None
            token, token_file, remove_file = token_from_file(given, sock.getsockname()[1])
    except (WebArgsError, WebAuthError) as exc:
        if sock is not None:
            sock.close()
        print(f"specmon web: {exc}", file=sys.stderr)
        return 2
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

    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    process_shutdown = shutdown.current()
    web: _WebServer | None = None

    def request_stop() -> None:  # in the signal handler: note the time, hand the stop over
        if web is not None:
            web.stop_requested_at = time.monotonic()
        loop.call_soon_threadsafe(stop.set)

    if process_shutdown is not None:  # the `specmon` process: stop from the loop, not by raising
        process_shutdown.on_signal(request_stop)
    web = _WebServer(plan, url, sock, stop, token=token, token_file=token_file)
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
    ) -> None:
        from specmon.cli.web_auth import Guard, allowed_origins, cookie_name

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
        self._server = _make_textual_server(self, plan, url)

    async def run(self) -> None:
        from aiohttp import web

        from specmon.cli.web_auth import make_middleware

        app = await self._server._make_app()
        app.middlewares.append(make_middleware(self.guard))
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, shutdown_timeout=CLOSE_S
        )
        await self._runner.setup()
        await web.SockSite(self._runner, self.sock).start()
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
        templates_path=Path(__file__).resolve().parent / "web_page",
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
