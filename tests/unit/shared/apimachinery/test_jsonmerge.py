"""kcm_shared.apimachinery.jsonmerge: RFC 7386 merge patch with the RFC's own examples (appendix
A), and the deep copy every patch starts from."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_shared.apimachinery import jsonmerge


@pytest.mark.parametrize(
    ("doc", "patch", "want"),
    [  # RFC 7386 appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch(doc: Any, patch: Any, want: Any) -> None:
    before = (repr(doc), repr(patch))
    assert jsonmerge.merge_patch(doc, patch) == want
    assert (repr(doc), repr(patch)) == before  # arguments left alone


def test_deep_copy_shares_nothing_and_copies_integers_beyond_64_bits() -> None:
    doc = {"a": [{"b": 1}], "big": 2**70}
    copied = jsonmerge.deep_copy(doc)
    assert copied == doc
    copied["a"][0]["b"] = 2
    assert doc["a"][0]["b"] == 1


def test_merge_patch_does_not_share_structure_with_inputs() -> None:
    doc = {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}}
    result = jsonmerge.merge_patch(doc, {"spec": {"x": 2}})
    result["metadata"]["labels"]["b"] = "2"
    assert doc == {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}}
