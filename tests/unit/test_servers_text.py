"""The servers table's text (ui.servers_text), shared by the app's dashboard and watch --once."""

from __future__ import annotations

import pytest

from specmon.ui.servers_text import short_name


@pytest.mark.parametrize(
    ("source", "width", "shown"),
    [
        ("http://127.0.0.1:8001", 16, "127.0.0.1:8001"),
        ("http://gpu-box-very-long-name.example.com:8001", 16, "gpu-box-ve…:8001"),
        ("http://gpu-box-very-long-name.example.com:8002", 16, "gpu-box-ve…:8002"),
        ("https://[fe80::1234:5678:9abc]:8000", 16, "[fe80::123…:8000"),
        ("http://averyveryverylonghostnamewithnoport.example", 16, "averyveryverylo…"),
    ],
)
def test_a_cut_address_keeps_its_port(source, width, shown):
    """Two servers on one long-named host stay apart: the host is cut, not the port."""
    assert short_name(source, width) == shown
    assert len(shown) <= width
