"""`specmon web`'s listening address: the address to print, the socket (whether it is loopback:
`specmon.sources.addresses.is_loopback`)."""

from __future__ import annotations

import errno
import ipaddress
import socket


class BindError(OSError):
    """The address cannot be listened on (the message is one line)."""


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
    """A listening socket on host:port (non-blocking), or BindError with one line."""
    bind_host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(
            bind_host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except OSError as exc:
        raise BindError(f"cannot listen on {host!r}: {exc.strerror or exc}") from None
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not over a live listener
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BindError(f"port {port} on {host} is in use") from None
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock
