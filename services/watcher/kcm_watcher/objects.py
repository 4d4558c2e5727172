"""The watcher's pure logic: partial decoding of API bodies, message headers, and the relist diff.

`resourcewatch` calls it for every listed item and watch event. Bodies stay the bytes the
API server sent; only the few fields that name a message (kind, namespace, name, uid,
resourceVersion) are decoded, so publishing costs no re-encoding.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from kcm_shared.apimachinery import codec, resourceversion
from kcm_shared.bus import natsconn, wire

# Watch event types that are never published; the ones that are, with the message headers,
# are `kcm_shared.bus.wire`'s (the watch's ADDED, MODIFIED and DELETED go out as they come).
BOOKMARK, ERROR = "BOOKMARK", "ERROR"


# Lighter than kcm_shared.apimachinery.codec's views on purpose: every event of every resource goes
# through here, and only these fields are needed to name a message.
class HeadMeta(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""


class Head(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    metadata: HeadMeta = msgspec.field(default_factory=HeadMeta)
    kind: str = ""
    api_version: str = ""


class WatchLine(msgspec.Struct, frozen=True, gc=False):
    type: str
    object: msgspec.Raw


class ListMeta(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    resource_version: str = ""
    continue_: str = msgspec.field(default="", name="continue")


class ListPage(msgspec.Struct, frozen=True, gc=False, rename="camel"):
    items: list[msgspec.Raw] = msgspec.field(default_factory=list)
    metadata: ListMeta = msgspec.field(default_factory=ListMeta)
    kind: str = ""
    api_version: str = ""


# Each raises msgspec.DecodeError for any body it cannot take, one nested too deeply included.
decode_head = codec.bounded(msgspec.json.Decoder(Head).decode)
decode_line = codec.bounded(msgspec.json.Decoder(WatchLine).decode)
decode_page = codec.bounded(msgspec.json.Decoder(ListPage).decode)
decode_status = codec.bounded(msgspec.json.Decoder(dict[str, Any]).decode)


class TypeMeta:
    """Completes a list page's items to read as a watch event's would: with kind and apiVersion.

    Built-in lists omit both on their items; custom resources carry them already. Made once
    per page, so the fields are encoded once, not per item.
    """

    def __init__(self, list_kind: str, api_version: str) -> None:
        self._prefix = b""  # the fields as `{"kind":..,"apiVersion":..` (no closing brace)
        if list_kind.endswith("List"):
            fields = {"kind": list_kind[: -len("List")], "apiVersion": api_version}
            self._prefix = msgspec.json.encode(fields)[:-1]

    def complete(self, raw: bytes | msgspec.Raw, head: Head) -> bytes:
        body = bytes(raw)
        if head.kind or not self._prefix or not body.startswith(b"{"):
            return body
        second = body[1:2]
        if second == b"}" or second.isspace():
            rest = body[1:].lstrip()
            return self._prefix + (b"," + rest if not rest.startswith(b"}") else rest)
        return b"".join((self._prefix, b",", memoryview(body)[1:]))


def reached(rv: str, target: str) -> bool:
    """Whether resourceVersion `rv` is at or beyond `target` (as integers; opaque ones must match)."""
    a, b = resourceversion.number(rv), resourceversion.number(target)
    if a is None or b is None:
        return rv == target
    return a >= b


def is_stale(rv: str, published: str | None) -> bool:
    """An event older than what was already published for the object (a list page may run ahead
    of the list's resourceVersion, so the watch replays changes the list already showed)."""
    return published is not None and resourceversion.newer(rv, published) is False


def headers(event: str, head: Head) -> dict[str, str]:
    rv = head.metadata.resource_version
    return {wire.EVENT: event, wire.RESOURCE_VERSION: rv, wire.MSG_ID: f"{head.metadata.uid}:{rv}:{event}"}


def bodiless_tombstone(subject: str, rv: str) -> dict[str, str]:
    """Headers of a delete whose last state the stream lost: the body is empty, the uid unknown."""
    return {
        wire.EVENT: wire.DELETED,
        wire.RESOURCE_VERSION: rv,
        wire.MSG_ID: f"{subject}:{rv}:{wire.DELETED}",
    }


def ttl_of(event: str) -> float | None:
    return natsconn.TOMBSTONE_TTL if event == wire.DELETED else None


class Relist:
    """The diff of one relist against what the stream holds, fed one listed item at a time.

    `held` maps each subject the stream holds as a live object to its resourceVersion;
    `remembered` (same shape) what this watcher had published before the stream lost it,
    whose deletes a subscriber that kept following the stream still needs. With `republish`,
    every listed object is published again, whatever version the stream holds.
    """

    def __init__(
        self, held: Mapping[str, str], remembered: Mapping[str, str] | None = None, *, republish: bool = False
    ) -> None:
        self._held = held
        self._remembered = remembered or {}
        self._republish = republish
        self._listed: set[str] = set()

    def needs_sync(self, subject: str, rv: str) -> bool:
        """Record a listed object; True when the stream lacks it or holds another version."""
        self._listed.add(subject)
        return self._republish or self._held.get(subject) != rv

    def gone(self) -> list[str]:
        """Subjects held live (or remembered) that the list did not have: their deletes were missed."""
        return sorted(s for s in self._held.keys() | self._remembered.keys() if s not in self._listed)


def held_entry(msg_headers: Mapping[str, str] | None) -> str | None:
    """The resourceVersion of a stream message that stands for a live object, None for a tombstone
    or a progress marker."""
    if not msg_headers or msg_headers.get(wire.EVENT, wire.DELETED) == wire.DELETED:
        return None
    return msg_headers.get(wire.RESOURCE_VERSION, "")
