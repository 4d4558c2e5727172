"""JSON patch, JSON merge patch and strategic merge patch, mostly on upstream's own test tables."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from kcm_apiserver.patch import PatchError, json_patch, strategic_merge_patch


class T:
    """A hand-written TypeInfo node."""

    def __init__(
        self,
        kind: str = "scalar",
        *,
        strategy: tuple[str, ...] = (),
        key: str | None = None,
        fields: dict[str, T] | None = None,
        elem: T | None = None,
    ) -> None:
        self.kind = kind
        self.patch_strategy = frozenset(strategy)
        self.patch_merge_key = key
        self.list_type: str | None = None
        self.list_map_keys: tuple[str, ...] = ()
        self.fields = fields or {}
        self._elem = elem

    def field(self, name: str) -> T | None:
        return self.fields.get(name)

    def elem(self) -> T | None:
        return self._elem


S = T()

# Upstream's strategicpatch test type `MergeItem`.
MERGE_ITEM = T("object")
MERGE_ITEM.fields.update(
    name=S,
    value=S,
    other=S,
    mergingList=T("array", strategy=("merge",), key="name", elem=MERGE_ITEM),
    nonMergingList=T("array", elem=MERGE_ITEM),
    mergingIntList=T("array", strategy=("merge",), elem=S),
    nonMergingIntList=T("array", elem=S),
    mergeItemPtr=T("array", strategy=("merge",), key="name", elem=MERGE_ITEM),
    simpleMap=T("map", elem=S),
    replacingItem=T("map", strategy=("replace",)),
    retainKeysMap=T(
        "object",
        strategy=("retainKeys",),
        fields={
            "name": S,
            "value": S,
            "other": S,
            "simpleMap": T("map", elem=S),
            "mergingIntList": T("array", strategy=("merge",), elem=S),
            "mergingList": T("array", strategy=("merge",), key="name", elem=MERGE_ITEM),
            "nonMergingList": T("array", elem=MERGE_ITEM),
        },
    ),
    retainKeysMergingList=T("array", strategy=("merge", "retainKeys"), key="name", elem=MERGE_ITEM),
)

CONTAINER = T(
    "object",
    fields={
        "name": S,
        "image": S,
        "args": T("array", elem=S),
        "ports": T("array", strategy=("merge",), key="containerPort", elem=T("object", fields={})),
        "env": T("array", strategy=("merge",), key="name", elem=T("object", fields={"name": S, "value": S})),
    },
)
VOLUME = T("object", fields={"name": S, "emptyDir": T("object"), "hostPath": T("object")})
POD = T(
    "object",
    fields={
        "metadata": T(
            "object",
            fields={
                "name": S,
                "labels": T("map", elem=S),
                "finalizers": T("array", strategy=("merge",), elem=S),
            },
        ),
        "spec": T(
            "object",
            fields={
                "containers": T("array", strategy=("merge",), key="name", elem=CONTAINER),
                "volumes": T("array", strategy=("merge", "retainKeys"), key="name", elem=VOLUME),
                "tolerations": T("array", elem=T("object")),
            },
        ),
    },
)


def _y(text: str) -> Any:
    return yaml.safe_load(text)


# (description, current, patch, expected): upstream's patch_test.go tables, where a case's
# "current" plus its two-way or three-way patch gives its "modified" or "result".
UPSTREAM_CASES = [
    (
        "unique scalars when merging lists",
        "mergingIntList: [1, 2]",
        "mergingIntList: [2, 3]",
        "mergingIntList: [1, 2, 3]",
    ),
    (
        "delete map from nested map",
        "simpleMap: {key1: 1, key2: 1}",
        "simpleMap: {$patch: delete}",
        "simpleMap: {}",
    ),
    (
        "delete all items from merging list",
        "mergingList: [{name: 1}, {name: 2}]",
        "mergingList: [{$patch: replace}]",
        "mergingList: []",
    ),
    ("merge empty merging lists", "mergingList: []", "mergingList: []", "mergingList: []"),
    ("delete all keys from map", "{name: 1, value: 1}", "{$patch: replace}", "{}"),
    (
        "add key and delete all keys from map",
        "{name: 1, value: 1}",
        "{other: a, $patch: replace}",
        "{other: a}",
    ),
    (
        "de-duplicate entries in a merging list",
        "mergingList: [{name: 1}, {name: 1}, {name: 2, value: a}, {name: 3}, {name: 3}]",
        "mergingList: [{name: 1, $patch: delete}, {name: 3, $patch: delete}]",
        "mergingList: [{name: 2, value: a}]",
    ),
    (
        "retainKeys map can delete a field when no retainKeys directive present",
        "retainKeysMap: {name: foo, value: a}",
        "retainKeysMap: {value: null}",
        "retainKeysMap: {name: foo}",
    ),
    (
        "retainKeys map merge an empty map",
        "retainKeysMap: {name: foo, value: a}",
        "retainKeysMap: {}",
        "retainKeysMap: {name: foo, value: a}",
    ),
    (
        "retainKeys list can change a field when no retainKeys directive present",
        "retainKeysMergingList: [{name: bar}, {name: foo, value: a}]",
        "retainKeysMergingList: [{name: foo, value: b}]",
        "retainKeysMergingList: [{name: bar}, {name: foo, value: b}]",
    ),
    (
        "preserve the order from the patch in a merging list",
        "mergingList: [{name: 1}, {name: 2, value: b}, {name: 3}]",
        "mergingList: [{name: 3, value: c}, {name: 1, value: a}, {name: 2, other: x}]",
        "mergingList: [{name: 3, value: c}, {name: 1, value: a}, {name: 2, value: b, other: x}]",
    ),
    (
        "preserve the order from the patch in a merging list 2",
        "mergingList: [{name: 1}, {name: 2, value: b}, {name: 3}]",
        "mergingList: [{name: 3, value: c}, {name: 1, value: a}]",
        "mergingList: [{name: 2, value: b}, {name: 3, value: c}, {name: 1, value: a}]",
    ),
    (
        "preserve the order from the patch in a merging int list",
        "mergingIntList: [1, 2, 3]",
        "mergingIntList: [3, 1]",
        "mergingIntList: [2, 3, 1]",
    ),
    (
        "$setElementOrder contains item that is not present in the list to be merged",
        "mergingList: [{name: 1}, {name: 3}]",
        "{$setElementOrder/mergingList: [{name: 3}, {name: 2}, {name: 1}],"
        " mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]}",
        "mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]",
    ),
    (
        "$setElementOrder contains item that is not present in the int list to be merged",
        "mergingIntList: [1, 3]",
        "$setElementOrder/mergingIntList: [3, 2, 1]",
        "mergingIntList: [3, 1]",
    ),
    (
        "add field and delete field from map with conflict",
        "{name: a, other: a}",
        "{name: null, value: 1}",
        "{value: 1, other: a}",
    ),
    (
        "delete field from nested map",
        "simpleMap: {key1: 1, key2: 1, other: a}",
        "simpleMap: {key2: null}",
        "simpleMap: {key1: 1, other: a}",
    ),
    (
        "replace list of scalars with conflict",
        "nonMergingIntList: [1, 4]",
        "nonMergingIntList: [2, 3]",
        "nonMergingIntList: [2, 3]",
    ),
    (
        "delete all maps from merging list with conflict",
        "mergingList: [{name: 1, other: a}, {name: 2, other: b}]",
        "mergingList: [{name: 1, $patch: delete}, {name: 2, $patch: delete}]",
        "mergingList: []",
    ),
    (
        "defined null values should propagate overwrite current fields (with conflict)",
        "{name: a, other: a}",
        "{name: 1, value: 1, other: null}",
        "{name: 1, value: 1}",
    ),
    (
        "delete items in lists of scalars",
        "mergingIntList: [1, 2, 3, 4]",
        "{$setElementOrder/mergingIntList: [1, 2], $deleteFromPrimitiveList/mergingIntList: [3]}",
        "mergingIntList: [1, 2, 4]",
    ),
    (
        "delete all duplicate items in lists of scalars",
        "mergingIntList: [1, 2, 3, 3, 4]",
        "{$setElementOrder/mergingIntList: [1, 2], $deleteFromPrimitiveList/mergingIntList: [3]}",
        "mergingIntList: [1, 2, 4]",
    ),
    (
        "merge lists of maps",
        "mergingList: [{name: 1, other: a}, {name: 2, value: 2, other: b}]",
        "{$setElementOrder/mergingList: [{name: 4}, {name: 1}, {name: 2}, {name: 3}],"
        " mergingList: [{name: 4, value: 4}, {name: 3, value: 3}]}",
        "mergingList: [{name: 4, value: 4}, {name: 1, other: a}, {name: 2, value: 2, other: b},"
        " {name: 3, value: 3}]",
    ),
    (
        "add field to map in merging list with conflict",
        "mergingList: [{name: 1, other: a}, {name: 3, value: 2, other: b}]",
        "{$setElementOrder/mergingList: [{name: 1}, {name: 2}],"
        " mergingList: [{name: 1, value: 1}, {name: 2, value: 2}]}",
        "mergingList: [{name: 1, value: 1, other: a}, {name: 2, value: 2}, {name: 3, value: 2, other: b}]",
    ),
    (
        "delete missing map from merging list with conflict",
        "mergingList: [{name: 3, other: a}]",
        "{$setElementOrder/mergingList: [{name: 2}], mergingList: [{name: 2}, {name: 1, $patch: delete}]}",
        "mergingList: [{name: 2}, {name: 3, other: a}]",
    ),
    (
        "delete field from map in merging list with conflict",
        "mergingList: [{name: 1, value: a, other: a}, {name: 2, value: 2}]",
        "{$setElementOrder/mergingList: [{name: 1}, {name: 2}], mergingList: [{name: 1, value: null}]}",
        "mergingList: [{name: 1, other: a}, {name: 2, value: 2}]",
    ),
    (
        "replace non merging list nested in merging list with deletion conflict",
        "mergingList: [{name: 1, other: a, nonMergingList: [{name: 2, value: 2}]}, {name: 2, other: b}]",
        "{$setElementOrder/mergingList: [{name: 1}, {name: 2}],"
        " mergingList: [{name: 1, nonMergingList: [{name: 1, value: 1}]}]}",
        "mergingList: [{name: 1, other: a, nonMergingList: [{name: 1, value: 1}]}, {name: 2, other: b}]",
    ),
    (
        "add field to map in merging list nested in merging list with deletion conflict",
        "mergingList: [{name: 1, other: a, mergingList: [{name: 2, value: 2, other: d}]},"
        " {name: 2, other: b}]",
        "{$setElementOrder/mergingList: [{name: 1}, {name: 2}], mergingList: [{$setElementOrder/mergingList:"
        " [{name: 2}, {name: 1}], name: 1, mergingList: [{name: 1, value: 1}]}]}",
        "mergingList: [{name: 1, other: a,"
        " mergingList: [{name: 2, value: 2, other: d}, {name: 1, value: 1}]}, {name: 2, other: b}]",
    ),
    (
        "add map to merging list by pointer",
        "mergeItemPtr: [{name: 1, other: a}, {name: 3}]",
        "{$setElementOrder/mergeItemPtr: [{name: 1}, {name: 2}], mergeItemPtr: [{name: 2}]}",
        "mergeItemPtr: [{name: 1, other: a}, {name: 2}, {name: 3}]",
    ),
    (
        "merge lists of scalars",
        "mergingIntList: [1, 2, 4]",
        "{$setElementOrder/mergingIntList: [1, 2, 3], mergingIntList: [3]}",
        "mergingIntList: [1, 2, 3, 4]",
    ),
    (
        "add an item in a list of primitives and preserve order",
        "mergingIntList: [1, 4, 2]",
        "{$setElementOrder/mergingIntList: [3, 1, 2], mergingIntList: [3]}",
        "mergingIntList: [3, 1, 4, 2]",
    ),
    (
        "delete an item in a list and preserve order",
        "mergingList: [{name: 1, other: a}, {name: 2, value: 2, other: b}, {name: 3, value: 3}]",
        "{$setElementOrder/mergingList: [{name: 2}, {name: 1}], mergingList: [{name: 3, $patch: delete}]}",
        "mergingList: [{name: 2, value: 2, other: b}, {name: 1, other: a}]",
    ),
    (
        "add and delete an item in a list and preserve order",
        "mergingList: [{name: 1, other: a}, {name: 2, value: 2, other: b}, {name: 3, value: 3}]",
        "{$setElementOrder/mergingList: [{name: 4}, {name: 2}, {name: 1}],"
        " mergingList: [{name: 4, value: 4}, {name: 3, $patch: delete}]}",
        "mergingList: [{name: 4, value: 4}, {name: 2, value: 2, other: b}, {name: 1, other: a}]",
    ),
    (
        "set elements order in a list with server-only items 2",
        "mergingList: [{name: 1, other: a}, {name: 2, value: 2}, {name: 9}, {name: 3, value: 3},"
        " {name: 4, value: 4}]",
        "$setElementOrder/mergingList: [{name: 2}, {name: 1}, {name: 4}, {name: 3}]",
        "mergingList: [{name: 2, value: 2}, {name: 1, other: a}, {name: 9}, {name: 4, value: 4},"
        " {name: 3, value: 3}]",
    ),
    (
        "set elements order in a int list with server-only items 3",
        "mergingIntList: [1, 2, 7, 9, 8, 3, 4]",
        "$setElementOrder/mergingIntList: [2, 1, 4, 3]",
        "mergingIntList: [2, 1, 7, 9, 8, 4, 3]",
    ),
    (
        "add and delete an item in a int list and preserve order",
        "mergingIntList: [1, 2, 3]",
        "{$setElementOrder/mergingIntList: [4, 2, 1], mergingIntList: [4],"
        " $deleteFromPrimitiveList/mergingIntList: [3]}",
        "mergingIntList: [4, 2, 1]",
    ),
    (
        "behavior of set element order for a merging list with duplicate",
        "mergingList: [{name: 1}, {name: 2, value: dup1}, {name: 3}, {name: 2, value: dup2}, {name: 4}]",
        "$setElementOrder/mergingList: [{name: 2}, {name: 1}, {name: 4}, {name: 3}, {name: 2}]",
        "mergingList: [{name: 2, value: dup1}, {name: 2, value: dup2}, {name: 1}, {name: 4}, {name: 3}]",
    ),
    (
        "retainKeys map should clear defaulted field with conflict (discriminated union)",
        "retainKeysMap: {name: type1, value: foo}",
        "retainKeysMap: {$retainKeys: [name, other], name: type2, other: bar}",
        "retainKeysMap: {name: type2, other: bar}",
    ),
    (
        "retainKeys map deletes a field and clears a field",
        "retainKeysMap: {name: foo, value: bar, other: a}",
        "retainKeysMap: {$retainKeys: [name], value: null}",
        "retainKeysMap: {name: foo}",
    ),
    (
        "retainKeys map adds a field in a nested map",
        "retainKeysMap: {name: foo, value: bar, simpleMap: {key1: a, key3: c}}",
        "retainKeysMap: {$retainKeys: [name, simpleMap, value], simpleMap: {key2: b}}",
        "retainKeysMap: {name: foo, value: bar, simpleMap: {key1: a, key2: b, key3: c}}",
    ),
]


@pytest.mark.parametrize(
    ("current", "patch", "expected"),
    [pytest.param(c, p, e, id=d) for d, c, p, e in UPSTREAM_CASES],
)
def test_strategic_merge_patch_matches_upstream_cases(current: str, patch: str, expected: str) -> None:
    assert strategic_merge_patch(_y(current), _y(patch), MERGE_ITEM) == _y(expected)


@pytest.mark.parametrize(
    ("current", "patch", "message"),
    [
        pytest.param(
            "mergingList: [{name: 1}, {name: 3}, {name: 2}]",
            "{$setElementOrder/mergingList: [{name: 1}, {name: 2}, {name: 3}],"
            " mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]}",
            "doesn't match",
            id="order in $setElementOrder and patch list must match",
        ),
        pytest.param(
            "mergingIntList: [1, 3, 2]",
            "{$setElementOrder/mergingIntList: [1, 2, 3], mergingIntList: [3, 1]}",
            "doesn't match",
            id="order in $setElementOrder and patch int list must match",
        ),
        pytest.param(
            "mergingList: [{name: 1, value: a}]",
            "mergingList: [{value: b}]",
            "does not contain declared merge key",
            id="missing merge key",
        ),
        pytest.param("{name: 1}", "{$patch: merge}", "unknown patch type", id="merge directive on a map"),
        pytest.param(
            "mergingList: [{name: 1}]",
            "mergingList: [{name: 1, $patch: merge}]",
            "cannot yet be specified",
            id="merge directive in a list",
        ),
        pytest.param(
            "retainKeysMap: {name: foo}",
            "retainKeysMap: {$retainKeys: [name], value: bar}",
            "retainKeys",
            id="patched field missing from $retainKeys",
        ),
        pytest.param("mergingIntList: [1]", "mergingIntList: [a]", "not identical", id="mixed element types"),
        pytest.param(
            "mergingIntList: [1]",
            "$deleteFromPrimitiveList/mergingIntList: 1",
            "primitive list",
            id="bad deletion list",
        ),
    ],
)
def test_strategic_merge_patch_rejects_malformed_patches(current: str, patch: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        strategic_merge_patch(_y(current), _y(patch), MERGE_ITEM)


POD_LIVE = {
    "metadata": {"name": "web", "labels": {"app": "web"}, "finalizers": ["a", "b"]},
    "spec": {
        "containers": [
            {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
            {"name": "sidecar", "image": "proxy:1"},
        ],
        "volumes": [{"name": "data", "emptyDir": {}}],
        "tolerations": [{"key": "a"}, {"key": "b"}],
    },
}


@pytest.mark.parametrize(
    ("patch", "expected_path", "expected"),
    [
        pytest.param(
            {"spec": {"containers": [{"name": "app", "image": "app:2"}]}},
            ("spec", "containers"),
            [
                {"name": "app", "image": "app:2", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "proxy:1"},
            ],
            id="container merged by name keeps its other fields",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "debug", "image": "busybox"}]}},
            ("spec", "containers"),
            [
                {"name": "debug", "image": "busybox"},
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "proxy:1"},
            ],
            id="new container without setElementOrder goes first like upstream",
        ),
        pytest.param(
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}, {"name": "debug"}],
                    "containers": [{"name": "debug", "image": "busybox"}],
                }
            },
            ("spec", "containers"),
            [
                {"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "image": "proxy:1"},
                {"name": "debug", "image": "busybox"},
            ],
            id="setElementOrder appends a new container",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}},
            ("spec", "containers"),
            [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}]}],
            id="delete directive removes a container",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "2"}]}]}},
            ("spec", "containers", 0, "env"),
            [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}],
            id="nested env list merges by name",
        ),
        pytest.param(
            {"metadata": {"finalizers": ["c"]}},
            ("metadata", "finalizers"),
            ["c", "a", "b"],
            id="primitive merge list is a union",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}},
            ("metadata", "finalizers"),
            ["b"],
            id="deleteFromPrimitiveList removes a finalizer",
        ),
        pytest.param(
            {"spec": {"tolerations": [{"key": "c"}]}},
            ("spec", "tolerations"),
            [{"key": "c"}],
            id="list without merge strategy is replaced",
        ),
        pytest.param(
            {
                "spec": {
                    "volumes": [
                        {"name": "data", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}
                    ]
                }
            },
            ("spec", "volumes"),
            [{"name": "data", "hostPath": {"path": "/x"}}],
            id="retainKeys in a list item switches the volume source",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "app", "args": ["x"]}]}},
            ("spec", "containers", 0, "args"),
            ["x"],
            id="field missing from live takes the patch value",
        ),
        pytest.param(
            {"metadata": {"labels": {"app": None, "tier": "fe"}}},
            ("metadata", "labels"),
            {"tier": "fe"},
            id="null deletes a map entry",
        ),
        pytest.param(
            {"spec": {"extra": {"a": {"b": None, "c": 1}}}},
            ("spec", "extra"),
            {"a": {"c": 1}},
            id="field unknown to the schema merges like a JSON merge patch",
        ),
    ],
)
def test_strategic_merge_patch_on_a_pod(
    patch: dict[str, Any], expected_path: tuple[Any, ...], expected: Any
) -> None:
    result: Any = strategic_merge_patch(POD_LIVE, patch, POD)
    for step in expected_path:
        result = result[step]
    assert result == expected


def test_strategic_merge_patch_does_not_mutate_inputs() -> None:
    live = copy.deepcopy(POD_LIVE)
    patch = {
        "spec": {"containers": [{"name": "app", "image": "app:2"}, {"name": "sidecar", "$patch": "delete"}]}
    }
    patch_before = copy.deepcopy(patch)
    result = strategic_merge_patch(live, patch, POD)
    result["metadata"]["labels"]["mutated"] = "yes"
    assert live == POD_LIVE
    assert patch == patch_before


def test_strategic_merge_patch_without_schema_is_a_json_merge_patch() -> None:
    live = {"spec": {"items": [{"name": "a"}], "keep": 1}}
    patch = {"spec": {"items": [{"name": "b"}], "$patch": "replace"}}
    assert strategic_merge_patch(live, patch, None) == {
        "spec": {"items": [{"name": "b"}], "keep": 1, "$patch": "replace"}
    }


# RFC 6902 appendix A, plus the upstream json-patch library's extensions.
JSON_PATCH_CASES = [
    (
        "A.1 add an object member",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux"}],
        {"baz": "qux", "foo": "bar"},
    ),
    (
        "A.2 add an array element",
        {"foo": ["bar", "baz"]},
        [{"op": "add", "path": "/foo/1", "value": "qux"}],
        {"foo": ["bar", "qux", "baz"]},
    ),
    (
        "A.3 remove an object member",
        {"baz": "qux", "foo": "bar"},
        [{"op": "remove", "path": "/baz"}],
        {"foo": "bar"},
    ),
    (
        "A.4 remove an array element",
        {"foo": ["bar", "qux", "baz"]},
        [{"op": "remove", "path": "/foo/1"}],
        {"foo": ["bar", "baz"]},
    ),
    (
        "A.5 replace a value",
        {"baz": "qux", "foo": "bar"},
        [{"op": "replace", "path": "/baz", "value": "boo"}],
        {"baz": "boo", "foo": "bar"},
    ),
    (
        "A.6 move a value",
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    (
        "A.7 move an array element",
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    (
        "A.8 test a value success",
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    (
        "A.10 add a nested member object",
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    (
        "A.11 ignore unrecognized elements",
        {"foo": "bar"},
        [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
        {"foo": "bar", "baz": "qux"},
    ),
    (
        "A.14 escape ordering",
        {"/": 9, "~1": 10},
        [{"op": "test", "path": "/~01", "value": 10}],
        {"/": 9, "~1": 10},
    ),
    (
        "A.16 add an array value",
        {"foo": ["bar"]},
        [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
        {"foo": ["bar", ["abc", "def"]]},
    ),
    (
        "copy a value",
        {"a": {"b": 1}},
        [{"op": "copy", "from": "/a", "path": "/c"}],
        {"a": {"b": 1}, "c": {"b": 1}},
    ),
    (
        "negative index counts from the end",
        {"a": [1, 2, 3]},
        [{"op": "remove", "path": "/a/-1"}],
        {"a": [1, 2]},
    ),
    ("escaped slash in a key", {"a/b": 1}, [{"op": "replace", "path": "/a~1b", "value": 2}], {"a/b": 2}),
    ("replace the whole document", {"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2}),
    ("test null matches a missing member", {"a": 1}, [{"op": "test", "path": "/b", "value": None}], {"a": 1}),
    (
        "operations apply in order",
        {"metadata": {"labels": {}}},
        [
            {"op": "add", "path": "/metadata/labels/app", "value": "web"},
            {"op": "move", "from": "/metadata/labels/app", "path": "/metadata/labels/name"},
        ],
        {"metadata": {"labels": {"name": "web"}}},
    ),
]


@pytest.mark.parametrize(
    ("doc", "ops", "expected"), [pytest.param(d, o, e, id=i) for i, d, o, e in JSON_PATCH_CASES]
)
def test_json_patch_applies_operations(doc: Any, ops: Any, expected: Any) -> None:
    before = copy.deepcopy(doc)
    assert json_patch(doc, ops) == expected
    assert doc == before


@pytest.mark.parametrize(
    ("doc", "ops", "message"),
    [
        pytest.param(
            {"baz": "qux"},
            [{"op": "test", "path": "/baz", "value": "bar"}],
            "testing value /baz failed",
            id="A.9",
        ),
        pytest.param(
            {"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], "missing path", id="A.12"
        ),
        pytest.param(
            {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}], "failed", id="A.15"
        ),
        pytest.param({"a": True}, [{"op": "test", "path": "/a", "value": 1}], "failed", id="true is not 1"),
        pytest.param({"a": 1}, [{"op": "remove", "path": "/b"}], "nonexistent", id="remove a missing key"),
        pytest.param(
            {"a": [1]},
            [{"op": "replace", "path": "/a/1", "value": 2}],
            "out of bounds",
            id="replace past the end",
        ),
        pytest.param(
            {"a": [1]}, [{"op": "add", "path": "/a/5", "value": 2}], "out of bounds", id="index past the end"
        ),
        pytest.param(
            {"a": [1]}, [{"op": "add", "path": "/a/x", "value": 2}], "invalid array index", id="bad index"
        ),
        pytest.param(
            {"a": [1]},
            [{"op": "add", "path": "/a/1_0", "value": 2}],
            "invalid array index",
            id="index with underscore",
        ),
        pytest.param(
            {"a": {"b": 1}},
            [{"op": "move", "from": "/a", "path": "/a/b/c"}],
            "own child",
            id="move into child",
        ),
        pytest.param({"a": 1}, [{"op": "add", "path": "/b"}], "missing a value", id="add without value"),
        pytest.param({"a": 1}, [{"op": "frobnicate", "path": "/a"}], "unexpected", id="unknown op"),
        pytest.param(
            {"a": 1},
            [{"op": "add", "path": "b", "value": 1}],
            "must be empty or start with",
            id="bad pointer",
        ),
        pytest.param({"a": 1}, {"op": "add"}, "must be a list", id="patch is not a list"),
    ],
)
def test_json_patch_rejects_failing_operations(doc: Any, ops: Any, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        json_patch(doc, ops)


def test_json_patch_failure_leaves_document_untouched() -> None:
    doc = {"a": 1}
    with pytest.raises(PatchError):
        json_patch(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 2}])
    assert doc == {"a": 1}


def test_json_patch_replace_creates_a_missing_object_member() -> None:
    # kube-apiserver's json-patch (v4) lets replace add a member, unlike RFC 6902; kubectl
    # rollout undo relies on it for /metadata/annotations.
    assert json_patch({"a": 1}, [{"op": "replace", "path": "/b", "value": 2}]) == {"a": 1, "b": 2}
