"""The permission table (kcm_cli.natsauth) read the way nats-server reads it: who may publish
and subscribe to which subject, wildcards included. The end-to-end proof against a real
server is tests/e2e/test_nats_auth.py; this covers every identity and subject quickly."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from kcm_cli import natsauth
from kcm_cli.controllers import BUILTIN
from kcm_shared.bus import membership, natsconn, subjects, wire

NAMES = [spec.name for spec in BUILTIN]
ALL = {**natsauth.deployment_identities(BUILTIN), "all-controllers": natsauth.controllers(NAMES)}


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: `*` is one token, a final `>` one or more."""
    pat, sub = pattern.split("."), subject.split(".")
    for i, token in enumerate(pat):
        if token == ">":
            return len(sub) > i
        if i >= len(sub) or (token != "*" and token != sub[i]):
            return False
    return len(pat) == len(sub)


def may_publish(perms: natsauth.Permissions, subject: str) -> bool:
    return any(matches(p, subject) for p in perms.publish)


def may_subscribe(perms: natsauth.Permissions, subject: str) -> bool:
    return any(matches(p, subject) for p in perms.subscribe)


def test_the_matcher_reads_wildcards_as_nats_does() -> None:
    assert matches("kcm.obj.>", "kcm.obj.core.v1.pods.default.a")
    assert not matches("kcm.obj.>", "kcm.obj")
    assert matches("kcm.work.x.*.>", "kcm.work.x.3.default.a")
    assert not matches("kcm.work.x.*.>", "kcm.work.y.3.default.a")
    assert not matches("$JS.API.STREAM.INFO.KCM_OBJECTS", "$JS.API.STREAM.INFO.KCM_OBJECTS_2")


@pytest.mark.parametrize(
    "subject", ["kcm.obj.apps.v1.replicasets.default.x", "kcm.progress.apps.v1.replicasets"]
)
def test_only_the_watcher_publishes_object_states_and_progress(subject: str) -> None:
    assert {name for name, perms in ALL.items() if may_publish(perms, subject)} == {"watcher"}


def test_only_the_coordinator_hears_coordination_and_only_the_watcher_sync_requests() -> None:
    hear = {name for name, perms in ALL.items() if may_subscribe(perms, wire.COORD_HEARTBEAT)}
    assert hear == {"coordinator"}
    assert {n for n, p in ALL.items() if may_subscribe(p, wire.WATCHER_SYNC)} == {"watcher"}
    assert {n for n, p in ALL.items() if p.responses} == {"watcher", "coordinator"}


def test_a_controller_heartbeats_and_keeps_grants_under_its_own_controllers_only() -> None:
    rs = natsauth.controllers(["replicaset-controller"])
    beat = subjects.heartbeat_subject(["replicaset-controller"], "pod-1")
    other = subjects.heartbeat_subject(["deployment-controller"], "pod-1")
    assert may_publish(rs, beat) and not may_publish(rs, other)
    assert not may_publish(rs, wire.COORD_HEARTBEAT)
    own_key = membership.grant_key(["replicaset-controller"], "pod-1")
    other_key = membership.grant_key(["deployment-controller"], "pod-1")
    assert may_publish(rs, f"$KV.{wire.GRANTS_BUCKET}.{own_key}")
    assert not may_publish(rs, f"$KV.{wire.GRANTS_BUCKET}.{other_key}")
    assert may_subscribe(ALL["coordinator"], beat)


def test_a_controller_publishes_its_own_work_and_dead_letters_only() -> None:
    rs = natsauth.controllers(["replicaset-controller"])
    own = subjects.work_subject("replicaset-controller", 3, "default/web")
    other = subjects.work_subject("deployment-controller", 3, "default/web")
    assert may_publish(rs, own) and may_publish(rs, subjects.dlq_subject("replicaset-controller"))
    assert not may_publish(rs, other) and not may_publish(rs, subjects.dlq_subject("deployment-controller"))
    own_stream, other_stream = (
        subjects.work_stream(n) for n in ("replicaset-controller", "deployment-controller")
    )
    assert may_publish(rs, f"$JS.ACK.{own_stream}.rs-p3.1.2.3.4.5")
    assert not may_publish(rs, f"$JS.ACK.{other_stream}.d-p3.1.2.3.4.5")
    assert not may_publish(rs, f"$JS.API.CONSUMER.CREATE.{other_stream}.d-p3")
    # The object stream: its caches may declare it as it is, never bring it to another config.
    assert may_publish(rs, "$JS.API.STREAM.CREATE.KCM_OBJECTS")
    assert not may_publish(rs, "$JS.API.STREAM.UPDATE.KCM_OBJECTS")


def test_a_process_running_several_controllers_gets_the_union() -> None:
    both = natsauth.controllers(["replicaset-controller", "deployment-controller"])
    for name in ("replicaset-controller", "deployment-controller"):
        assert may_publish(both, subjects.work_subject(name, 0, "ns/a"))
    assert not may_publish(both, subjects.work_subject("garbage-collector-controller", 0, "delete/u"))


def test_a_hostile_controller_name_stays_its_own_subject() -> None:
    perms = natsauth.controllers(["x.>"])  # a plugin's name is not a subject pattern
    assert not may_publish(perms, subjects.work_subject("replicaset-controller", 0, "default/a"))
    assert may_publish(perms, subjects.work_subject("x.>", 0, "default/a"))


def test_the_consumer_reads_and_publishes_nothing_of_kcm() -> None:
    consumer = natsauth.consumer()
    assert not [p for p in consumer.publish if p.startswith("kcm.")]
    assert may_subscribe(consumer, "kcm.obj.core.v1.pods.default.a")
    assert may_publish(consumer, "$JS.API.DIRECT.GET.KCM_OBJECTS.kcm.obj.core.v1.pods.default.a")
    assert may_publish(consumer, "$JS.API.CONSUMER.CREATE.KCM_OBJECTS.consumer-0.kcm.obj.>")
    # Only its own names, and never by a name in the body (nats-server would update any consumer).
    for other in ("CONSUMER.CREATE.KCM_OBJECTS", "CONSUMER.CREATE.KCM_OBJECTS.cache-x.kcm.obj.>"):
        assert not may_publish(consumer, f"$JS.API.{other}")
    for op in ("CONSUMER.INFO", "CONSUMER.DELETE", "CONSUMER.MSG.NEXT", "CONSUMER.DURABLE.CREATE"):
        assert not may_publish(consumer, f"$JS.API.{op}.KCM_OBJECTS.cache-x")
    for stream in (subjects.work_stream("replicaset-controller"), wire.DLQ_STREAM):
        assert not [p for p in consumer.publish if stream in p]
    assert not consumer.responses


@pytest.mark.parametrize("op", ["STREAM.DELETE", "STREAM.PURGE", "STREAM.MSG.DELETE", "STREAM.UPDATE"])
def test_no_one_but_the_owner_changes_or_wipes_a_stream(op: str) -> None:
    # An update may add any free subject to a stream: a work stream's is nobody's at runtime.
    owners = {wire.OBJECTS_STREAM: "watcher", wire.DLQ_STREAM: "coordinator", natsauth.GRANTS: "coordinator"}
    for name, perms in ALL.items():
        for stream in (*owners, subjects.work_stream("replicaset-controller")):
            allowed = may_publish(perms, f"$JS.API.{op}.{stream}")
            owns = op == "STREAM.UPDATE" and owners.get(stream) == name
            assert allowed == owns, (name, op, stream)


def test_an_identity_without_subjects_is_denied_everything_not_allowed_everything() -> None:
    rendered = natsauth.Permissions((), ("kcm.coord.>",), responses=True).render("UKEY")
    assert rendered["publish"] == {"deny": [">"]}
    assert rendered["allow_responses"] is True


def test_only_the_coordinator_speaks_for_the_coordinators_and_only_the_watcher_for_watchers() -> None:
    coordinator = natsauth.coordinator()
    assert "kcm.coord.status" in coordinator.publish and "kcm.health.coordinator.*" in coordinator.publish
    assert "kcm.health.*.*" in coordinator.subscribe
    assert "kcm.health.watcher.*" in natsauth.watcher().publish
    for other in (natsauth.consumer(), natsauth.controllers(["replicaset-controller"])):
        assert not any(s.startswith(("kcm.health", "kcm.coord.status")) for s in other.publish)


def test_seeds_are_made_once_private_and_the_config_names_their_public_keys(tmp_path: Path) -> None:
    auth = tmp_path / "auth"
    block = natsauth.authorization(auth, {"watcher": natsauth.watcher()})
    seed = auth / "watcher.nk"
    first = seed.read_bytes()
    assert stat.S_IMODE(seed.stat().st_mode) == 0o600 and stat.S_IMODE(auth.stat().st_mode) == 0o700
    (user,) = json.loads(json.dumps(block))["users"]
    assert user["nkey"] == natsauth.public_key(first.strip()) and user["nkey"].startswith("U")
    natsauth.authorization(auth, {"watcher": natsauth.watcher()})
    assert seed.read_bytes() == first


def test_seeds_apart_are_a_private_directory_each_and_none_beside_the_config(tmp_path: Path) -> None:
    """Compose's layout: each identity's seed alone in its directory, one volume each."""
    from kcm_cli import main

    out, seeds = tmp_path / "auth", tmp_path / "seeds"
    argv = ["nats-auth", "--out", str(out), "--seeds", str(seeds), "--controllers", "replicaset"]
    assert main.main(argv) == 0
    assert {p.name for p in out.iterdir()} == {natsauth.AUTH_CONF}
    assert {p.name for p in seeds.iterdir()} == {"watcher", "coordinator", "consumer", "replicaset"}
    conf = (out / natsauth.AUTH_CONF).read_text()
    for directory in seeds.iterdir():
        assert [p.name for p in directory.iterdir()] == [natsauth.SEED_KEY]
        seed = directory / natsauth.SEED_KEY
        assert stat.S_IMODE(seed.stat().st_mode) == 0o600, directory.name
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory.name
        assert natsauth.public_key(seed.read_bytes().strip()) in conf, directory.name
    first = (seeds / "watcher" / natsauth.SEED_KEY).read_bytes()
    assert main.main(argv) == 0
    assert (seeds / "watcher" / natsauth.SEED_KEY).read_bytes() == first


def test_kcm_nats_auth_makes_an_identity_per_chosen_controller_and_plugin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kcm_cli import main

    argv = ["nats-auth", "--out", str(tmp_path), "--controllers", "replicaset"]
    assert main.main([*argv, "--plugin", "tests.e2e.probe_controller:SPEC"]) == 0
    seeds = {p.name for p in tmp_path.glob(f"*{natsauth.SEED_SUFFIX}")}
    assert seeds == {"watcher.nk", "coordinator.nk", "consumer.nk", "replicaset.nk", "probe.nk"}
    assert set(capsys.readouterr().out.split()) == {str(p) for p in tmp_path.iterdir()}
    conf = (tmp_path / natsauth.AUTH_CONF).read_text()
    assert "kcm.work.probe-controller.*.>" in conf and "kcm.work.deployment-controller" not in conf


def test_each_identity_hears_its_own_inbox_only_and_the_consumer_the_default_one_too(tmp_path: Path) -> None:
    identities = {"watcher": natsauth.watcher(), "consumer": natsauth.consumer()}
    identities["replicaset"] = natsauth.controllers(["replicaset-controller"])
    identities["coordinator"] = natsauth.coordinator()
    users = natsauth.authorization(tmp_path, identities)["users"]
    assert isinstance(users, list)
    for identity, user in zip(identities, users, strict=True):
        heard = user["permissions"]["subscribe"]["allow"]
        inboxes = [subject for subject in heard if subject.startswith("_INBOX")]
        seed = str(natsauth.seed_file(tmp_path, identity))
        prefix = natsconn._inbox_prefix(natsconn.NatsOptions(nkey_seed=seed))
        own = [f"{subjects.inbox_prefix(user['nkey'])}.>"]
        assert own == [f"{prefix}.>"]
        assert inboxes == (["_INBOX.>", *own] if identity == "consumer" else own)


def test_consumers_on_the_object_stream_have_the_identitys_own_names_only(tmp_path: Path) -> None:
    identities = {
        "watcher": natsauth.watcher(),
        "replicaset": natsauth.controllers(["replicaset-controller"]),
    }
    identities["deployment"] = natsauth.controllers(["deployment-controller"])
    users = natsauth.authorization(tmp_path, identities)["users"]
    assert isinstance(users, list)
    by_identity = dict(zip(identities, users, strict=True))
    allowed = {identity: user["permissions"]["publish"]["allow"] for identity, user in by_identity.items()}
    names = {
        identity: subjects.consumer_names(subjects.inbox_prefix(user["nkey"]))
        for identity, user in by_identity.items()
    }
    api = f"$JS.API.CONSUMER.%s.{wire.OBJECTS_STREAM}"

    def may(identity: str, subject: str) -> bool:
        return any(matches(p, subject) for p in allowed[identity])

    for identity in identities:
        assert len(set(names[identity])) == subjects.CONSUMER_SLOTS
        # A nameless create (nats-server takes the name from the body) and a stranger's name.
        assert not may(identity, api % "CREATE")
        assert not may(identity, f"{api % 'CREATE'}.cache-x")
        assert not may(identity, f"{api % 'DURABLE.CREATE'}.{names[identity][0]}")
        for owner, theirs in names.items():
            for op in ("CREATE", "DELETE", "INFO", "MSG.NEXT"):
                mine = owner == identity and (op != "MSG.NEXT" or identity == "watcher") and op != "INFO"
                assert may(identity, f"{api % op}.{theirs[7]}") == mine, (identity, owner, op)
