"""kcm_shared.controllerutil.history: upstream's pkg/controller/history cases (controller_history_test.go)
for naming, hashing, equality, sorting and creation with name collisions."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import msgspec
import pytest
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import history
from kcm_shared.testing import fakeclient

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
A1 = b'{"a":1}'


def parent(name: str = "web", uid: str = "uid-1") -> codec.Meta:
    return codec.Meta(metadata=codec.ObjectMeta(name=name, namespace="ns", uid=uid))


def rev(
    name: str,
    revision: int,
    data: bytes = b'{"a":1}',
    created: dt.datetime | None = T0,
    labels: dict[str, str] | None = None,
) -> history.ControllerRevisionView:
    return history.ControllerRevisionView(
        metadata=codec.ObjectMeta(name=name, namespace="ns", creation_timestamp=created, labels=labels or {}),
        data=msgspec.Raw(data),
        revision=revision,
    )


def test_fnv1_matches_go() -> None:
    # hash/fnv New32 test vectors: "" and "a" (FNV-1, not FNV-1a).
    assert history.fnv1_32(b"") == 0x811C9DC5
    assert history.fnv1_32(b"a") == 0x050C5D7E


def test_safe_encode_avoids_vowels() -> None:
    # Each decimal digit maps to alphanums[ord(c) % 27]: '0' is 48 -> 48 % 27 = 21, the "4".
    assert history.safe_encode("0123456789") == "456789bcdf"
    assert history.safe_encode("") == ""


def test_hash_is_stable_and_collision_count_changes_it() -> None:
    data = b'{"spec":{"template":{}}}'
    h = history.hash_revision(data, None)
    assert h == history.hash_revision(data, None)
    assert h != history.hash_revision(data, 1)
    assert history.hash_revision(data, 1) != history.hash_revision(data, 2)
    assert h != history.hash_revision(b'{"spec":{}}', None)
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789")


@pytest.mark.parametrize(
    ("prefix", "expected_len"),
    [("web", len("web-abc")), ("x" * 300, 223 + 4)],
)
def test_revision_name_fits(prefix: str, expected_len: int) -> None:
    name = history.revision_name(prefix, "abc")
    assert name.endswith("-abc") and len(name) == expected_len


def test_new_revision_sets_owner_labels_and_name() -> None:
    p = parent()
    manifest = history.new_revision(p, "apps/v1", "StatefulSet", {"app": "web"}, b'{"x":1}', 3, None)
    h = history.hash_revision(b'{"x":1}', None)
    meta = manifest["metadata"]
    assert meta["name"] == f"web-{h}"
    assert meta["labels"] == {"app": "web", history.HASH_LABEL: h}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": "web",
            "uid": "uid-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert manifest["revision"] == 3
    assert bytes(manifest["data"]) == b'{"x":1}'
    # The template's labels are copied, not shared.
    labels = {"app": "web"}
    history.new_revision(p, "apps/v1", "StatefulSet", labels, b"{}", 1, None)
    assert labels == {"app": "web"}


@pytest.mark.parametrize(
    ("lhs", "rhs", "equal"),
    [
        (None, None, True),
        (rev("a", 1), None, False),
        (None, rev("a", 1), False),
        (rev("a", 1, b'{"a":1}'), rev("b", 2, b'{"a":1}'), True),
        (rev("a", 1, b'{"a":1}'), rev("b", 1, b'{"a":2}'), False),
        # Same JSON value, other bytes: equal (upstream compares decoded objects too).
        (rev("a", 1, b'{"a":1,"b":2}'), rev("b", 1, b'{"b": 2, "a": 1}'), True),
        # Hash labels that parse and differ decide at once.
        (
            rev("a", 1, labels={history.HASH_LABEL: "1"}),
            rev("b", 1, labels={history.HASH_LABEL: "2"}),
            False,
        ),
        # Labels that do not parse as numbers are ignored.
        (
            rev("a", 1, labels={history.HASH_LABEL: "bcd"}),
            rev("b", 1, labels={history.HASH_LABEL: "xyz"}),
            True,
        ),
    ],
)
def test_equal_revision(
    lhs: history.ControllerRevisionView | None, rhs: history.ControllerRevisionView | None, equal: bool
) -> None:
    assert history.equal_revision(lhs, rhs) is equal


def test_find_equal_revisions_keeps_order() -> None:
    revs = [rev("a", 1, b"1"), rev("b", 2, b"2"), rev("c", 3, b"1")]
    assert [r.metadata.name for r in history.find_equal_revisions(revs, rev("n", 0, b"1"))] == ["a", "c"]
    assert history.find_equal_revisions(revs, rev("n", 0, b"3")) == []


@pytest.mark.parametrize(
    ("revs", "want"),
    [
        ([rev("c", 3), rev("a", 1), rev("b", 2)], ["a", "b", "c"]),
        ([rev("a", 1), rev("b", 2), rev("c", 3)], ["a", "b", "c"]),
        # Ties on the number: older first, then by name.
        (
            [rev("b", 1, created=T0 + dt.timedelta(seconds=1)), rev("z", 1, created=T0), rev("a", 1)],
            ["a", "z", "b"],
        ),
        ([], []),
    ],
)
def test_sort_revisions(revs: list[history.ControllerRevisionView], want: list[str]) -> None:
    assert [r.metadata.name for r in history.sort_revisions(revs)] == want


def test_next_revision() -> None:
    assert history.next_revision([]) == 1
    assert history.next_revision([rev("a", 1), rev("b", 7), rev("c", 2)]) == 8


REVISIONS = "/apis/apps/v1/namespaces/ns/controllerrevisions"


def create(api: fakeclient.FakeClient, data: bytes, count: int) -> tuple[dict[str, Any], int]:
    manifest = history.new_revision(parent(), "apps/v1", "StatefulSet", {}, data, 1, count)
    return asyncio.run(history.create_revision(api, parent(), manifest, count))


def test_create_without_collision() -> None:
    api = fakeclient.FakeClient()
    created, count = create(api, b'{"a":1}', 0)
    assert count == 0
    assert created["metadata"]["name"] == "web-" + history.hash_revision(A1, 0)


def test_create_same_data_returns_the_existing_revision() -> None:
    api = fakeclient.FakeClient()
    first, _ = create(api, b'{"a":1}', 0)
    again, count = create(api, b'{"a":1}', 0)
    assert count == 0 and again["metadata"]["name"] == first["metadata"]["name"]
    assert len(api.objects) == 1


def test_create_with_collision_bumps_the_count() -> None:
    api = fakeclient.FakeClient()
    # Another revision with other data already holds the name data {"a":1} hashes to.
    taken = "web-" + history.hash_revision(A1, 0)
    api.add(f"{REVISIONS}/{taken}", {"metadata": {"name": taken}, "data": {"other": True}})
    created, count = create(api, b'{"a":1}', 0)
    assert count == 1
    assert created["metadata"]["name"] == "web-" + history.hash_revision(A1, 1)
    assert [body["metadata"]["name"] for _, _, body in api.calls("create")] == [
        taken,
        created["metadata"]["name"],
    ]


def test_adopt_refuses_a_revision_controlled_by_another() -> None:
    api = fakeclient.FakeClient()
    api.add(f"{REVISIONS}/b", msgspec.json.decode(msgspec.json.encode(rev("b", 1))))
    other = rev("a", 1)
    other.metadata.owner_references.append(
        codec.OwnerReference(kind="StatefulSet", name="other", uid="u2", controller=True)
    )
    with pytest.raises(ValueError, match="owned by"):
        asyncio.run(history.adopt_revision(api, parent(), "apps/v1", "StatefulSet", other))
    asyncio.run(history.adopt_revision(api, parent(), "apps/v1", "StatefulSet", rev("b", 1)))
    ((path, body, kind),) = [(a.path, a.body, a.patch_type) for a in api.actions if a.verb == "patch"]
    assert path.endswith("/controllerrevisions/b") and kind == "strategic"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
