"""Object and progress subjects parse back to what they were made from."""

from __future__ import annotations

import pytest
from kcm_shared.apimachinery import gvr
from kcm_shared.bus import subjects

RESOURCES = [
    gvr.Resource("", "v1", "pods"),
    gvr.Resource("apps", "v1", "deployments"),
    gvr.Resource("example.com", "v1alpha1", "widgets"),
]


@pytest.mark.parametrize("res", RESOURCES)
def test_progress_subject_round_trips(res: gvr.Resource) -> None:
    subject = subjects.progress_subject(res)
    assert subject.startswith(subjects.PROGRESS_FILTER[:-1])
    assert subjects.parse_progress_subject(subject) == res


@pytest.mark.parametrize("res", RESOURCES)
@pytest.mark.parametrize("namespace", ["", "kube-system"])
def test_object_subject_round_trips(res: gvr.Resource, namespace: str) -> None:
    parsed = subjects.parse_object_subject(subjects.object_subject(res, namespace, "a.b"))
    assert parsed == subjects.ObjectSubject(res, namespace, "a.b")


@pytest.mark.parametrize("subject", ["kcm.progress.core.v1", "kcm.obj.core.v1.pods", "x.progress.a.b.c"])
def test_other_subjects_are_refused(subject: str) -> None:
    with pytest.raises(ValueError):
        subjects.parse_progress_subject(subject)


@pytest.mark.parametrize("res", RESOURCES)
def test_a_progress_subject_is_told_from_an_object_subject(res: gvr.Resource) -> None:
    assert subjects.is_progress_subject(subjects.progress_subject(res))
    assert not subjects.is_progress_subject(subjects.object_subject(res, "kcm", "progress"))


def test_health_filters_cover_one_service_or_all() -> None:
    # Written out: a subscriber outside kcm matches these strings, not our functions.
    assert subjects.health_filter() == "kcm.health.*.*"
    assert subjects.health_filter("watch.er") == "kcm.health.watch~2Eer.*"
    assert subjects.health_subject("watch.er", "w-0") == "kcm.health.watch~2Eer.w-0"


LONG = "r" * 5000
RBAC = gvr.Resource("rbac.authorization.k8s.io", "v1", "roles")


def test_a_token_longer_than_the_bound_becomes_a_digest() -> None:
    token = subjects.encode_token(LONG)
    assert subjects.is_digest(token) and len(token) == 2 + 52
    assert subjects.encode_token(LONG) == token and subjects.encode_token(LONG + "x") != token
    assert subjects.encode_token("." * 170) == "~2E" * 170  # 510 bytes: still plain
    assert subjects.is_digest(subjects.encode_token("." * 171))
    # Escaping never makes `~H`: a name that looks like a digest stays itself.
    assert subjects.encode_token(token) == "~7EH" + token[2:]
    with pytest.raises(ValueError, match="digest"):
        subjects.decode_token(token)


def test_an_object_subject_with_a_digest_is_parsed_with_its_key_header() -> None:
    subject = subjects.object_subject(RBAC, "ns", LONG)
    assert len(subject) < 200 and subjects.needs_key(subject)
    parsed = subjects.parse_object_subject(subject, f"ns/{LONG}")
    assert (parsed.namespace, parsed.name) == ("ns", LONG)
    with pytest.raises(ValueError, match="header"):
        subjects.parse_object_subject(subject)
    with pytest.raises(ValueError, match="does not match"):
        subjects.parse_object_subject(subject, "ns/" + "s" * 5000)  # a header naming another object
    assert not subjects.needs_key(subjects.object_subject(RBAC, "ns", "short"))


def test_a_work_subject_with_a_digest_is_parsed_with_its_key_header() -> None:
    key = "delete/" + "u" * 5000
    subject = subjects.work_subject("garbage-collector-controller", 3, key)
    assert subjects.needs_key(subject)
    assert subjects.key_of_work_subject(subject, key) == key
    with pytest.raises(ValueError):
        subjects.key_of_work_subject(subject)
    with pytest.raises(ValueError, match="empty"):
        subjects.work_subject("garbage-collector-controller", 3, "delete/uid-ending-in-slash/")


def test_heartbeat_subjects_name_the_scope_and_the_instance() -> None:
    subject = subjects.heartbeat_subject(["b-controller", "a-controller"], "pod.1")
    scope = subjects.scope_token(["a-controller", "b-controller"])
    assert subject == f"kcm.coord.heartbeat.{scope}.pod=2E1"
    assert subjects.parse_heartbeat_subject(subject) == (scope, "pod.1")
    assert subjects.heartbeat_filter(["a-controller", "b-controller"]) == f"kcm.coord.heartbeat.{scope}.*"
    for bad in ("kcm.coord.heartbeat", f"kcm.coord.heartbeat.{scope}", f"kcm.coord.status.{scope}.a"):
        with pytest.raises(ValueError):
            subjects.parse_heartbeat_subject(bad)


def test_replayed_tells_a_jetstream_delivery_from_a_publish() -> None:
    assert subjects.replayed("$JS.ACK.KCM_OBJECTS.consumer-0.1.2.3.4.0")
    assert not subjects.replayed("_INBOX.abc")
    assert not subjects.replayed("")
    assert not subjects.replayed(None)
