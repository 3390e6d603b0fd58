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
a file under $XDG_RUNTIME_DIR/specmon, else $XDG_STATE_HOME/specmon (~/.local/state/specmon):
mode 0600 in a 0700 directory, removed at stop). Opening that address sets a cookie (HttpOnly,
SameSite=Strict); any request without it gets 403 and starts no app. An existing --token-file
(mode 0600) is reused, so the address can stay the same.
`--no-token` serves without one, and only on a loopback host with `--allow-any-local-user`: every
user of this machine can then drive the app and whatever keys it holds.

It listens on 127.0.0.1 unless `--host` says otherwise, and warns when that address is not
loopback. `--port 0` takes a free port. A port in use is a one-line error (exit status 2).

Every local user can connect to it, so a connection without a complete request for 5 s
($SPECMON_WEB_IDLE_TIMEOUT seconds) is closed, and it holds at most 32 connections per address
and 256 in all: over that, the oldest one that has not shown the token makes room (yours, once
it has, never does). Refusals are logged once per 10 s per kind.

Closing a tab ends its app. Ctrl-C (or SIGTERM) ends every app (each runs in a process group of
its own: SIGTERM, then SIGKILL to the group) and the server, within 2 s; the apps also get SIGTERM
if this process dies without that clean stop.

Exit status: 130 after Ctrl-C (SIGINT), 143 after SIGTERM, 129 after SIGHUP; 2 for bad arguments
or a port that cannot be bound.
"""

from __future__ import annotations

import argparse
from typing import Any

from specmon.cli.args import OneLineErrorParser, PlanError, add_command, fail, port, positive_int
from specmon.web.plan import (
    APPS,
    DEFAULT_APP,
    DEFAULT_HOST,
    DEFAULT_MAX_TABS,
    DEFAULT_PORT,
    NO_TOKEN_CONFIRM,
    WebArgsError,
    WebPlan,
    check_access,
    idle_timeout_from,
    take_api_key,
    take_url_credentials,
)

NAME = "web"
SUMMARY = "serve the app to a browser (textual-serve; 127.0.0.1 unless --host)"


WEB_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    (
        "--host",
        {
            "default": DEFAULT_HOST,
            "help": f"address to listen on (default {DEFAULT_HOST}; anything else is reachable "
            "by others, and the token travels unencrypted)",
        },
    ),
    (
        "--port",
        {
            "type": port,
            "default": DEFAULT_PORT,
            "help": f"port (default {DEFAULT_PORT}; 0: any free)",
        },
    ),
    (
        "--public-url",
        {
            "default": None,
            "help": "the address browsers use to reach this server, when it is not "
            "http://HOST:PORT (behind a proxy, or listening on 0.0.0.0)",
        },
    ),
    (
        "--max-tabs",
        {
            "type": positive_int,
            "default": DEFAULT_MAX_TABS,
            "help": "pages served at once, each with its own app process (default "
            f"{DEFAULT_MAX_TABS})",
        },
    ),
    (
        "--token-file",
        {
            "default": None,
            "metavar": "FILE",
            "help": "the token's file: read when it exists (it must be mode 0600), else a new "
            "token is written there (default: a new token in a private file, removed at stop)",
        },
    ),
    (
        "--no-token",
        {
            "action": "store_true",
            "default": False,
            "help": f"serve without a token (loopback only, and only with {NO_TOKEN_CONFIRM})",
        },
    ),
    (
        NO_TOKEN_CONFIRM,
        {
            "action": "store_true",
            "default": False,
            "help": "with --no-token: confirm that every user of this machine may drive the app",
        },
    ),
)
"""specmon web's own options, taken from anywhere in the command line before a `--`."""


def add_web_options(parser: argparse.ArgumentParser, *, defaults: bool = True) -> None:
    """specmon web's own options. With `defaults` False (the options read again after the
    served command) one not given is left out of the namespace, so one given before stands."""
    for flag, settings in WEB_OPTIONS:
        parser.add_argument(
            flag, **settings if defaults else {**settings, "default": argparse.SUPPRESS}
        )


def register(subparsers: Any) -> None:
    p = add_command(subparsers, NAME, SUMMARY, __doc__)
    add_web_options(p)
    p.add_argument(
        "app", nargs="?", default=DEFAULT_APP, help=f"{' | '.join(APPS)} (default {DEFAULT_APP})"
    )
    p.add_argument("app_args", nargs=argparse.REMAINDER, help="the command's own arguments")


def _options_among_the_commands() -> argparse.ArgumentParser:
    """A parser of specmon web's own options alone, for the words after the served command
    (argparse hands them all to `app_args`): what it does not know is the command's."""
    parser = OneLineErrorParser(prog="specmon web", add_help=False, allow_abbrev=False)
    add_web_options(parser, defaults=False)
    return parser


def plan_from_args(args: argparse.Namespace) -> WebPlan:
    """Read the parsed command line into a WebPlan: specmon web's options wherever they stand
    before a `--` (after the command too), the rest, in order, the served command's. A bad value
    of one of its options is argparse's one-line error (exit 2); WebArgsError for a command
    line that cannot be served."""
    app = args.app
    words = list(args.app_args)
    if app is not None and app.startswith("-"):  # `specmon web -- --speed 2`: no command named
        words.insert(0, app)
        app = DEFAULT_APP
    if app not in APPS:
        raise WebArgsError(f"serves {', '.join(APPS)}; got {app!r}")
    cut = words.index("--") if "--" in words else len(words)
    later, rest = _options_among_the_commands().parse_known_args(words[:cut])
    options = {**vars(args), **vars(later)}
    rest, api_key = take_api_key([*rest, *words[cut + 1 :]])
    rest, url_secrets = take_url_credentials(rest)
    check_access(
        options["host"],
        no_token=options["no_token"],
        confirmed=options["allow_any_local_user"],
        token_file=options["token_file"],
    )
    return WebPlan(
        app=app,
        app_args=tuple(rest),
        host=options["host"],
        port=options["port"],
        public_url=options["public_url"],
        max_tabs=options["max_tabs"],
        api_key=api_key,
        token_file=options["token_file"],
        no_token=options["no_token"],
        url_secrets=tuple(url_secrets),
        idle_timeout_s=idle_timeout_from(),
    )


def plan_from(args: argparse.Namespace) -> WebPlan:
    """What to serve, where (`plan_from_args`); PlanError (one line, exit 2) for a command line
    that cannot be served."""
    from specmon.web.auth import WebAuthError

    try:
        return plan_from_args(args)
    except (WebArgsError, WebAuthError) as exc:
        raise PlanError(str(exc)) from None


def run(plan: WebPlan) -> int:
    """Check the served command's arguments with its own parser, then serve (web/server.py)."""
    from specmon.cli.main import build_parser
    from specmon.web.auth import WebAuthError
    from specmon.web.net import BindError
    from specmon.web.plan import check_served_args
    from specmon.web.server import start

    def parse(argv: list[str]) -> argparse.Namespace:
        """The served command's arguments as its tabs will run it: the user's config file
        applied (a bad one, or a watch without servers, is one line here and exit 2)."""
        from specmon.cli.user_config import ConfigError, apply_user_config, load_user_config
        from specmon.cli.watch_cmd import NO_SERVERS

        ns = build_parser().parse_args(argv)
        try:
            apply_user_config(ns, load_user_config())
        except ConfigError as exc:
            raise SystemExit(fail(ns.command, str(exc))) from None
        if ns.command == "watch" and ns.attach is None and ns.prometheus is None:
            raise SystemExit(fail(ns.command, NO_SERVERS))
        return ns

    try:
        check_served_args(plan, parse)
        return start(plan)
    except (WebArgsError, WebAuthError, BindError) as exc:
        return fail(NAME, str(exc))
