"""NATS subjects of the bus, built and parsed, and the reversible token encoding they rely on.

Every service and third-party subscriber builds and parses subjects through this module, so
the scheme in docs/bus.md has one implementation. The split with `kcm_shared.bus.wire`: wire
holds every name (subject prefixes, stream names, headers), this module the functions and
subscription filters built from wire's prefixes, and the grammar of the tokens after them.
Kubernetes names may hold characters that are not legal in a NATS token (`.` above all);
`encode_token` escapes them as `~XX` per UTF-8 byte.

Bounded: a token is at most `MAX_TOKEN_BYTES` long. A longer value (an RBAC name has no length
limit) becomes a digest token, `~H` and the base32 of its SHA-256, which escaping never makes
(`~` is always followed by two hex digits); its message carries the full key in the `Kcm-Key`
header. `parse_object_subject` and `key_of_work_subject` take that header and check it
against the subject. nats-server closes a connection whose control line (subject included)
passes 4,096 bytes; with this bound every subject of the bus stays under about 1,700.

`replayed(reply)` tells a message JetStream delivered from a stream from a client's publish:
a push consumer may name any deliver subject (docs/bus.md "Known limits"), so the core
subscribers of health beats, verdicts and sync requests drop what it says.

`inbox_prefix(public_key)`: the reply subjects of a service connected with an nkey, its own
(`natsconn.connect` sets it, `kcm_cli.natsauth` lets the identity subscribe there alone), so
no identity sees another's replies or JetStream deliveries (docs/bus.md "Who may publish what").
`consumer_names(inbox)`: the names of the consumers that identity may make on the object
stream, under a prefix of its own, so none can touch another identity's consumers.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from kcm_shared.apimachinery import gvr
from kcm_shared.bus import wire

NONE = "_"  # the namespace token of cluster-scoped objects and keys
CORE = gvr.CORE  # the group token of the legacy core group ""

# Everything under one prefix: what a stream holds, or a subscription or permission covers.
OBJECTS_FILTER = f"{wire.OBJECT_PREFIX}.>"
PROGRESS_FILTER = f"{wire.PROGRESS_PREFIX}.>"
DLQ_FILTER = f"{wire.DLQ_PREFIX}.>"
COORD_FILTER = f"{wire.COORD_PREFIX}.>"
HEARTBEAT_FILTER = f"{wire.COORD_HEARTBEAT}.*.*"
_JS_ACK = "$JS.ACK."  # the reply subject of every message a JetStream consumer delivers

_OBJECT = wire.OBJECT_PREFIX.split(".")
_PROGRESS = wire.PROGRESS_PREFIX.split(".")
_PROGRESS_START = wire.PROGRESS_PREFIX + "."
_WORK = wire.WORK_PREFIX.split(".")

_PLAIN = frozenset(chr(c) for c in range(0x21, 0x7F)) - set(".*>~")
# A group name escapes to at most 505 bytes: resource tokens never become digests.
MAX_TOKEN_BYTES = 512
DIGEST = "~H"
_HEX = frozenset("0123456789ABCDEFabcdef")


def encode_token(text: str) -> str:
    """Escape `text` into one legal NATS token; `decode_token` reverses it exactly, unless the
    escaped value passes MAX_TOKEN_BYTES: then it is a digest token (`is_digest`)."""
    if text and len(text) <= MAX_TOKEN_BYTES and _PLAIN.issuperset(text):  # the common case, in C
        return text
    if not text:
        raise ValueError("a subject token cannot be empty")
    out: list[str] = []
    for ch in text:
        if ch in _PLAIN:
            out.append(ch)
        else:
            out.extend(f"~{b:02X}" for b in ch.encode())
    token = "".join(out)
    if len(token) > MAX_TOKEN_BYTES:
        return DIGEST + base64.b32encode(hashlib.sha256(text.encode()).digest()).decode().rstrip("=")
    return token


def is_digest(token: str) -> bool:
    return token.startswith(DIGEST)


def decode_token(token: str) -> str:
    """The value of a token; ValueError for a digest token (its value is in a header)."""
    if "~" not in token:
        return token
    if is_digest(token):
        raise ValueError(f"a digest token: the value is in the {wire.KEY} header")
    raw = bytearray()
    i = 0
    while i < len(token):
        if token[i] == "~":
            try:
                raw.append(int(token[i + 1 : i + 3], 16))
            except ValueError:
                raise ValueError(f"bad escape in subject token {token!r}") from None
            i += 3
        else:
            raw.extend(token[i].encode())
            i += 1
    return raw.decode()


def resource_tokens(res: gvr.Resource) -> str:
    """`<group>.<version>.<resource>`, each an encoded token: the resource part of a subject."""
    return f"{encode_token(res.group or CORE)}.{encode_token(res.version)}.{encode_token(res.resource)}"


def _after(prefix: list[str], subject: str, count: int, what: str) -> list[str]:
    """The `count` tokens that follow `prefix` in `subject`; ValueError if it has other ones."""
    parts = subject.split(".")
    if len(parts) != len(prefix) + count or parts[: len(prefix)] != prefix:
        raise ValueError(f"not {what}: {subject!r}")
    return parts[len(prefix) :]


def _ns_token(namespace: str | None) -> str:
    return encode_token(namespace) if namespace else NONE


def object_subject(res: gvr.Resource, namespace: str | None, name: str) -> str:
    return f"{wire.OBJECT_PREFIX}.{resource_tokens(res)}.{_ns_token(namespace)}.{encode_token(name)}"


def object_filter(res: gvr.Resource) -> str:
    """Every object of one resource."""
    return f"{wire.OBJECT_PREFIX}.{resource_tokens(res)}.>"


def progress_subject(res: gvr.Resource) -> str:
    return f"{wire.PROGRESS_PREFIX}.{resource_tokens(res)}"


def is_progress_subject(subject: str) -> bool:
    """Whether a subject of the object stream is a progress marker's (else an object's)."""
    return subject.startswith(_PROGRESS_START)


def parse_progress_subject(subject: str) -> gvr.Resource:
    return _resource_of(_after(_PROGRESS, subject, 3, "a progress subject"))


def _resource_of(tokens: list[str]) -> gvr.Resource:
    group = decode_token(tokens[0])
    return gvr.Resource("" if group == CORE else group, decode_token(tokens[1]), decode_token(tokens[2]))


@dataclass(frozen=True, slots=True)
class ObjectSubject:
    resource: gvr.Resource
    namespace: str  # "" when cluster-scoped
    name: str


# Memoised: a cache parses each message's subject, and an object's subjects repeat (a pod's
# every change arrives on the same one); the parsed value is immutable.
@functools.lru_cache(maxsize=4096)
def parse_object_subject(subject: str, key: str | None = None) -> ObjectSubject:
    """`key`: the message's `Kcm-Key` header, read when the subject holds a digest token."""
    tokens = _after(_OBJECT, subject, 5, "an object subject")
    namespace, name = _names(tokens[3], tokens[4], key)
    return ObjectSubject(_resource_of(tokens[:3]), namespace, name)


def _names(ns_token: str, name_token: str, key: str | None) -> tuple[str, str]:
    """(namespace, name) of a subject's last two tokens; from `key` when either is a digest,
    which must encode to those very tokens."""
    if not (is_digest(ns_token) or is_digest(name_token)):
        return ("" if ns_token == NONE else decode_token(ns_token)), decode_token(name_token)
    if key is None:
        raise ValueError(f"a digest token without its {wire.KEY} header")
    namespace, name = split_key(key)
    if _ns_token(namespace) != ns_token or encode_token(name) != name_token:
        raise ValueError(f"the {wire.KEY} header {key[:100]!r} does not match the subject")
    return namespace, name


def needs_key(subject: str) -> bool:
    """Whether a message on `subject` must carry its key in the `Kcm-Key` header."""
    return DIGEST in subject


def partition_of(key: str, partitions: int) -> int:
    """Stable across processes and restarts (unlike hash()), so every replica agrees."""
    return zlib.crc32(key.encode()) % partitions


def work_stream(controller: str) -> str:
    return wire.WORK_STREAM_PREFIX + "".join(ch if ch.isalnum() else "_" for ch in controller.upper())


def work_filter(controller: str, partition: int | None = None) -> str:
    part = "*" if partition is None else str(partition)
    return f"{wire.WORK_PREFIX}.{encode_token(controller)}.{part}.>"


def split_key(key: str) -> tuple[str, str]:
    """`namespace/name` or `name` (cluster-scoped), as upstream's MetaNamespaceKeyFunc makes them."""
    namespace, sep, name = key.rpartition("/")
    return (namespace if sep else ""), name


def work_subject(controller: str, partition: int, key: str) -> str:
    namespace, name = split_key(key)
    return f"{wire.WORK_PREFIX}.{encode_token(controller)}.{partition}.{_ns_token(namespace)}.{encode_token(name)}"


def key_of_work_subject(subject: str, key: str | None = None) -> str:
    """`key`: the item's `Kcm-Key` header, read when the subject holds a digest token."""
    tokens = _after(_WORK, subject, 4, "a work subject")
    namespace, name = _names(tokens[2], tokens[3], key)
    return f"{namespace}/{name}" if namespace else name


def dlq_subject(controller: str) -> str:
    return f"{wire.DLQ_PREFIX}.{encode_token(controller)}"


def health_subject(service: str, instance: str) -> str:
    return f"{wire.HEALTH_PREFIX}.{encode_token(service)}.{encode_token(instance)}"


def health_filter(service: str | None = None) -> str:
    """The beats of every instance of `service`, or of every service."""
    return f"{wire.HEALTH_PREFIX}.{'*' if service is None else encode_token(service)}.*"


def scope_token(controllers: Iterable[str]) -> str:
    """The controllers a replica runs, as one token: a digest of their canonical names.

    A controller identity may heartbeat, and keep grants, under its own scope only
    (`kcm_cli.natsauth`), so the coordinator can tell a replica speaking for its own
    controllers from one speaking for others'.
    """
    names = "\n".join(sorted(set(controllers)))
    return hashlib.sha256(names.encode()).hexdigest()[:20]


def instance_token(instance: str) -> str:
    """A replica's instance name as a token legal both in a subject and as a KV key: every byte
    outside `[A-Za-z0-9_-]` as `=XX` (KV keys allow only `-/_=.` and alphanumerics)."""
    if not instance:
        raise ValueError("an instance name cannot be empty")
    return "".join(
        ch if (ch.isascii() and ch.isalnum()) or ch in "-_" else "".join(f"={b:02X}" for b in ch.encode())
        for ch in instance
    )


def parse_instance_token(token: str) -> str:
    """The instance name of `instance_token`; ValueError for anything it cannot have made."""
    raw = bytearray()
    i = 0
    while i < len(token):
        ch = token[i]
        if ch == "=":
            pair = token[i + 1 : i + 3]
            if len(pair) != 2 or not all(c in _HEX for c in pair):
                raise ValueError(f"bad escape in instance token {token!r}")
            raw.append(int(pair, 16))
            i += 3
        elif ch.isascii() and (ch.isalnum() or ch in "-_"):
            raw.append(ord(ch))
            i += 1
        else:
            raise ValueError(f"bad instance token {token!r}")
    if not raw:
        raise ValueError("empty instance token")
    return raw.decode()


def heartbeat_subject(controllers: Iterable[str], instance: str) -> str:
    return f"{wire.COORD_HEARTBEAT}.{scope_token(controllers)}.{instance_token(instance)}"


def heartbeat_filter(controllers: Iterable[str]) -> str:
    """The heartbeats of every replica running exactly `controllers`."""
    return f"{wire.COORD_HEARTBEAT}.{scope_token(controllers)}.*"


def parse_heartbeat_subject(subject: str) -> tuple[str, str]:
    """(scope token, instance name) of a heartbeat subject; ValueError for another subject."""
    prefix = wire.COORD_HEARTBEAT + "."
    scope, _, token = subject.removeprefix(prefix).partition(".")
    if not subject.startswith(prefix) or not scope or "." in token:
        raise ValueError(f"not a heartbeat subject: {subject!r}")
    return scope, parse_instance_token(token)


def replayed(reply: str | None) -> bool:
    """Whether a message came from a JetStream consumer (its reply is an ack subject), not
    from a client: no service publishes a beat, verdict or request with such a reply, and any
    identity that may create a push consumer can aim one at any core subject."""
    return (reply or "").startswith(_JS_ACK)


def inbox_prefix(public_key: str) -> str:
    """nats-py's `inbox_prefix` for the identity of nkey `public_key` (instead of `_INBOX`)."""
    return f"_INBOX_{public_key}"


# The consumers one identity may have on the object stream at once: every cache of every replica
# sharing it, and the leftovers of a process that died (gone after their inactive_threshold).
CONSUMER_SLOTS = 256


def consumer_prefix(inbox: str) -> str:
    """The consumer-name prefix of the identity replying under `inbox` (`inbox_prefix`, or
    nats-py's `_INBOX` for a client without an nkey): `kcm-` and 16 hex digits of its SHA-256."""
    return f"kcm-{hashlib.sha256(inbox.encode()).hexdigest()[:16]}"


def consumer_names(inbox: str) -> list[str]:
    """Every name the identity replying under `inbox` may give a consumer on the object stream:
    its prefix and a slot, `kcm-<digest>-<0..CONSUMER_SLOTS-1>`. NATS permissions match whole
    tokens only, so an identity's permissions list these names (`kcm_cli.natsauth`)."""
    prefix = consumer_prefix(inbox)
    return [f"{prefix}-{slot}" for slot in range(CONSUMER_SLOTS)]
