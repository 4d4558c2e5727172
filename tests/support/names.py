"""Object names that break a client pasting them into a path raw, for the client and the
garbage collector's end-to-end tests (tests/e2e/test_kubeclient.py, test_hostile_names.py)."""

from __future__ import annotations

# What kube-apiserver lets into an ownerReference name (anything but empty): each must reach
# the server as itself. "victim?x=1", "%76ictim", "victim#x" and "victim/" each named the
# object `victim` when pasted into the path raw.
HOSTILE_NAMES = [
    "victim?x=1",
    "victim#x",
    "%76ictim",
    "victim%2F",
    "victim/",
    "victim/status",
    "vic tim",
    "víctim",
    "被害者",
    "victim\r\nX-Injected: 1",
    "victim\x00",
    ".",
    "..",
    "x HTTP/1.1\r\nHost: h\r\n\r\nDELETE /api/v1/namespaces/default/pods/victim",
]
