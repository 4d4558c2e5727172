"""The binder's matching (upstream index_test.go and pv_controller's checkVolumeSatisfyClaim
cases as data): the smallest fitting Available volume of the claim's class, access modes
searched fewest-first, selector, volume mode, pre-binding, WaitForFirstConsumer; the texts of
a named volume that does not fit; the default class."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from kcm_controllers.pvbinder import matching
from kcm_controllers.pvbinder.views import ClaimView, ClassView, VolumeView


def volume(
    name: str,
    size: str,
    *,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    cls: str = "",
    phase: str = "Available",
    labels: dict[str, str] | None = None,
    mode: str | None = None,
    ref: dict[str, str] | None = None,
    deleting: bool = False,
) -> VolumeView:
    meta: dict[str, Any] = {"name": name, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T12:00:00Z"
    spec: dict[str, Any] = {
        "capacity": {"storage": size},
        "accessModes": list(modes),
        "storageClassName": cls,
    }
    if mode:
        spec["volumeMode"] = mode
    if ref:
        spec["claimRef"] = ref
    doc = {"metadata": meta, "spec": spec, "status": {"phase": phase}}
    return msgspec.json.decode(msgspec.json.encode(doc), type=VolumeView)


def claim(
    size: str = "1Gi",
    *,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    cls: str | None = "",
    selector: dict[str, Any] | None = None,
    mode: str | None = None,
) -> ClaimView:
    spec: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls is not None:
        spec["storageClassName"] = cls
    if selector is not None:
        spec["selector"] = selector
    if mode:
        spec["volumeMode"] = mode
    doc = {"metadata": {"name": "c", "namespace": "ns", "uid": "c-uid"}, "spec": spec}
    return msgspec.json.decode(msgspec.json.encode(doc), type=ClaimView)


def best(c: ClaimView, vols: list[VolumeView], *, delay: bool = False) -> str | None:
    found = matching.find_best_match(c, vols, delay_binding=delay)
    return None if found is None else found.metadata.name


def test_the_smallest_large_enough_volume_wins() -> None:
    vols = [volume("big", "10Gi"), volume("small", "500Mi"), volume("fit", "2Gi"), volume("fit2", "5Gi")]
    assert best(claim("1Gi"), vols) == "fit"
    assert best(claim("20Gi"), vols) is None


def test_only_available_volumes_of_the_claims_class_count() -> None:
    vols = [
        volume("bound", "1Gi", phase="Bound"),
        volume("released", "1Gi", phase="Released"),
        volume("gold", "1Gi", cls="gold"),
        volume("plain", "3Gi"),
    ]
    assert best(claim(), vols) == "plain"
    assert best(claim(cls="gold"), vols) == "gold"
    assert best(claim(cls="silver"), vols) is None


def test_access_mode_sets_are_searched_fewest_modes_first() -> None:
    vols = [volume("many", "1Gi", modes=("ReadWriteOnce", "ReadOnlyMany")), volume("one", "5Gi")]
    # The exact set wins over a smaller volume with more modes.
    assert best(claim(), vols) == "one"
    assert best(claim(modes=("ReadOnlyMany",)), vols) == "many"
    assert best(claim(modes=("ReadWriteMany",)), vols) is None


def test_selector_volume_mode_and_deletion_filter() -> None:
    vols = [
        volume("fast", "2Gi", labels={"speed": "fast"}),
        volume("slow", "1Gi", labels={"speed": "slow"}),
        volume("block", "1Gi", mode="Block"),
        volume("gone", "1Gi", deleting=True),
    ]
    assert best(claim(selector={"matchLabels": {"speed": "fast"}}), vols) == "fast"
    assert best(claim(mode="Block"), vols) == "block"
    assert best(claim(), [volume("gone", "1Gi", deleting=True)]) is None
    with pytest.raises(matching.MatchError):
        best(claim(selector={"matchExpressions": [{"key": "a", "operator": "Bogus"}]}), vols)


def test_a_volume_pre_bound_to_the_claim_wins_even_when_delayed() -> None:
    mine = volume("mine", "9Gi", phase="Available", ref={"name": "c", "namespace": "ns"})
    theirs = volume("theirs", "1Gi", ref={"name": "other", "namespace": "ns", "uid": "x"})
    vols = [volume("small", "1Gi"), mine, theirs]
    assert best(claim(), vols) == "mine"
    assert best(claim(), vols, delay=True) == "mine"
    # Under WaitForFirstConsumer the scheduler picks among the others.
    assert best(claim(), [volume("small", "1Gi")], delay=True) is None


@pytest.mark.parametrize(
    ("vol", "why"),
    [
        (volume("v", "1Gi"), None),
        (volume("v", "1Gi", deleting=True), 'the volume is marked for deletion "v"'),
        (volume("v", "100Mi"), "requested PV is too small"),
        (volume("v", "1Gi", cls="gold"), "storageClassName does not match"),
        (volume("v", "1Gi", mode="Block"), "incompatible volumeMode"),
        (volume("v", "1Gi", modes=("ReadOnlyMany",)), "incompatible accessMode"),
    ],
)
def test_a_named_volume_that_does_not_fit_says_why(vol: VolumeView, why: str | None) -> None:
    assert matching.check_volume_satisfies_claim(vol, claim()) == why


def _class(name: str, created: str, default: bool, mode: str | None = "Immediate") -> ClassView:
    ann = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    doc: dict[str, Any] = {"metadata": {"name": name, "annotations": ann, "creationTimestamp": created}}
    if mode:
        doc["volumeBindingMode"] = mode
    return msgspec.json.decode(msgspec.json.encode(doc), type=ClassView)


def test_the_newest_default_class_is_the_default() -> None:
    a = _class("a", "2026-01-01T00:00:00Z", True)
    b = _class("b", "2026-02-01T00:00:00Z", True)
    c = _class("c", "2026-03-01T00:00:00Z", False)
    same = _class("0", "2026-02-01T00:00:00Z", True)
    assert matching.default_class([a, b, c]) is b
    assert matching.default_class([a, b, same]) is same  # same age: by name
    assert matching.default_class([c]) is None


def test_class_and_delay_binding() -> None:
    classes = {
        "wffc": _class("wffc", "2026-01-01T00:00:00Z", False, "WaitForFirstConsumer"),
        "now": _class("now", "2026-01-01T00:00:00Z", False),
        "unset": _class("unset", "2026-01-01T00:00:00Z", False, None),
    }
    assert matching.delay_binding(claim(cls="wffc"), classes)
    assert not matching.delay_binding(claim(cls="now"), classes)
    assert not matching.delay_binding(claim(cls="missing"), classes)
    assert not matching.delay_binding(claim(cls=None), classes)
    with pytest.raises(matching.BindingModeError, match='VolumeBindingMode not set for StorageClass "unset"'):
        matching.delay_binding(claim(cls="unset"), classes)
    assert not matching.claim_has_class(claim(cls=None))
    assert matching.claim_has_class(claim(cls=""))
