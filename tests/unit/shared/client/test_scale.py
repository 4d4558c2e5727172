"""kcm_shared.client.scale: workloads mapped without discovery, other kinds through a mapper that is
read again once on a miss (a CRD added since), and a clear error when even that misses."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery, scale

WIDGETS = gvr.Resource("example.com", "v1", "widgets")


def _mapper(*kinds: tuple[gvr.Resource, str]) -> discovery.Mapper:
    return discovery.Mapper(
        tuple(discovery.ApiResource(res, kind, True, frozenset({"get"}), True) for res, kind in kinds)
    )


def _targets(
    monkeypatch: pytest.MonkeyPatch, answers: list[discovery.Mapper]
) -> tuple[scale.ScaleTargets, list[int]]:
    calls: list[int] = []

    async def discover(_: Any) -> discovery.Mapper:
        calls.append(1)
        return answers[min(len(calls), len(answers)) - 1]

    monkeypatch.setattr(discovery, "discover", discover)
    return scale.ScaleTargets(client=None), calls  # type: ignore[arg-type]


def test_workloads_need_no_discovery(monkeypatch: pytest.MonkeyPatch) -> None:
    targets, calls = _targets(monkeypatch, [_mapper()])
    res = asyncio.run(targets.resource("apps/v1", "StatefulSet"))
    assert res == gvr.Resource("apps", "v1", "statefulsets")
    assert asyncio.run(targets.resource("v1", "ReplicationController")).resource == "replicationcontrollers"
    assert calls == []
    assert targets.path(res, "ns", "web") == "/apis/apps/v1/namespaces/ns/statefulsets/web/scale"


def test_a_kind_added_since_the_last_discovery_is_found_by_reading_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    targets, calls = _targets(monkeypatch, [_mapper(), _mapper((WIDGETS, "Widget"))])
    assert asyncio.run(targets.resource("example.com/v1", "Widget")) == WIDGETS
    assert len(calls) == 2
    # Known now: the next lookup uses the mapper it has.
    assert asyncio.run(targets.resource("example.com/v1", "Widget")) == WIDGETS
    assert len(calls) == 2


def test_an_unknown_kind_is_a_mapping_error_after_one_fresh_look(monkeypatch: pytest.MonkeyPatch) -> None:
    targets, calls = _targets(monkeypatch, [_mapper()])
    with pytest.raises(discovery.MappingError):
        asyncio.run(targets.resource("example.com/v1", "Gadget"))
    assert len(calls) == 2
