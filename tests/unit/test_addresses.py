"""The one loopback rule (`sources/addresses.py`): what `--export`, `specmon web` and the default
`--gpu` each ask of a host."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from specmon.sources.addresses import is_loopback, url_is_loopback


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """A resolver that knows only the names put in the returned dict (no network in a test)."""
    table: dict[str, list[str]] = {"localhost": ["127.0.0.1", "::1"]}

    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in table[host]]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


@pytest.mark.parametrize(
    "host",
    ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "::ffff:127.0.0.1", "localhost"],
)
def test_loopback_addresses_and_localhost_are_loopback(names, host) -> None:
    assert is_loopback(host) is True


@pytest.mark.parametrize(
    "host", ["", "0.0.0.0", "::", "[::]", "10.0.0.1", "192.168.1.20", "::ffff:10.0.0.1"]
)
def test_other_addresses_and_every_interface_are_not(names, host) -> None:
    assert is_loopback(host) is False


def test_a_name_that_starts_like_a_loopback_address_is_not_loopback(names) -> None:
    """`--export 127.example.com:9464` listens on whatever that name resolves to: a public
    address here. The exporter called it loopback because the text starts with "127."."""
    names["127.example.com"] = ["93.184.215.14"]
    assert is_loopback("127.example.com") is False
    assert is_loopback("127.0.0.1.nip.example") is False  # does not resolve at all


def test_a_name_is_loopback_only_when_every_address_it_names_is(names) -> None:
    names["this-box"] = ["127.0.1.1"]
    names["split"] = ["127.0.0.1", "10.1.2.3"]
    assert is_loopback("this-box") is True
    assert is_loopback("split") is False


def test_the_host_of_a_url(names) -> None:
    assert url_is_loopback("http://127.0.0.1:8000/v1")
    assert url_is_loopback("localhost:8000")
    assert url_is_loopback("https://[::1]:8001")
    assert not url_is_loopback("http://127.example.com:8000")
    assert not url_is_loopback("http://10.0.0.5:8000")
    assert not url_is_loopback("http://[bad:8000")  # not a URL: not loopback, no exception


class _NotServing:
    """An exporter that serves nothing (the banner is what is under test)."""

    def serve(self, host: str, port: int) -> None:
        pass

    def follow(self, read_view: Any) -> None:
        pass


def test_export_on_a_name_that_starts_with_127_is_said_to_be_reachable(
    names, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--export 127.example.com:9464` listens on a public address: the banner must not say
    "loopback only" (it did: the exporter had its own rule, a "127." prefix)."""
    from specmon.runtime.exporter import start_exporter

    names["127.example.com"] = ["93.184.215.14"]
    monkeypatch.setattr("specmon.runtime.exporter.Exporter", _NotServing)
    start_exporter(("127.example.com", 9464), lambda: None, "watch")
    start_exporter(("127.0.0.1", 9464), lambda: None, "watch")
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "specmon watch: serving /metrics on http://127.example.com:9464/metrics "
        "(NOT loopback: reachable from the network)",
        "specmon watch: serving /metrics on http://127.0.0.1:9464/metrics (loopback only)",
    ]
