"""The Kubernetes WebSocket channel protocol (`channel.k8s.io` and its v2..v5 versions), as the
kubelet speaks it for exec, attach and port-forward.

- Every binary message starts with a channel byte: 0 stdin, 1 stdout, 2 stderr, 3 the error
  channel (a JSON metav1.Status from v4 on, plain text before), 4 terminal resize; v5 adds 255,
  a client's "close this channel" signal (`[255, channel]`), which is how stdin reaches EOF.
- Port-forward over WebSockets uses channel 2i for port i's data and 2i+1 for its errors; the
  server opens each with the port number, two bytes little-endian.
- `exit_status` words a non-zero exit as the kubelet does (reason NonZeroExitCode, the code in
  details.causes), which kubectl prints as `command terminated with exit code N`.

Pure; called by `kubeletserver.py`.
"""

from __future__ import annotations

import json
import struct

STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE = 255
V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
# What the kubelet accepts, newest first; the client's order picks among them.
EXEC_PROTOCOLS = (V5, V4, "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io")
PORT_FORWARD_PROTOCOLS = (V4, "portforward.k8s.io")
# kubectl's port-forward since 1.31: SPDY/3.1 frames carried in binary messages (`spdy.py`).
SPDY_TUNNEL = "SPDY/3.1+portforward.k8s.io"


def frame(channel: int, data: bytes) -> bytes:
    return bytes([channel]) + data


def port_header(port: int) -> bytes:
    return struct.pack("<H", port)


def structured_status(protocol: str) -> bool:
    """From v4 on, the error channel carries a JSON Status (with the exit code) rather than text."""
    return protocol in (V5, V4)


def success() -> bytes:
    return json.dumps({"metadata": {}, "status": "Success"}).encode()


def exit_status(argv: list[str], code: int) -> bytes:
    shown = "[" + " ".join(argv) + "]"
    return json.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command {shown}, exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
        }
    ).encode()


def internal_error(message: str) -> bytes:
    return json.dumps(
        {
            "metadata": {},
            "status": "Failure",
            "message": f"Internal error occurred: {message}",
            "reason": "InternalError",
            "details": {"causes": [{"message": message}]},
            "code": 500,
        }
    ).encode()
