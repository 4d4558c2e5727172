"""Names from generateName: upstream's alphabet and length, and a retry on a taken name."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from kcm_apiserver.operations import Api, Ctx
from kcm_apiserver.registry import Registry
from kcm_apiserver.store import Store

ALPHABET = set("bcdfghjklmnpqrstvwxz2456789")


def configmaps(api: Api) -> Ctx:
    rt = api.registry.lookup("", "v1", "configmaps")
    assert rt is not None
    return Ctx(rt, namespace="default")


def create(api: Api, meta: dict[str, str]) -> str:
    made = api.create(configmaps(api), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta})
    name: str = made["metadata"]["name"]
    return name


def test_suffix_uses_upstreams_alphabet_and_long_bases_are_cut() -> None:
    api = Api(Store(), Registry())
    name = create(api, {"generateName": "web-"})
    assert name.startswith("web-") and len(name) == 9 and set(name[4:]) <= ALPHABET
    long = create(api, {"generateName": "x" * 70})
    assert long.startswith("x" * 58) and len(long) == 63


def test_a_taken_name_is_generated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    api = Api(Store(), Registry())
    taken = create(api, {"name": "web-bbbbb"})
    suffixes: Iterator[list[str]] = iter([list("bbbbb"), list("bbbbb"), list("ccccc")])
    monkeypatch.setattr(random, "choices", lambda population, k: next(suffixes))
    assert create(api, {"generateName": "web-"}) == "web-ccccc" != taken
