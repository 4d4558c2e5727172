"""`natsd.free_port`: ports for the children of `kcm dev` and the tests, away from source ports."""

from __future__ import annotations

import socket

from kcm_cli import natsd


def test_a_port_is_bindable_and_below_the_ephemeral_range() -> None:
    high = natsd._ephemeral_start()
    for _ in range(20):
        port = natsd.free_port()
        if high - natsd._LOW_PORT > 1000:
            assert natsd._LOW_PORT <= port < high
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_a_taken_port_is_never_returned() -> None:
    held = []
    try:
        for _ in range(30):
            port = natsd.free_port()
            s = socket.socket()
            s.bind(("127.0.0.1", port))
            held.append(s)
        assert len({s.getsockname()[1] for s in held}) == len(held)
    finally:
        for s in held:
            s.close()
