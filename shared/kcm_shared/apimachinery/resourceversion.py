"""Comparing Kubernetes resourceVersions, for the watcher and the caches built from its stream.

kube-apiserver documents resourceVersions as opaque, but its (etcd revisions) and the
embedded API server's are integers, and ordering them is what keeps the bus from going back
in time. Every comparison here orders only numeric versions and says so when it cannot.
"""

from __future__ import annotations


def number(rv: str) -> int | None:
    """The resourceVersion as an integer, or None when it is opaque (or empty)."""
    return int(rv) if rv.isdigit() else None


def newer(rv: str, than: str) -> bool | None:
    """Whether `rv` is strictly newer than `than`; None when either is opaque."""
    a, b = number(rv), number(than)
    if a is None or b is None:
        return None
    return a > b


def older(rv: str, than: str) -> bool:
    """Whether `rv` is strictly older than `than`; never for opaque versions, where stream
    order is all there is."""
    a, b = number(rv), number(than)
    return a is not None and b is not None and a < b
