"""Consumers a service makes on the object stream, under names of its identity's own.

- Every consumer is named `subjects.consumer_names(prefix)[slot]`: the client's inbox prefix
  (its identity, `natsconn.connect` sets it) digested, and a slot. nats-server lets an identity
  create, pull from and delete consumers of its own names only (`kcm_cli.natsauth`; a nameless
  create is refused), so no identity can read, change or delete another identity's consumer
  (docs/bus.md "Who may publish what").
- `create(nc, stream, config)` takes a free name: it creates with the action `create`, which
  nats-server refuses (10148, "consumer already exists") when the name is taken, by another
  replica sharing the identity or by a leftover of a process that died (gone after its
  `inactive_threshold`); it then tries the next slot. The first slot tried is random, so
  replicas starting together rarely meet, and names this process holds are skipped without a
  request. Each consumer's metadata carries a fresh holder token, so two identical
  configurations (pull consumers have no deliver subject) never share one consumer.
- `delete(nc, stream, name)` deletes one and frees its name for this process; `release(nc,
  name)` frees the name of one left to expire (the connection is down).
- `read_last(nc, stream, filters, ...)`: the last message of every subject under `filters`,
  read once through a pull consumer of ours, deleted after. KV buckets are read so too (the
  coordinator's restore of `kcm-grants`): nats-py's own key listing and watches make ordered
  consumers, which it names itself, so they could not be confined to an identity's names.

Called by the controllers' caches (`kcm_shared.runtime.cache`), the watcher's reads of its
own stream (`kcm_watcher.resourcewatch`) and the coordinator's of the grants bucket.
"""

from __future__ import annotations

import contextlib
import json
import random
import weakref
from collections.abc import Sequence

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import APIError
from nats.nuid import NUID

from kcm_shared.bus import subjects

# nats-server's answers to a create (action "create") of a name another consumer holds, and to
# a delete of a consumer that is gone.
NAME_TAKEN = 10148
NOT_FOUND = 10014
HOLDER = "kcm.holder"  # the metadata key of the holder token
_TIMEOUT = 5.0  # seconds for JetStream's answer to one request, as nats-py's own default
_READ_BATCH = 1000  # messages per pull of `read_last`
_READ_TIMEOUT = 10.0  # seconds for one pull

_nuid = NUID()
# Names each client's consumers hold now, skipped by the next create without asking the server.
_held: weakref.WeakKeyDictionary[Client, set[str]] = weakref.WeakKeyDictionary()


class NoFreeName(nats.errors.Error):
    """Every name of the identity is taken: more consumers than `subjects.CONSUMER_SLOTS`."""


def names(nc: Client) -> list[str]:
    """The consumer names of `nc`'s identity: from the prefix its replies come under."""
    return subjects.consumer_names(nc.new_inbox().rpartition(".")[0])


async def create(nc: Client, stream: str, config: api.ConsumerConfig) -> api.ConsumerInfo:
    """Create a consumer of `config` (its name ignored) under a free name of ours; its info."""
    held = _held.setdefault(nc, set())
    own = names(nc)
    body = config.as_dict()
    body["metadata"] = {**(config.metadata or {}), HOLDER: _nuid.next().decode()}
    start = random.randrange(len(own))
    for i in range(len(own)):
        name = own[(start + i) % len(own)]
        if name in held:
            continue
        held.add(name)
        request = {"stream_name": stream, "config": {**body, "name": name}, "action": "create"}
        try:
            reply = await nc.request(
                f"{api.DEFAULT_PREFIX}.CONSUMER.CREATE.{stream}.{name}",
                json.dumps(request).encode(),
                timeout=_TIMEOUT,
            )
            answer = json.loads(reply.data)
            error = answer.get("error")
            if error is None:
                info: api.ConsumerInfo = api.ConsumerInfo.from_response(answer)
                return info
            if error.get("err_code") != NAME_TAKEN:
                APIError.from_error(error)  # raises the error's own class (503: transient)
        except BaseException:
            held.discard(name)
            raise
        held.discard(name)
    raise NoFreeName(f"all {len(own)} consumer names of this identity on {stream} are taken")


def release(nc: Client, name: str) -> None:
    """Give `name` out again, its consumer deleted or left to expire (a consumer that outlives
    this goes after its inactive_threshold, and a create meets it as taken until then)."""
    _held.get(nc, set()).discard(name)


async def delete(nc: Client, stream: str, name: str) -> None:
    """Delete our consumer `name` and `release` its name, whatever the server answers."""
    release(nc, name)
    reply = await nc.request(f"{api.DEFAULT_PREFIX}.CONSUMER.DELETE.{stream}.{name}", b"", timeout=_TIMEOUT)
    error = json.loads(reply.data).get("error")
    if error is not None and error.get("err_code") != NOT_FOUND:
        APIError.from_error(error)


async def read_last(
    nc: Client, stream: str, filters: Sequence[str], *, headers_only: bool = False
) -> list[Msg]:
    """The last message of each subject of `stream` under `filters`, in stream order, read by a
    pull consumer of our own names (`create`) that is deleted after."""
    config = api.ConsumerConfig(
        deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
        ack_policy=api.AckPolicy.NONE,
        headers_only=headers_only,
        mem_storage=True,
        inactive_threshold=30.0,
        filter_subjects=list(filters),
    )
    info = await create(nc, stream, config)
    sub = await nc.jetstream().pull_subscribe_bind(info.name, stream=stream)
    out: list[Msg] = []
    try:
        remaining = info.num_pending or 0
        while remaining > 0:
            for msg in await sub.fetch(min(remaining, _READ_BATCH), timeout=_READ_TIMEOUT):
                out.append(msg)
                remaining = msg.metadata.num_pending
    finally:
        await sub.unsubscribe()
        # Else the server drops it after its inactive_threshold.
        with contextlib.suppress(nats.errors.Error, TimeoutError):
            await delete(nc, stream, info.name)
    return out
