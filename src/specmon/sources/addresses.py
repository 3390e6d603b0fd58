"""Whether a host is this machine's loopback: the one rule for every command that listens
(`--export`, `specmon web`) or chooses a default from where a server runs (`--gpu`)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback address (127.0.0.0/8, ::1, an IPv6
    form of 127.x): an address as written (an IPv6 one in brackets too) or a name looked up
    (`localhost`). Not loopback: the empty host (every interface), a name that does not resolve,
    and a name that only looks like an address (`127.example.com` is somebody's host)."""
    name = host.strip().strip("[]")
    if name == "":
        return False
    try:
        return _loopback_address(name)
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return False
    addresses = {str(info[4][0]).split("%", 1)[0] for info in infos}
    try:
        return bool(addresses) and all(_loopback_address(a) for a in addresses)
    except ValueError:
        return False


def url_is_loopback(url: str) -> bool:
    """Whether the host of `url` ("http://host:port/…", or "host:port" without a scheme) is
    loopback by `is_loopback`."""
    try:
        host = urlsplit(url if "://" in url else f"http://{url}").hostname
    except ValueError:
        return False
    return host is not None and is_loopback(host)


def _loopback_address(text: str) -> bool:
    """Whether the address `text` is loopback; ValueError when it is not an address."""
    address = ipaddress.ip_address(text)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback
