"""Who may say what on the bus: the NATS identities of kcm and the one table of their permissions.

Every configuration renders nats-server's `authorization` block from here: `kcm dev` (through
`natsd.write_config`), and `kcm nats-auth`, the step that makes the credentials of the compose
stack (its `nats-auth` service) and of k8s/ (docs/deploying.md). Each identity is an nkey: the
server holds only public keys, each service its own seed file (mode 0600), passed with
`--nats-nkey-seed`. An anonymous client is refused.

The table is the section "the table" below: one function per kind of identity (`watcher`,
`coordinator`, `controllers`, `consumer`), each listing the subjects it publishes to and
subscribes on, the JetStream API calls (`$JS.API.<op>.<stream>`) included, from what the
service's code does (docs/bus.md "Who may publish what"). A new subject, stream or KV bucket
is one line in the function of each identity that uses it (`_declare`, `_look` take any
stream name, `KV_<bucket>` included). On the object stream and the grants bucket a service
makes consumers of its identity's own names only (`Permissions.own_consumers`,
`kcm_shared.bus.consumers`); no identity may make a consumer of any other name anywhere.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import nkeys  # type: ignore[import-untyped]
from kcm_shared import runtime
from kcm_shared.bus import subjects, wire
from kcm_shared.runtime import controllerflags

from kcm_cli import pki
from kcm_cli.controllers import BUILTIN

# nats-py's default reply subjects, the third parties' (`consumer`); every kcm client replies
# under its identity's own prefix (`subjects.inbox_prefix`). Only allow_responses lets a
# client publish to an inbox.
INBOX = "_INBOX.>"
OBJECTS = wire.OBJECTS_STREAM
GRANTS = f"KV_{wire.GRANTS_BUCKET}"
SEED_SUFFIX = ".nk"
SEED_KEY = "nkey"  # a seed's file name in a directory of its own (compose's volumes, k8s/'s Secrets)
AUTH_CONF = "auth.conf"
# kube-apiserver takes request bodies up to 3 MiB and etcd values up to about 1.5 MiB; an
# object as JSON in a watch event plus our headers stays well under this.
MAX_PAYLOAD = 8 * 1024 * 1024
# What the server buffers for one slow client before cutting it off: several full messages.
MAX_PENDING = 64 * 1024 * 1024
# The consumers the read-only identity may have on the object stream at once, by these names
# only: it can neither touch another identity's consumers nor make more than this many.
CONSUMER_NAMES = tuple(f"consumer-{i}" for i in range(16))


@dataclass(frozen=True)
class Permissions:
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    # May answer the requests it receives (publish to their reply subjects), and only those.
    responses: bool = False
    # Subscribes to its own inbox, `subjects.inbox_prefix` of its public key (what
    # `natsconn.connect` sets).
    own_inbox: bool = True
    # What it may do (`CONSUMER.CREATE`, ...) with consumers of its own names on the streams
    # `consumer_streams`, `subjects.consumer_names` of its inbox (`kcm_shared.bus.consumers`
    # names them so), and with no other consumer there.
    own_consumers: tuple[str, ...] = ()
    consumer_streams: tuple[str, ...] = (OBJECTS,)

    def render(self, public_key: str) -> dict[str, object]:
        subscribe = list(self.subscribe)
        inbox = subjects.inbox_prefix(public_key)
        if self.own_inbox:
            subscribe.append(inbox + ".>")
        publish = list(self.publish)
        for name in subjects.consumer_names(inbox) if self.own_consumers else ():
            for stream in self.consumer_streams:
                publish += [_api(op, f"{stream}.{name}") for op in self.own_consumers]
        # An empty allow list would mean "anything" to nats-server: deny everything instead.
        out: dict[str, object] = {
            "publish": {"allow": publish} if publish else {"deny": [">"]},
            "subscribe": {"allow": subscribe} if subscribe else {"deny": [">"]},
        }
        if self.responses:
            out["allow_responses"] = True
        return out


def _api(op: str, stream: str, *, sub: bool = False) -> str:
    return f"$JS.API.{op}.{stream}" + (".>" if sub else "")


def _declare(stream: str) -> list[str]:
    """Create the stream, or bring it to the caller's configuration (`natsconn._ensure`): its
    owner's alone, since an update may add any subject no stream holds yet to the stream."""
    return [*_create(stream), _api("STREAM.UPDATE", stream)]


def _create(stream: str) -> list[str]:
    """Create the stream when missing (any service may start first), never update it."""
    return [_api("STREAM.CREATE", stream), _api("STREAM.INFO", stream)]


def _look(stream: str) -> list[str]:
    """A stream's info, direct gets and flow control (the replies its push consumers ask
    for); no consumer, nothing that changes or deletes what the stream holds."""
    out = [_api("STREAM.INFO", stream), _api("DIRECT.GET", stream), _api("DIRECT.GET", stream, sub=True)]
    return [*out, _api("STREAM.MSG.GET", stream), f"$JS.FC.{stream}.>"]


def _named_consumers(stream: str, names: Sequence[str]) -> list[str]:
    """Consumers of these names only (created by name: nats-server takes a name in the body
    of a nameless `CONSUMER.CREATE` too, and then updates whichever consumer has it), pulls
    from them and their acks; the stream's info, direct gets, flow control."""
    out = _look(stream)
    for name in names:
        named = f"{stream}.{name}"
        out += [_api("CONSUMER.CREATE", named), _api("CONSUMER.CREATE", named, sub=True)]
        out += [_api(op, named) for op in ("CONSUMER.INFO", "CONSUMER.DELETE", "CONSUMER.MSG.NEXT")]
        out.append(f"$JS.ACK.{named}.>")
    return out


def _consume_work(stream: str) -> list[str]:
    """A durable pull consumer per partition (`workqueue.durable`), acked one message at a time;
    deleted only to be declared again (one an older kcm kept on disk)."""
    return [
        _api("CONSUMER.CREATE", stream, sub=True),
        _api("CONSUMER.DURABLE.CREATE", stream, sub=True),
        _api("CONSUMER.INFO", stream, sub=True),
        _api("CONSUMER.DELETE", stream, sub=True),
        _api("CONSUMER.MSG.NEXT", stream, sub=True),
        f"$JS.ACK.{stream}.>",
    ]


def _kv(bucket: str) -> str:
    """Writes (puts, revision-checked updates, deletes) to every key of a KV bucket."""
    return f"$KV.{bucket}.>"


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


# --- the table -----------------------------------------------------------------------------


def watcher() -> Permissions:
    """Publishes every object state and progress marker, and answers sync requests."""
    publish = [subjects.OBJECTS_FILTER, subjects.PROGRESS_FILTER, *_declare(OBJECTS), *_look(OBJECTS)]
    publish.append(subjects.health_filter("watcher"))
    # Its reads of the stream before a relist: pull consumers (`kcm_watcher.resourcewatch`).
    pulls = ("CONSUMER.CREATE", "CONSUMER.MSG.NEXT", "CONSUMER.DELETE")
    return Permissions(_unique(publish), (wire.WATCHER_SYNC,), responses=True, own_consumers=pulls)


def coordinator() -> Permissions:
    """Answers the controllers' membership heartbeats, hears every service's health beats, and
    publishes its own beat and (leading) its verdicts for the standbys."""
    publish = [subjects.health_filter("coordinator"), wire.COORD_STATUS]
    # The grants it gives, kept where its successor finds them (docs/bus.md "Coordinator failover").
    # Its restore reads them through pull consumers of its own names (`consumers.read_last`).
    publish += [_kv(wire.GRANTS_BUCKET), *_declare(GRANTS), *_look(GRANTS)]
    publish += _declare(wire.DLQ_STREAM)  # the owner of the dead letters' stream
    pulls = ("CONSUMER.CREATE", "CONSUMER.MSG.NEXT", "CONSUMER.DELETE")
    subscribe = (subjects.COORD_FILTER, subjects.health_filter())
    return Permissions(
        _unique(publish), subscribe, responses=True, own_consumers=pulls, consumer_streams=(GRANTS,)
    )


def controllers(names: Sequence[str]) -> Permissions:
    """A process running the controllers `names` (canonical names): their work and dead letters
    only, the object stream read-only, heartbeats to the coordinator, sync requests to the watcher."""
    publish = [subjects.heartbeat_filter(names), wire.WATCHER_SYNC]
    # The caches declare the object stream and the queues the dead letters' one too (any
    # service may start first); create only: updating them is the watcher's and the coordinator's.
    publish += [*_create(OBJECTS), *_look(OBJECTS), *_create(wire.DLQ_STREAM)]
    # A replica renews its own grant while no coordinator answers (revision-checked by
    # JetStream), under the scope of its controllers (`membership.grant_key`).
    publish += [f"$KV.{wire.GRANTS_BUCKET}.{subjects.scope_token(names)}.*"]
    publish += [*_create(GRANTS), *_look(GRANTS)]  # renewals need no consumer
    for name in names:
        stream = subjects.work_stream(name)
        publish += [subjects.work_filter(name), subjects.dlq_subject(name)]
        publish += [*_create(stream), *_consume_work(stream)]
    # Its caches' push consumers (`kcm_shared.runtime.cache`).
    return Permissions(_unique(publish), (), own_consumers=("CONSUMER.CREATE", "CONSUMER.DELETE"))


def consumer() -> Permissions:
    """A third party's read-only view: the object stream and live object messages, through its
    own consumers (`CONSUMER_NAMES`), nothing else."""
    publish = ["$JS.API.INFO", "$JS.API.STREAM.NAMES", *_named_consumers(OBJECTS, CONSUMER_NAMES)]
    # nats-py's default inbox for a third party's client, its own too for one made with
    # `natsconn.connect`; no service replies under `_INBOX.`.
    return Permissions(_unique(publish), (subjects.OBJECTS_FILTER, subjects.PROGRESS_FILTER, INBOX))


# --- credentials ---------------------------------------------------------------------------


def new_seed() -> bytes:
    return bytes(nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER))


def public_key(seed: bytes) -> str:
    return str(nkeys.from_seed(bytearray(seed)).public_key.decode())


def write_private(path: Path, data: bytes) -> None:
    """Write a file only its owner can read, created so from the start (never briefly wider)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def seed_file(directory: Path, identity: str, *, apart: bool = False) -> Path:
    """The identity's seed file, made once: later runs keep the same identity.

    `DIR/<identity>.nk`, or with `apart` `DIR/<identity>/nkey`: a directory per identity, which
    its service mounts alone (compose gives each its own volume)."""
    path = directory / identity / SEED_KEY if apart else directory / f"{identity}{SEED_SUFFIX}"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(path, new_seed() + b"\n")
    return path


def authorization(
    directory: Path, identities: dict[str, Permissions], *, apart: bool = False
) -> dict[str, object]:
    """nats-server's `authorization` block for `identities`, making their seeds when missing."""
    users = []
    for identity, perms in identities.items():
        key = public_key(seed_file(directory, identity, apart=apart).read_bytes().strip())
        users.append({"nkey": key, "permissions": perms.render(key)})
    return {"users": users}


def deployment_identities(specs: Sequence[runtime.Spec]) -> dict[str, Permissions]:
    """The identities of compose and k8s/: one per service, one per controller (by alias)."""
    out = {"watcher": watcher(), "coordinator": coordinator(), "consumer": consumer()}
    out.update({spec.alias: controllers([spec.name]) for spec in specs})
    return out


# --- `kcm nats-auth` -----------------------------------------------------------------------


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "nats-auth",
        help="make the NATS credentials of a deployment (compose, k8s/): seeds and auth.conf",
    )
    p.add_argument("--out", type=Path, required=True, help="directory for the files (made mode 0700)")
    p.add_argument(
        "--seeds",
        type=Path,
        metavar="DIR",
        help="each seed in DIR/<identity>/nkey, a directory per identity (compose's volumes), not in OUT",
    )
    p.add_argument("--controllers", default="*", help="which controllers get an identity (*,-foo,bar)")
    p.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE:ATTR",
        help="also an identity for this controller of your own (repeatable; as `kcm controller --plugin`)",
    )
    p.add_argument(
        "--apiserver-token",
        type=Path,
        metavar="FILE",
        help="also make a bearer token here (compose's apiserver)",
    )
    p.add_argument(
        "--pki",
        type=Path,
        metavar="DIR",
        help="also make the cluster's identity files here, once (compose's apiserver and token controller)",
    )
    p.add_argument(
        "--k8s-secrets",
        metavar="NAMESPACE",
        help="also write OUT/k8s-secrets.yaml: the Secrets k8s/ mounts, in NAMESPACE (kcm-system)",
    )
    p.set_defaults(main=_main)


def _main(args: argparse.Namespace, words: list[str]) -> int:
    for path in run(args):
        print(path)
    return 0


def run(args: argparse.Namespace) -> list[Path]:
    """`kcm nats-auth`: the controllers chosen and the plugins named get an identity each."""
    specs = controllerflags.select(BUILTIN, args.controllers) + [
        controllerflags.load_plugin(p) for p in args.plugin
    ]
    written = generate(args.out, specs, args.apiserver_token, args.k8s_secrets, args.seeds)
    if args.pki is not None:
        identity = pki.ensure(args.pki)
        written += [identity.ca_cert, identity.sa_key, identity.sa_pub]
    return written


def generate(
    out: Path,
    specs: Sequence[runtime.Spec],
    apiserver_token: Path | None = None,
    k8s_namespace: str | None = None,
    seeds: Path | None = None,
) -> list[Path]:
    """Seeds (kept when present; in `out`, or a directory each under `seeds`) and `auth.conf`
    for nats-server's `include`; optionally a token and the Secrets of k8s/. Returns the files
    written."""
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    identities = deployment_identities(specs)
    where, apart = (out, False) if seeds is None else (seeds, True)
    block = authorization(where, identities, apart=apart)
    conf = f"authorization: {json.dumps(block, indent=2)}\n"
    write_private(out / AUTH_CONF, conf.encode())
    written = [out / AUTH_CONF, *(seed_file(where, identity, apart=apart) for identity in identities)]
    if apiserver_token is not None:
        if not apiserver_token.exists():
            apiserver_token.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_private(apiserver_token, os.urandom(32).hex().encode() + b"\n")
        written.append(apiserver_token)
    if k8s_namespace is not None:
        path = out / "k8s-secrets.yaml"
        secrets = k8s_secrets(where, identities, conf, k8s_namespace, apart=apart)
        write_private(path, json.dumps(secrets, indent=2).encode())
        written.append(path)
    return written


def secret_name(identity: str) -> str:
    """The Secret k8s/ mounts for `identity`: key `nkey`, the seed."""
    return f"kcm-nats-{identity}"


SERVER_SECRET = "kcm-nats-auth"  # key auth.conf, included by the server's nats.conf


def k8s_secrets(
    out: Path, identities: dict[str, Permissions], conf: str, namespace: str, *, apart: bool = False
) -> dict[str, object]:
    """A List of Secrets (JSON is YAML): the server's auth.conf and one seed per identity.

    As `data` (base64), never `stringData`, and to be created with `kubectl create -f` or
    server-side apply (docs/deploying.md): client-side `kubectl apply` would copy the whole
    manifest, seeds included, into the annotation `kubectl.kubernetes.io/last-applied-configuration`.
    """

    def secret(name: str, data: dict[str, str]) -> dict[str, object]:
        meta = {"name": name, "namespace": namespace, "labels": {"app.kubernetes.io/part-of": "kcm"}}
        encoded = {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", "data": encoded}

    items = [secret(SERVER_SECRET, {AUTH_CONF: conf})]
    for identity in identities:
        seed = seed_file(out, identity, apart=apart).read_text()
        items.append(secret(secret_name(identity), {SEED_KEY: seed}))
    return {"apiVersion": "v1", "kind": "List", "items": items}
