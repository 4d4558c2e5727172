"""The cache's pure helpers, and its apply step fed messages directly (ordering, bodiless
tombstones, fetches of objects too large for a message); its consumer is tested against
nats-server in tests/e2e."""

from __future__ import annotations

import asyncio
import json
import types
from typing import Any, TypeVar, cast

import pytest
import uvloop
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.bus import subjects, wire
from kcm_shared.client import kubeclient
from kcm_shared.runtime import cache
from kcm_shared.testing import caches, fakeclient
from nats.aio.msg import Msg


@pytest.mark.parametrize(
    ("have", "want", "expected"),
    [
        ("10", "9", True),
        ("10", "10", True),
        ("9", "10", False),  # numeric, not lexical: "9" > "10" as strings
        ("100", "99", True),
        ("", "1", False),  # nothing consumed yet
        ("5", "", True),  # no requirement
        ("", "", True),
        ("abc", "abc", True),  # opaque versions can only be compared for equality
        ("abc", "abd", False),
    ],
)
def test_rv_at_least(have: str, want: str, expected: bool) -> None:
    assert cache.rv_at_least(have, want) is expected


T = TypeVar("T", bound=codec.Meta)
RES = gvr.Resource("", "v1", "configmaps")


def _cache(client: kubeclient.KubeClient | None = None, nc: Any = None) -> cache.Cache[codec.Meta]:
    # No stream: these scenarios feed messages to the cache's apply step directly.
    return cache.Cache(cast(Any, None), nc, RES, codec.Meta, client=client)


def _body(name: str, rv: str) -> bytes:
    return json.dumps({"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}).encode()


def _msg(store: cache.Cache[codec.Meta], event: str, name: str, rv: str, body: bytes | None = None) -> None:
    headers = {wire.EVENT: event, wire.RESOURCE_VERSION: rv}
    store.feed(
        [(subjects.object_subject(RES, "ns", name), headers, _body(name, rv) if body is None else body)]
    )


def _marker(store: cache.Cache[codec.Meta], rv: str) -> None:
    store.feed([caches.marker(RES, rv)])


def _events(store: cache.Cache[codec.Meta]) -> list[tuple[str, str]]:
    calls: list[tuple[str, str]] = []
    store.add_handler(
        lambda o: calls.append(("add", o.metadata.resource_version)),
        lambda _, o: calls.append(("update", o.metadata.resource_version)),
        lambda o: calls.append(("delete", o.metadata.resource_version)),
    )
    return calls


def test_an_older_state_never_replaces_a_newer_one() -> None:
    store = _cache()
    calls = _events(store)
    _msg(store, "ADDED", "a", "5")
    _msg(store, "MODIFIED", "a", "3")  # a deposed watcher's late message
    _msg(store, "SYNC", "a", "4")
    _msg(store, "DELETED", "a", "4")  # the delete of an older incarnation
    assert calls == [("add", "5")]
    _msg(store, "SYNC", "a", "8")  # a relist's newer state applies
    _msg(store, "DELETED", "a", "8")  # a relist's tombstone carries the last state's version
    assert calls[1:] == [("update", "8"), ("delete", "8")]
    _msg(store, "ADDED", "a", "6")  # gone is gone only until a state arrives: no memory of deletes
    _msg(store, "MODIFIED", "o", "zz")
    _msg(store, "MODIFIED", "o", "aa")  # opaque versions: stream order
    assert calls[3:] == [("add", "6"), ("add", "zz"), ("update", "aa")]


def test_a_tombstone_without_body_deletes_with_the_last_state_held() -> None:
    store = _cache()
    calls = _events(store)
    _msg(store, "ADDED", "a", "5")
    _msg(store, "DELETED", "a", "5", body=b"")
    assert calls == [("add", "5"), ("delete", "5")]
    assert len(store) == 0


class _Api(fakeclient.FakeClient):
    """Answers GETs of one object with the bodies queued in `answers` (an exception is raised),
    once `gate` is open."""

    def __init__(self, *answers: bytes | Exception) -> None:
        super().__init__()
        self.answers = list(answers)
        self.gate = asyncio.Event()
        self.gate.set()

    async def handle(self, action: fakeclient.Action) -> dict[str, Any] | None:
        assert action.verb == "get"
        await self.gate.wait()
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        body: dict[str, Any] = json.loads(answer)
        return body

    def paths(self) -> list[str]:
        return [path for _, path, _ in self.calls()]


class _Watcher:
    """The watcher's side of a catch-up request: the marker is published (the test delivers it)."""

    async def request(self, subject: str, payload: bytes, **options: Any) -> Any:
        return types.SimpleNamespace(data=b'{"ok": true}')


def test_too_large_object_is_fetched_and_the_marker_after_it_counts_once_fetched() -> None:
    async def body() -> None:
        api = _Api(_body("big", "4"), _body("big", "9"))  # first a stale read, then a current one
        api.gate.clear()
        store = _cache(api, _Watcher())
        store.feed([], snapshot=True)  # synced, empty
        calls = _events(store)
        headers = {wire.EVENT: "ADDED", wire.RESOURCE_VERSION: "9", wire.TOO_LARGE: "2000000"}
        store.feed([(subjects.object_subject(RES, "ns", "big"), headers, b"")])
        _marker(store, "10")
        assert store.last_resource_version == ""  # not before the object is here
        api.gate.set()
        await asyncio.wait_for(store.wait_caught_up("10"), 5)
        assert calls == [("add", "9")]
        assert api.paths() == ["/api/v1/namespaces/ns/configmaps/big"] * 2
        assert store.last_resource_version == "10"

    uvloop.run(body())


def test_a_newer_message_supersedes_a_pending_fetch() -> None:
    async def body() -> None:
        api = _Api(kubeclient.ApiError(503, "ServiceUnavailable", "down"))
        api.gate.clear()
        store = _cache(api)
        calls = _events(store)
        headers = {wire.EVENT: "ADDED", wire.RESOURCE_VERSION: "9", wire.TOO_LARGE: "2000000"}
        store.feed([(subjects.object_subject(RES, "ns", "big"), headers, b"")])
        _marker(store, "10")
        _msg(store, "MODIFIED", "big", "11")  # shrunk back under the limit
        _marker(store, "11")
        assert calls == [("add", "11")]
        assert store.last_resource_version == "11"
        # The pending fetch is gone: let it go on, and it never takes its answer.
        api.gate.set()
        await asyncio.sleep(0.05)
        assert len(api.answers) == 1 and calls == [("add", "11")]

    uvloop.run(body())


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.KCM_OBJECTS.c1.1.1051.7.1764032400000000000.3",  # what nats-server sends
        "$JS.ACK.hub.ACCHASH.KCM_OBJECTS.c1.1.1051.7.1764032400000000000.3.rnd",  # with a domain
    ],
)
def test_delivery_reads_what_nats_py_parses(reply: str) -> None:
    msg = Msg(cast(Any, None), subject="kcm.obj.x", reply=reply)
    assert cache._delivery(msg) == (7, 3)
    assert (msg.metadata.sequence.consumer, msg.metadata.num_pending) == (7, 3)


def test_only_another_cache_of_the_same_resource_can_share_a_consumer() -> None:
    leader, follower = _cache(), _cache()
    other = cache.Cache(cast(Any, None), None, gvr.Resource("", "v1", "secrets"), codec.Meta)
    with pytest.raises(ValueError):
        leader.share_consumer(other)
    with pytest.raises(ValueError):
        leader.share_consumer(leader)
    leader.share_consumer(follower)
    assert follower.shares_consumer and leader.feeds_others and not leader.shares_consumer
    with pytest.raises(ValueError):  # one level only: a follower feeds nobody
        follower.share_consumer(_cache())
    with pytest.raises(ValueError):
        _cache().share_consumer(follower)


def test_a_cache_fed_by_another_consumer_runs_until_cancelled_without_a_consumer() -> None:
    async def body() -> None:
        leader, follower = _cache(), _cache()
        leader.share_consumer(follower)
        task = asyncio.create_task(follower.run())  # no NATS: it must not try to subscribe
        await asyncio.sleep(0)
        assert not task.done()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled()

    uvloop.run(body())


def _by_name(obj: codec.Meta) -> list[str]:
    return [obj.metadata.name]


def test_controllers_sharing_a_view_may_each_add_the_same_index() -> None:
    # The pvc-protection and attach/detach controllers read pods through one view, hence one
    # cache, and both index it by claim: with every controller running, the second
    # registration used to stop the whole controllers process.
    store = _cache()
    _msg(store, "ADDED", "a", "1")
    store.add_index("name", _by_name)
    store.add_index("name", _by_name)
    assert [o.metadata.name for o in store.by_index("name", "a")] == ["a"]
    with pytest.raises(ValueError, match="already exists"):
        store.add_index("name", lambda obj: [obj.metadata.uid])


class _WithData(codec.Meta):
    data: dict[str, str] = {}


def _delivered(cseq: int, name: str, rv: str) -> Msg:
    headers = {wire.EVENT: "ADDED", wire.RESOURCE_VERSION: rv}
    reply = f"$JS.ACK.KCM_OBJECTS.c1.1.{cseq}.{cseq}.1764032400000000000.5"
    subject = subjects.object_subject(RES, "ns", name)
    body = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, "data": {"k": "v"}}
    return Msg(cast(Any, None), subject=subject, reply=reply, data=json.dumps(body).encode(), headers=headers)


class _WithMethod(codec.Meta):
    def name(self) -> str:
        return self.metadata.name


def _fed_together(view: type[T], rvs: tuple[str, ...] = ("1", "2")) -> tuple[codec.Meta, T]:
    """The object `a` as a leader's Meta view and a follower's `view` of one consumer hold it."""

    async def body() -> tuple[codec.Meta, T]:
        leader: cache.Cache[codec.Meta] = _cache()
        follower: cache.Cache[T] = cache.Cache(cast(Any, None), None, RES, view)
        leader.share_consumer(follower)
        failure: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        for cseq, rv in enumerate(rvs, start=1):
            await leader._on_msg(failure, _delivered(cseq, "a", rv))
        assert not failure.done()
        mine, theirs = leader.get("ns", "a"), follower.get("ns", "a")
        assert mine is not None and theirs is not None
        return mine, theirs

    return uvloop.run(body())


def test_views_that_merge_hold_one_object_decoded_once_with_the_fields_of_both() -> None:
    mine, theirs = _fed_together(_WithData)
    assert mine is theirs and mine.metadata.resource_version == "2"
    assert theirs.data == {"k": "v"}  # the follower's field, decoded with the leader's


def test_views_that_do_not_merge_hold_their_own_objects_and_one_copy_of_the_metadata() -> None:
    mine, theirs = _fed_together(_WithMethod)
    assert mine is not theirs and type(theirs) is _WithMethod
    assert theirs.metadata is mine.metadata and mine.metadata.resource_version == "2"
    assert theirs.name() == "a"


def test_the_watchdog_counts_silence_only_while_this_process_ran() -> None:
    silence = cache._Silence(0.0)
    # Waits of 5 s that end on time, nothing heard: the silence grows by 5 s each.
    assert [silence.after(0.0, t, 5.0, t + 5.0) for t in (0.0, 5.0, 10.0)] == [5.0, 10.0, 15.0]
    # Frozen (or starved) for 60 s in one wait: only the 5 s it asked for count; a wait on
    # time after it adds its 5 s.
    silence = cache._Silence(0.0)
    assert silence.after(0.0, 0.0, 5.0, 60.0) == 5.0
    assert silence.after(0.0, 60.0, 5.0, 65.0) == 10.0
    # A message handled starts the count over, lateness and all.
    assert silence.after(64.0, 65.0, 5.0, 70.0) == 6.0
