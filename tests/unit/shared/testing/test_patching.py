"""kcm_shared.testing.patching: the strategic merge patch subset, with upstream's directives
(RFC 7386 merge patch: tests/unit/shared/apimachinery/test_jsonmerge.py)."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_shared.testing import patching

CONDITIONS = [{"type": "Ready", "status": "False"}, {"type": "DisruptionTarget", "status": "True"}]


@pytest.mark.parametrize(
    ("doc", "patch", "want"),
    [
        pytest.param(
            {"status": {"conditions": CONDITIONS}},
            {
                "status": {
                    "conditions": [{"type": "Ready", "status": "True"}, {"type": "New", "status": "True"}]
                }
            },
            {
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        CONDITIONS[1],
                        {"type": "New", "status": "True"},
                    ]
                }
            },
            id="a-list-with-a-merge-key-merges-by-it",
        ),
        pytest.param(
            {"metadata": {"ownerReferences": [{"uid": "a"}, {"uid": "b"}]}},
            {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "a"}]}},
            {"metadata": {"ownerReferences": [{"uid": "b"}]}},
            id="patch-delete-removes-the-item",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["a", "b"]}},
            {"metadata": {"finalizers": ["c", "a"]}},
            {"metadata": {"finalizers": ["a", "b", "c"]}},
            id="finalizers-are-a-set",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["a", "b"]}},
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "x"]}},
            {"metadata": {"finalizers": ["b"]}},
            id="delete-from-primitive-list",
        ),
        pytest.param(
            {"spec": {"args": ["a", "b"]}, "metadata": {"labels": {"x": "1", "y": "2"}}},
            {"spec": {"args": ["c"]}, "metadata": {"labels": {"x": None}}, "$setElementOrder/args": ["c"]},
            {"spec": {"args": ["c"]}, "metadata": {"labels": {"y": "2"}}},
            id="other-lists-replace-null-deletes-order-directives-drop",
        ),
    ],
)
def test_strategic_merge_patch(doc: Any, patch: Any, want: Any) -> None:
    before = repr(doc)
    assert patching.strategic_merge_patch(doc, patch) == want
    assert repr(doc) == before  # the held object is not changed in place
