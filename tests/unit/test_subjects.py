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
