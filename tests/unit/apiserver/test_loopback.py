"""The credential-free API answers only requests that name it by loopback and its own port
(a browser page that rebinds its own name to 127.0.0.1 sends its name in Host)."""

from __future__ import annotations

from unittest import mock

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from kcm_apiserver import server

PORT = 8001


def request(host: str | None) -> web.Request:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda name, default=None: (
        ("127.0.0.1", PORT) if name == "sockname" else default
    )
    headers = {"Host": host} if host is not None else {}
    return make_mocked_request("GET", "/api/v1/secrets", headers=headers, transport=transport)


@pytest.mark.parametrize(
    ("host", "answered"),
    [
        (f"127.0.0.1:{PORT}", True),
        (f"localhost:{PORT}", True),
        (f"[::1]:{PORT}", True),
        (f"127.1.2.3:{PORT}", True),
        (None, True),  # no browser sends a request without Host
        (f"attacker.example:{PORT}", False),
        ("attacker.example", False),
        (f"127.0.0.1:{PORT + 1}", False),
        ("127.0.0.1", False),  # port 80, not this one
        (f"10.0.0.1:{PORT}", False),
        (f"localhost.attacker.example:{PORT}", False),
        ("127.0.0.1:notaport", False),
    ],
)
def test_names_loopback(host: str | None, answered: bool) -> None:
    assert server._names_loopback(request(host)) is answered
