"""The WebSocket channel protocol's frames and statuses (kcm_simulator.wschannel)."""

from __future__ import annotations

import json

from kcm_simulator import kubeletserver, wschannel


def test_frames_lead_with_their_channel_and_ports_are_little_endian() -> None:
    assert wschannel.frame(wschannel.STDOUT, b"hi") == b"\x01hi"
    assert wschannel.port_header(8080) == b"\x90\x1f"
    assert wschannel.structured_status(wschannel.V4) and not wschannel.structured_status("channel.k8s.io")


def test_a_non_zero_exit_carries_its_code_as_kubectl_reads_it() -> None:
    status = json.loads(wschannel.exit_status(["sh", "-c", "exit 3"], 3))
    assert status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert json.loads(wschannel.success()) == {"metadata": {}, "status": "Success"}


def test_the_port_forward_responder_names_pod_and_port() -> None:
    answer = kubeletserver.http_answer("ns", "web", 80, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    head, body = answer.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 200 OK") and b"Content-Length: 19" in head
    assert body == b"pod ns/web port 80\n"
    assert kubeletserver.http_answer("ns", "web", 80, b"HEAD / HTTP/1.1\r\n\r\n").endswith(b"\r\n\r\n")
