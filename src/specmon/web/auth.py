"""`specmon web`'s access check: a secret token, exchanged for a cookie, before anything is served.

As Jupyter does it: at start a random token is made (or read from `--token-file`), printed once
in the address the user opens, and kept in a file only the owner can read (0600). A GET of `/`
with `?token=` equal to it answers with an HttpOnly, SameSite=Strict cookie holding it and a
redirect to the same page without the token (so it leaves the address bar and the history).
Every other request, HTTP or WebSocket, needs that cookie, or gets 403 and starts nothing.

The WebSocket's Origin header, when there is one (browsers always send it), must be the page's
own origin: the public URL's, or the listening address's (with `localhost`, 127.0.0.1 and ::1
for a loopback listener). Without a token (`--no-token`, loopback only) the Host header must also
name this server, so a page of another site that resolves its name to 127.0.0.1 (DNS rebinding)
is refused.

Nothing here imports aiohttp at module level: `specmon --help` stays fast.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specmon.core.credentials import origin_of

TOKEN_BYTES = 32
"""Random bytes in a new token (43 URL-safe characters)."""
MIN_TOKEN_CHARS = 16
"""The shortest token accepted from a --token-file."""
MAX_TOKEN_FILE_BYTES = 4096
"""A --token-file longer than this is refused (it is not a token)."""
TOKEN_QUERY = "token"
COOKIE_PREFIX = "specmon-web-"


class WebAuthError(ValueError):
    """A token file or option that cannot be used (the message is one line)."""


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def cookie_name(port: int) -> str:
    """One cookie name per port: two servers on one host do not replace each other's cookie."""
    return f"{COOKIE_PREFIX}{port}"


def runtime_dir() -> Path:
    """Where the default token file goes: $XDG_RUNTIME_DIR/specmon when that directory is this
    user's and private, else $XDG_STATE_HOME/specmon (XDG's default ~/.local/state when the
    variable is unset, empty or relative: the spec says to ignore a relative one). The
    directory is made 0700 (`private_dir`)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        try:
            info = os.stat(xdg)
        except OSError:
            info = None
        if info is not None and info.st_uid == os.getuid() and not info.st_mode & 0o077:
            return Path(xdg) / "specmon"
    state = os.environ.get("XDG_STATE_HOME") or ""
    if state and Path(state).is_absolute():
        return Path(state) / "specmon"
    return Path.home() / ".local" / "state" / "specmon"


def default_token_file(port: int) -> Path:
    return runtime_dir() / f"web-{port}.token"


def private_dir(path: Path) -> None:
    """Make specmon's own directory `path` (and its parents) when missing; it must be this
    user's, and it is left 0700 (an existing one that others may enter is made so)."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = os.stat(path)
        if not stat.S_ISDIR(info.st_mode):
            raise WebAuthError(f"{path} is not a directory")
        if info.st_uid != os.getuid():
            raise WebAuthError(f"{path} belongs to another user")
        if stat.S_IMODE(info.st_mode) != 0o700:
            os.chmod(path, 0o700)
    except OSError as exc:
        raise WebAuthError(f"cannot make {path}: {exc.strerror or exc}") from None


def write_token_file(path: Path, token: str) -> None:
    """Write `token` to `path`, readable by the owner only (0600, created so: never a moment
    readable by others); an existing file there is replaced. Its directory is made 0700 when
    missing."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise WebAuthError(f"cannot make {path.parent}: {exc.strerror or exc}") from None
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise WebAuthError(f"cannot replace {path}: {exc.strerror or exc}") from None
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        raise WebAuthError(f"cannot write the token file {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(token + "\n")


def read_token_file(path: Path) -> str:
    """The token kept in `path`: refused when others may read the file (group or other
    permission bits), when it is not the user's, or when it holds no usable token."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise WebAuthError(f"cannot read the token file {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise WebAuthError(f"the token file {path} is not a regular file")
    if info.st_uid != os.getuid():
        raise WebAuthError(f"the token file {path} belongs to another user")
    if info.st_mode & 0o077:
        raise WebAuthError(
            f"the token file {path} can be read by others (mode {stat.S_IMODE(info.st_mode):o}); "
            "chmod 600 it"
        )
    if info.st_size > MAX_TOKEN_FILE_BYTES:
        raise WebAuthError(f"the token file {path} is too long to hold a token")
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise WebAuthError(f"cannot read the token file {path}: {exc}") from None
    if len(token) < MIN_TOKEN_CHARS or any(c.isspace() or not c.isprintable() for c in token):
        raise WebAuthError(
            f"the token file {path} must hold one token of at least {MIN_TOKEN_CHARS} printable "
            "characters without spaces"
        )
    return token


def token_from_file(path: Path | None, port: int) -> tuple[str, Path, bool]:
    """(token, its file, whether to remove the file at stop). An existing --token-file is read
    (a token the user keeps); a missing one is written with a new token and kept; without
    --token-file a new token goes to the default file, removed when the server stops."""
    if path is None:
        token = new_token()
        file = default_token_file(port)
        private_dir(file.parent)
        write_token_file(file, token)
        return token, file, True
    if path.exists():
        return read_token_file(path), path, False
    token = new_token()
    write_token_file(path, token)
    return token, path, False


def token_matches(given: str | None, token: str) -> bool:
    if not given:
        return False
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8"))


def allowed_origins(public_url: str, host: str, port: int, *, loopback: bool) -> frozenset[str]:
    """The origins the page may be served from: the public URL's and the listening address's,
    and for a loopback listener the usual names of loopback."""
    found = {origin_of(public_url)}
    names = [host.strip("[]")]
    if loopback:
        names += ["127.0.0.1", "localhost", "::1"]
    for name in names:
        shown = f"[{name}]" if ":" in name else name
        found.add(origin_of(f"http://{shown}:{port}"))
    return frozenset(o for o in found if o is not None)


@dataclass(frozen=True)
class Guard:
    """Who may be served: `token` None only with --no-token (loopback, confirmed)."""

    token: str | None = field(repr=False)
    cookie: str
    origins: frozenset[str]
    secure: bool = False
    """The cookie's Secure flag (the public URL is https)."""

    def host_allowed(self, host_header: str | None) -> bool:
        if not host_header:
            return False
        return any(origin_of(f"{o.split('://')[0]}://{host_header}") == o for o in self.origins)

    def origin_allowed(self, origin: str | None) -> bool:
        """A request without Origin is not a browser's cross-site one (browsers send it on every
        WebSocket); with one, it must be this server's."""
        if origin is None:
            return True
        return "://" in origin and origin_of(origin) in self.origins

    def has_cookie(self, cookies: Any) -> bool:
        return self.token is not None and token_matches(cookies.get(self.cookie), self.token)


FORBIDDEN_TEXT = (
    "specmon web: 403 forbidden. Open the address printed when the server started (it carries "
    "the token), or read the token from its token file.\n"
)

Handler = Callable[[Any], Awaitable[Any]]


def make_middleware(guard: Guard, let_in: Callable[[Any], None] | None = None) -> Any:
    """An aiohttp middleware enforcing `guard` on every request, before any handler runs (so a
    refused WebSocket starts no app process). `let_in(transport)` is told of each request it
    lets through (web/limits.py never closes that connection to make room for another)."""
    from aiohttp import hdrs, web

    def admitted(request: Any) -> None:
        if let_in is not None:
            let_in(request.transport)

    def forbidden() -> Any:
        return web.Response(status=403, text=FORBIDDEN_TEXT, headers={"Cache-Control": "no-store"})

    @web.middleware
    async def check(request: Any, handler: Handler) -> Any:
        is_socket = request.headers.get(hdrs.UPGRADE, "").lower() == "websocket"
        if is_socket and not guard.origin_allowed(request.headers.get(hdrs.ORIGIN)):
            return forbidden()
        if guard.token is None:  # --no-token: loopback only; still no foreign Host
            if not guard.host_allowed(request.headers.get(hdrs.HOST)):
                return forbidden()
            admitted(request)
            return await handler(request)
        if guard.has_cookie(request.cookies):
            admitted(request)
            return await handler(request)
        given = request.query.get(TOKEN_QUERY)
        if (
            not is_socket
            and request.method == "GET"
            and request.path == "/"
            and token_matches(given, guard.token)
        ):
            admitted(request)
            rest = [(k, v) for k, v in request.query.items() if k != TOKEN_QUERY]
            target = request.rel_url.with_query(rest) if rest else request.rel_url.with_query(None)
            answer = web.HTTPSeeOther(location=str(target))
            answer.headers["Cache-Control"] = "no-store"
            answer.set_cookie(
                guard.cookie,
                guard.token,
                httponly=True,
                samesite="Strict",
                secure=guard.secure,
                path="/",
            )
            return answer
        return forbidden()

    return check
