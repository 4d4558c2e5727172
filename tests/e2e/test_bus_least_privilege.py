"""Least privilege on the bus of `kcm dev` (issue 28): each test tries, as an identity's real
nats-py client, an attack an identity's permissions used to allow, and checks it fails.

One stack for the module (ReplicaSet and Deployment controllers, no nodes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from typing import Any

import nats.errors
from kcm_shared.bus import consumers, membership, subjects, wire
from kcm_watcher import syncserver
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api

from tests.conftest import KCM, wait_for
from tests.e2e import devstack
from tests.e2e.bus_identity import as_identity, connect, inbox, refused, seed, url
from tests.e2e.devstack import DevStack, stack_fixture

stack = stack_fixture("--nodes", "0", "--controllers", "replicaset,deployment")

# The identity of a replica of the ReplicaSet controller alone (`kcm dev` makes one per
# controller); the stack's own controllers process runs two controllers under another.
ATTACKER = "replicaset"


def victim(stack: DevStack) -> str:
    """The instance name of the stack's controllers process."""
    (member,) = stack.status()["members"]
    return str(member["instance"])


def sync_request(resource_version: str) -> bytes:
    body = {"group": "apps", "version": "v1", "resource": "replicasets", "resourceVersion": resource_version}
    return json.dumps(body).encode()


def test_a_sync_request_needs_a_resource_version_and_a_flood_is_refused(stack: DevStack) -> None:
    """Finding 8: an empty or opaque resourceVersion made the watcher relist; so did a flood."""

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for rv in ("", "opaque"):
            reply = json.loads((await nc.request(wire.WATCHER_SYNC, sync_request(rv), timeout=35)).data)
            out[f"rv {rv!r}"] = (reply["ok"], "resourceVersion" in reply.get("error", ""))
        replies = await asyncio.gather(
            *(nc.request(wire.WATCHER_SYNC, sync_request("1"), timeout=35) for _ in range(300))
        )
        answers = [json.loads(r.data) for r in replies]
        limited = [a for a in answers if a.get("error") == "too many sync requests"]
        out["some answered"] = any(a["ok"] for a in answers)
        out["the flood limited"] = len(limited) > 0 and all(a["retryAfter"] > 0 for a in limited)
        return out

    assert as_identity(stack, "controllers", body) == {
        "rv ''": (False, True),
        "rv 'opaque'": (False, True),
        "some answered": True,
        "the flood limited": True,
    }


def test_a_controller_cannot_say_goodbye_for_another_replica(stack: DevStack) -> None:
    """Finding 4: a forged goodbye made the coordinator free every partition of the victim."""
    instance = victim(stack)
    goodbye = json.dumps(
        {
            "service": "controllers",
            "instance": instance,
            "controllers": [],
            "held": {},
            "health": {},
            "depth": {},
        }
    ).encode()
    # The attacker's own heartbeat subject, naming the victim's instance.
    own = subjects.heartbeat_subject(["replicaset-controller"], instance)

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"unhealthy": []}
        out["the bare subject refused"] = await refused(nc, errors, wire.COORD_HEARTBEAT, goodbye)
        for _ in range(30):
            await nc.publish(wire.COORD_HEARTBEAT, goodbye)
            await nc.publish(own, goodbye)
            await nc.flush()
            await asyncio.sleep(0.1)
            healthy = await asyncio.to_thread(stack.healthy)
            if not healthy:
                out["unhealthy"].append(await asyncio.to_thread(stack.status))
        return out

    assert as_identity(stack, ATTACKER, body) == {"the bare subject refused": True, "unhealthy": []}
    assert "heartbeat dropped: it speaks for another replica" in stack.log("coordinator")


def test_a_bad_grant_entry_is_skipped_and_only_the_own_scope_is_writable(stack: DevStack) -> None:
    """Finding 5: one undecodable entry in kcm-grants kept every next leader restoring for ever."""
    own = membership.grant_key(["replicaset-controller"], "planted")

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        kv = await nc.jetstream(timeout=3).key_value(wire.GRANTS_BUCKET)
        out: dict[str, Any] = {}
        try:
            await kv.put("planted", b"{not json")
            out["a key outside its scope"] = "written"
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):  # a refused publish: no ack
            out["a key outside its scope"] = "refused"
        await kv.put(own, b"{not json")
        out["its own key"] = "written"
        return out

    assert as_identity(stack, ATTACKER, body) == {
        "a key outside its scope": "refused",
        "its own key": "written",
    }
    # The next leader restores from the bucket, bad entry and all.
    (pid,) = [pid for pid, cmd in devstack.children(stack.proc.pid).items() if "coordinator" in cmd.split()]
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: pid not in devstack.children(stack.proc.pid), 30, 0.2, "the coordinator stopped")
    stack.wait_healthy(60)
    assert "grant entry skipped: unreadable" in stack.log("coordinator")


def test_a_controller_cannot_update_a_stream_to_capture_free_subjects(stack: DevStack) -> None:
    """Finding 7: STREAM.UPDATE on KCM_DLQ or its own work stream let a controller add any
    subject no stream holds (the coordinator's, the watcher's) to it."""
    streams = {  # each stream: what it holds, and a free subject it tries to capture
        wire.DLQ_STREAM: (subjects.DLQ_FILTER, wire.COORD_STATUS),
        subjects.work_stream("replicaset-controller"): (
            subjects.work_filter("replicaset-controller"),
            wire.WATCHER_SYNC,
        ),
    }

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        js = nc.jetstream(timeout=3)
        out: dict[str, Any] = {}
        for name, (filter, free) in streams.items():
            config = (await js.stream_info(name)).config
            captured = {**config.as_dict(), "subjects": [filter, free]}
            try:
                await js.update_stream(api.StreamConfig.from_response(captured))
                out[name] = "updated"
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError):  # refused: no answer
                out[name] = "refused"
            out[f"{name} subjects"] = (await js.stream_info(name)).config.subjects
        return out

    expected: dict[str, Any] = {name: "refused" for name in streams}
    expected.update({f"{name} subjects": [filter] for name, (filter, _) in streams.items()})
    assert as_identity(stack, ATTACKER, body) == expected


def replicasets(stack: DevStack, deployment: str) -> int:
    found = json.loads(stack.kubectl("get", "replicasets", "-o", "json").stdout)["items"]
    return sum(1 for rs in found if rs["metadata"]["name"].startswith(f"{deployment}-"))


def cache_consumers(stack: DevStack, identity: str, deployment: str) -> set[str]:
    """The consumers on the object stream delivering to `identity`'s inboxes, as the replies of
    their deliveries name them, heard while `deployment` is made (by whoever may listen there)."""

    async def body(nc: Client, errors: list[str]) -> set[str]:
        names: set[str] = set()

        async def sniff(msg: Msg) -> None:
            if (msg.reply or "").startswith(f"$JS.ACK.{wire.OBJECTS_STREAM}."):
                names.add(msg.reply.split(".")[3])

        await nc.subscribe(f"{inbox(stack, identity)}.>", cb=sniff)
        await asyncio.to_thread(stack.kubectl, "create", "deployment", deployment, "--image=nginx")
        for _ in range(100):
            if names:
                break
            await asyncio.sleep(0.1)
        return names

    return as_identity(stack, identity, body)


def test_an_identity_cannot_hear_another_identitys_inbox(stack: DevStack) -> None:
    """Finding 3: every identity subscribed to `_INBOX.>`, so it heard every other identity's
    replies and learned the caches' consumer names from their deliveries."""
    victim_inbox = f"{inbox(stack, 'controllers')}.>"

    async def body(nc: Client, errors: list[str]) -> dict[str, bool]:
        out = {}
        for subject in ("_INBOX.>", victim_inbox):
            await nc.subscribe(subject)
            await nc.flush()
            await asyncio.sleep(0.2)
            out[subject] = any("permissions violation" in e and subject.lower() in e for e in errors)
        return out

    assert as_identity(stack, ATTACKER, body) == {"_INBOX.>": True, victim_inbox: True}
    assert cache_consumers(stack, "consumer", "sniffed") == set()


def test_the_consumer_cannot_touch_a_cache_consumer_and_has_a_bounded_number(stack: DevStack) -> None:
    """Findings 3 and 14: the read-only identity learned a cache's consumer on `_INBOX.>` and
    updated it (headers only: the deployment controller went blind), and could make any
    number of consumers. The names come from the controllers' own inbox here, as if leaked."""
    names = cache_consumers(stack, "controllers", "sniffed-by-its-owner")

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"a cache's consumer named": bool(names)}
        api_prefix = f"$JS.API.CONSUMER.%s.{wire.OBJECTS_STREAM}"
        for victim in sorted(names):
            try:
                info = json.loads((await nc.request(f"{api_prefix % 'INFO'}.{victim}", b"", timeout=2)).data)
                config = {**info["config"], "headers_only": True}
            except nats.errors.TimeoutError:
                config = {"name": victim, "headers_only": True}
            request = json.dumps({"stream_name": wire.OBJECTS_STREAM, "config": config}).encode()
            for what, subject, data in (
                ("update", api_prefix % "CREATE", request),
                ("delete", f"{api_prefix % 'DELETE'}.{victim}", b""),
            ):
                try:
                    reply = json.loads((await nc.request(subject, data, timeout=2)).data)
                    out[what] = "refused" if "error" in reply else "done"
                except nats.errors.TimeoutError:  # a refused request gets no answer
                    out[what] = "refused"
        js = nc.jetstream(timeout=3)
        made = []
        for i in range(17):
            config = api.ConsumerConfig(
                name=f"consumer-{i}", ack_policy=api.AckPolicy.NONE, inactive_threshold=10.0
            )
            with contextlib.suppress(nats.errors.TimeoutError):
                made.append((await js.add_consumer(wire.OBJECTS_STREAM, config)).name)
        out["consumers made"] = len(made)
        for name in made:
            await js.delete_consumer(wire.OBJECTS_STREAM, name)
        return out

    assert as_identity(stack, "consumer", body) == {
        "a cache's consumer named": True,
        "update": "refused",
        "delete": "refused",
        "consumers made": 16,
    }
    stack.kubectl("create", "deployment", "after-the-attack", "--image=nginx")
    wait_for(
        lambda: replicasets(stack, "after-the-attack") == 1, 30, 0.5, "a ReplicaSet for a new Deployment"
    )


def test_a_controller_touches_no_consumer_on_the_object_stream_but_its_own(stack: DevStack) -> None:
    """Finding 3, for a controller identity: it could create consumers on the object stream by
    any name, and so change or delete another controller's cache consumer once it learned its
    name. Now each identity's consumers there have names of its own prefix, and it may touch
    no other. The names come from the stack's controllers' own inbox here, as if leaked."""
    victims = cache_consumers(stack, "controllers", "sniffed-for-a-controller")
    theirs = set(subjects.consumer_names(inbox(stack, "controllers")))
    own = set(subjects.consumer_names(inbox(stack, ATTACKER)))
    api_prefix = f"$JS.API.CONSUMER.%s.{wire.OBJECTS_STREAM}"

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {"victims named": bool(victims), "under their prefix": victims <= theirs}
        for victim in sorted(victims)[:1]:
            update = {
                "name": victim,
                "deliver_subject": f"{inbox(stack, ATTACKER)}.stolen",
                "headers_only": True,
            }
            request = json.dumps({"stream_name": wire.OBJECTS_STREAM, "config": update}).encode()
            attempts = {
                "nameless create": (api_prefix % "CREATE", request),
                "update": (f"{api_prefix % 'CREATE'}.{victim}", request),
                "update by filter": (f"{api_prefix % 'CREATE'}.{victim}.{subjects.OBJECTS_FILTER}", request),
                "durable update": (f"{api_prefix % 'DURABLE.CREATE'}.{victim}", request),
                "info": (f"{api_prefix % 'INFO'}.{victim}", b""),
                "delete": (f"{api_prefix % 'DELETE'}.{victim}", b""),
                "a name of no prefix": (f"{api_prefix % 'CREATE'}.mine", request),
            }
            for what, (subject, data) in attempts.items():
                out[what] = "refused" if await refused(nc, errors, subject, data) else "allowed"
        config = api.ConsumerConfig(
            deliver_subject=nc.new_inbox(), ack_policy=api.AckPolicy.NONE, inactive_threshold=10.0
        )
        made = await consumers.create(nc, wire.OBJECTS_STREAM, config)
        out["its own"] = made.name in own
        await consumers.delete(nc, wire.OBJECTS_STREAM, made.name)
        return out

    refusals = ["nameless create", "update", "update by filter", "durable update", "info", "delete"]
    assert as_identity(stack, ATTACKER, body) == {
        "victims named": True,
        "under their prefix": True,
        **{what: "refused" for what in [*refusals, "a name of no prefix"]},
        "its own": True,
    }
    stack.kubectl("create", "deployment", "after-a-controller-tried", "--image=nginx")
    wait_for(
        lambda: replicasets(stack, "after-a-controller-tried") == 1,
        30,
        0.5,
        "a ReplicaSet for a new Deployment",
    )


def test_consumers_on_the_grants_bucket_have_the_coordinators_own_names_only(stack: DevStack) -> None:
    """The grants bucket's consumers were made by any name (nats-py's key listing): a controller
    identity could make them, and so disturb the coordinator's listing at its restore. Now a
    controller makes none there, and the coordinator only under its own prefix."""
    grants = f"KV_{wire.GRANTS_BUCKET}"
    create = f"$JS.API.CONSUMER.CREATE.{grants}"

    def request(nc: Client, name: str | None) -> bytes:
        config = {
            "deliver_subject": nc.new_inbox(),
            "ack_policy": "none",
            "inactive_threshold": 5_000_000_000,
        }
        return json.dumps(
            {"stream_name": grants, "config": {**config, **({"name": name} if name else {})}}
        ).encode()

    async def attempts(nc: Client, errors: list[str], identity: str) -> dict[str, Any]:
        own = subjects.consumer_names(inbox(stack, identity))[0]
        return {
            "nameless create": await refused(nc, errors, create, request(nc, None)),
            "a name of no prefix": await refused(nc, errors, f"{create}.mine", request(nc, "mine")),
            "a name of its own prefix": await refused(nc, errors, f"{create}.{own}", request(nc, own)),
        }

    async def controller(nc: Client, errors: list[str]) -> dict[str, Any]:
        out = await attempts(nc, errors, ATTACKER)
        kv = await nc.jetstream(timeout=3).key_value(wire.GRANTS_BUCKET)
        try:
            await kv.keys()
            out["nats-py's key listing"] = False
        except (nats.errors.Error, TimeoutError):
            out["nats-py's key listing"] = True
        return out

    async def coordinator(nc: Client, errors: list[str]) -> dict[str, Any]:
        out = await attempts(nc, errors, "coordinator")
        read = await consumers.read_last(nc, grants, [f"$KV.{wire.GRANTS_BUCKET}.>"])
        out["read through its own"] = bool(read)
        return out

    assert as_identity(stack, ATTACKER, controller) == {
        "nameless create": True,
        "a name of no prefix": True,
        "a name of its own prefix": True,
        "nats-py's key listing": True,
    }
    assert as_identity(stack, "coordinator", coordinator) == {
        "nameless create": True,
        "a name of no prefix": True,
        "a name of its own prefix": False,
        "read through its own": True,
    }


def test_a_push_consumer_cannot_speak_on_core_subjects(stack: DevStack) -> None:
    """Finding 6: a push consumer aimed at a core subject replayed stream messages there; a
    standby coordinator took one on `kcm.coord.status` as its leader's verdicts (every field
    has a default), and the watcher one on `kcm.watcher.sync` as a sync request."""
    log = stack.state / "logs" / "standby-coordinator.log"
    argv = [KCM, "coordinator", "--kubeconfig", str(stack.kubeconfig), "--nats-url", url(stack)]
    argv += [
        "--nats-nkey-seed",
        str(seed(stack, "coordinator")),
        "--ops-bind",
        "127.0.0.1",
        "--ops-port",
        "0",
    ]
    with log.open("wb") as out:
        standby = subprocess.Popen(argv, stdout=out, stderr=out)
    aims = {
        "consumer-0": (wire.COORD_STATUS, "standby-coordinator"),
        "consumer-1": (wire.WATCHER_SYNC, "watcher"),
    }

    def dropped(subject: str, service: str) -> bool:
        """A replay is logged with the subscription it came in on (it bears its stream subject)."""
        lines = stack.log(service).splitlines()
        return any("replayed message dropped" in x and f'"subscription": "{subject}"' in x for x in lines)

    async def body(nc: Client, errors: list[str]) -> None:
        js = nc.jetstream(timeout=3)
        for name, (subject, _) in aims.items():
            config = api.ConsumerConfig(
                name=name,
                deliver_subject=subject,
                deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
                filter_subject=subjects.OBJECTS_FILTER,
                ack_policy=api.AckPolicy.NONE,
                inactive_threshold=60.0,
                # A queue subscriber (the watcher's) counts as interest only to a delivery group.
                deliver_group=syncserver.QUEUE_GROUP if subject == wire.WATCHER_SYNC else None,
            )
            await js.add_consumer(wire.OBJECTS_STREAM, config)
        try:
            await asyncio.to_thread(
                wait_for,
                lambda: all(dropped(*aim) for aim in aims.values()),
                30,
                0.5,
                "every replay dropped with a log line",
            )
        finally:
            for name in aims:
                await js.delete_consumer(wire.OBJECTS_STREAM, name)

    try:
        wait_for(
            lambda: "waiting to acquire lease" in log.read_text(errors="replace"),
            60,
            0.5,
            "a standby coordinator",
        )
        as_identity(stack, "consumer", body)
    finally:
        standby.send_signal(signal.SIGTERM)
        standby.wait(30)
    stack.wait_healthy(30)


def test_a_replayed_beat_hides_no_dead_watcher(stack: DevStack) -> None:
    """Finding 6: a beat is read from its body alone, so a controller identity could write a
    watcher's beat into its own work stream and replay it, through a push consumer aimed at the
    watcher's health subject, to the coordinators: a frozen watcher looked healthy.

    nats-server delivers a push consumer's messages only while a client subscribes to the
    deliver subject itself (the coordinators' `kcm.health.*.*` is no interest to it), which no
    kcm service does: here an observer with the coordinator identity follows the watcher's
    beats, as a dashboard of one watcher would; the coordinators hear the replays through it."""
    instance = stack.status()["watcher"]["leader"]
    forged = {
        "service": "watcher",
        "instance": instance,
        "leader": True,
        "interval": 10.0,  # the longest a beat may claim: one replay stands for 31 s
        "checks": {"watcher": None, "nats": None, "publishing": None},
    }
    aim = subjects.health_subject("watcher", instance)
    stream = subjects.work_stream("replicaset-controller")
    # A partition no replica consumes, so the stream's queue keeps the message for the replay.
    planted = f"{wire.WORK_PREFIX}.replicaset-controller.forged.default.beat"

    def dropped() -> int:
        lines = stack.log("coordinator").splitlines()
        where = f'"subscription": "{subjects.health_filter()}"'
        return sum(1 for x in lines if "replayed message dropped" in x and where in x)

    def verdict() -> dict[str, Any]:
        return dict(stack.status().get("watcher") or {})

    async def body(nc: Client, errors: list[str]) -> dict[str, Any]:
        heard: list[Msg] = []

        async def hear(msg: Msg) -> None:
            heard.append(msg)

        observer = await connect(stack, "coordinator", errors)
        await observer.subscribe(aim, cb=hear)
        await observer.flush()
        js = nc.jetstream(timeout=3)
        await js.publish(planted, json.dumps(forged).encode(), stream=stream)
        config = api.ConsumerConfig(
            name="replay",
            deliver_subject=aim,
            filter_subject=f"{wire.WORK_PREFIX}.replicaset-controller.forged.>",
            ack_policy=api.AckPolicy.EXPLICIT,  # a work queue's consumers must ack
            ack_wait=1.0,  # never acked: delivered again every second
            inactive_threshold=10.0,  # the identity may not delete it: it goes by itself
        )
        await js.add_consumer(stream, config)
        seen: list[dict[str, Any]] = []
        try:
            for _ in range(600):
                seen.append(await asyncio.to_thread(verdict))
                if len(heard) >= 3 and await asyncio.to_thread(dropped) >= 3:
                    break
                await asyncio.sleep(0.1)
        finally:
            await observer.close()
        return {
            "replays heard": len(heard) >= 3 and all(json.loads(m.data) == forged for m in heard),
            "replays dropped": await asyncio.to_thread(dropped) >= 3,
            "healthy while frozen": [v for v in seen if v.get("healthy")],
            "verdict": "no active watcher" in str(verdict().get("error")),
        }

    pid = stack.service_pid("watcher")
    os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(lambda: "no active watcher" in str(verdict().get("error")), 30, 0.2, "the watcher unhealthy")
        assert as_identity(stack, ATTACKER, body) == {
            "replays heard": True,
            "replays dropped": True,
            "healthy while frozen": [],
            "verdict": True,
        }
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: verdict().get("healthy"), 30, 0.2, "the watcher healthy again")
