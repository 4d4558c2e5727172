"""Field ownership (`metadata.managedFields`) and server-side apply, after upstream's fieldmanager.

The write path calls `track_update` on every create, update and non-apply patch, and
`server_side_apply` for `application/apply-patch+yaml` patches. Ownership is kept as
upstream's structured-merge-diff does: a set of field paths per manager, stored in the
FieldsV1 JSON form (`f:<field>`, `k:<key fields as JSON>` for items of lists keyed by
merge keys, `v:<JSON value>` for items of sets, `.` for "this node itself"). Managers are
identified as upstream does: Update entries by (manager, apiVersion, subresource), Apply
entries by (manager, subresource).

Approximations: objects are plain JSON, so a field's "added" status is seen from the
dicts rather than from Go zero values, and managers' sets are not converted between API
versions. Upstream's cap of ten Update entries is not applied.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from kcm_shared.apimachinery.jsonmerge import deep_copy

from kcm_apiserver import typeinfo
from kcm_apiserver.errors import ApiError
from kcm_apiserver.patch import PatchError
from kcm_apiserver.typeinfo import TypeInfo

Obj = dict[str, Any]

# Metadata the server owns; upstream strips these paths from every manager's set.
_SERVER_METADATA = (
    "name",
    "namespace",
    "creationTimestamp",
    "selfLink",
    "uid",
    "generation",
    "managedFields",
    "resourceVersion",
)
# Upstream completes list-map keys from schema defaults; `protocol` (ports of containers,
# services, endpoints) is the only defaulted key among built-in types.
_KEY_DEFAULTS = {"protocol": "TCP"}
_PE_ORDER = {"f": 0, "k": 1, "v": 2, "i": 3}
# The default field manager of `kubectl apply --server-side`, and the annotation its
# client-side mode keeps the applied configuration in.
_KUBECTL_SSA_MANAGER = "kubectl"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
# An absent map key or list item, as opposed to a null value.
_MISSING: Any = object()


class FieldSet:
    """A set of field paths, kept as a trie of FieldsV1 path elements.

    A path is a member when the node itself is owned; `children` holds the sets below a
    path element whether or not that element is itself a member. Set operations share
    unchanged subtrees with their operands, so a built set must not be modified in place.
    """

    __slots__ = ("children", "members")

    def __init__(self) -> None:
        self.members: set[str] = set()
        self.children: dict[str, FieldSet] = {}

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, FieldSet) and self.members == other.members and self.children == other.children
        )

    def __repr__(self) -> str:
        return f"FieldSet({self.to_fields_v1()!r})"

    def empty(self) -> bool:
        return not self.members and not self.children

    def child(self, pe: str) -> FieldSet:
        """The set below `pe`, created when missing."""
        found = self.children.get(pe)
        if found is None:
            found = self.children[pe] = FieldSet()
        return found

    def has(self, path: Sequence[str]) -> bool:
        node: FieldSet | None = self
        for pe in path[:-1]:
            node = node.children.get(pe) if node is not None else None
        return node is not None and path[-1] in node.members

    def union(self, other: FieldSet) -> FieldSet:
        if other.empty():
            return self
        out = FieldSet()
        out.members = self.members | other.members
        out.children = dict(self.children)
        for pe, theirs in other.children.items():
            mine = self.children.get(pe)
            out.children[pe] = theirs if mine is None else mine.union(theirs)
        return out

    def difference(self, other: FieldSet) -> FieldSet:
        # Untouched subtrees are shared, so this costs the size of `other`, not of `self`.
        if other.empty():
            return self
        out = FieldSet()
        out.members = self.members - other.members
        out.children = dict(self.children)
        for pe, theirs in other.children.items():
            mine = self.children.get(pe)
            if mine is not None:
                rest = mine.difference(theirs)
                if rest.empty():
                    del out.children[pe]
                else:
                    out.children[pe] = rest
        return out

    def intersection(self, other: FieldSet) -> FieldSet:
        out = FieldSet()
        out.members = self.members & other.members
        for pe, mine in self.children.items():
            theirs = other.children.get(pe)
            if theirs is not None:
                both = mine.intersection(theirs)
                if not both.empty():
                    out.children[pe] = both
        return out

    def paths(self) -> Iterator[tuple[str, ...]]:
        """Member paths, depth first, in upstream's path-element order."""
        for pe in _pe_sorted(self.members | self.children.keys()):
            if pe in self.members:
                yield (pe,)
            if pe in self.children:
                for rest in self.children[pe].paths():
                    yield (pe, *rest)

    def to_fields_v1(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for pe in _pe_sorted(self.members | self.children.keys()):
            below = self.children.get(pe)
            node = below.to_fields_v1() if below is not None else {}
            if below is not None and pe in self.members:
                node = {".": {}, **node}
            out[pe] = node
        return out

    @classmethod
    def from_fields_v1(cls, data: Any) -> FieldSet:
        """Parse the FieldsV1 form; ValueError when it is malformed."""
        if not isinstance(data, dict):
            raise ValueError("FieldsV1 must be a JSON object")
        out = cls()
        for pe, below in data.items():
            if not isinstance(pe, str) or pe[:2] not in ("f:", "k:", "v:", "i:"):
                raise ValueError(f"invalid FieldsV1 path element {pe!r}")
            if not isinstance(below, dict):
                raise ValueError(f"FieldsV1 value under {pe!r} must be an object")
            if not below or "." in below:
                out.members.add(pe)
            rest = {k: v for k, v in below.items() if k != "."}
            if rest:
                out.children[pe] = cls.from_fields_v1(rest)
        return out


def _pe_sort_key(pe: str) -> tuple[int, str]:
    return _PE_ORDER.get(pe[0], 4), pe[2:]


def _pe_sorted(pes: Iterable[str]) -> list[str]:
    """Path elements in upstream's order (f:, k:, v:, then i:). Without index elements, which
    are rare, that is plain string order, and a sort without a key function is several times
    faster: the order of every managedFields level written goes through here."""
    out = sorted(pes)
    at = bisect.bisect_left(out, "i:")
    if at < len(out) and out[at].startswith("i:"):
        out.sort(key=_pe_sort_key)
    return out


# --- FieldsV1 documents edited in place of parsed sets ----------------------------------------
# A write changes few of a manager's fields, so its entry is edited in the FieldsV1 form it is
# stored in: only the levels on the changed paths are copied, and nothing is parsed or
# re-encoded (a pod's finalizer removal spent most of its field tracking doing both).


def _raw_node(member: bool, children: dict[str, Any]) -> dict[str, Any] | None:
    """The FieldsV1 value of a path element; None where it owns nothing and has nothing below."""
    if member:
        return {".": {}, **children} if children else {}
    return children or None


def _raw_children(node: Any) -> dict[str, Any]:
    if not isinstance(node, dict):
        # Unparsed FieldsV1 can be malformed; the caller drops what it cannot compute.
        raise ValueError("FieldsV1 values must be objects")
    return {pe: below for pe, below in node.items() if pe != "."} if "." in node else node


def _raw_minus(raw: dict[str, Any], paths: FieldSet) -> dict[str, Any]:
    """`raw` less the members of `paths` (FieldSet.difference); `raw` itself is not changed."""
    out: dict[str, Any] | None = None
    for pe in paths.members | paths.children.keys():
        node = raw.get(pe)
        if node is None:
            continue
        children = _raw_children(node)
        member = not node or "." in node
        below = paths.children.get(pe)
        rest = _raw_minus(children, below) if below is not None and children else children
        keep = member and pe not in paths.members
        if keep == member and rest is children:
            continue
        if out is None:
            out = dict(raw)
        value = _raw_node(keep, rest)
        if value is None:
            del out[pe]
        else:
            out[pe] = value
    return raw if out is None else out


def _raw_plus(raw: dict[str, Any], paths: FieldSet) -> dict[str, Any]:
    """`raw` with the members of `paths` added (FieldSet.union), levels kept in upstream's order;
    `raw` itself is not changed."""
    out: dict[str, Any] | None = None
    added = False
    for pe in paths.members | paths.children.keys():
        node = raw.get(pe)
        children = _raw_children(node) if node is not None else {}
        member = node is not None and (not node or "." in node)
        below = paths.children.get(pe)
        more = _raw_plus(children, below) if below is not None else children
        want = member or pe in paths.members
        if node is not None and want == member and more is children:
            continue
        if out is None:
            out = dict(raw)
        added = added or node is None
        out[pe] = _raw_node(want, more) or {}
    if out is None:
        return raw
    return {pe: out[pe] for pe in _pe_sorted(out)} if added else out


def path_string(path: Sequence[str]) -> str:
    """A path as upstream prints it: `.spec.containers[name="nginx"].image`."""
    parts = []
    for pe in path:
        kind, body = pe[0], pe[2:]
        if kind == "f":
            parts.append("." + body)
        elif kind == "k":
            key = json.loads(body)
            parts.append("[" + ",".join(f"{k}={_compact(key[k])}" for k in sorted(key)) + "]")
        elif kind == "v":
            parts.append(f"[={body}]")
        else:
            parts.append(f"[{body}]")
    return "".join(parts)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


# --- Shapes of values -------------------------------------------------------------------------


def _list_keys(info: TypeInfo | None) -> tuple[str, tuple[str, ...]]:
    """('map', keys), ('set', ()) or ('atomic', ()), from list-type markers or patch tags."""
    if info is None:
        return "atomic", ()
    merge_key = (info.patch_merge_key,) if info.patch_merge_key else ()
    if info.list_type == "map":
        keys = info.list_map_keys or merge_key
        return ("map", keys) if keys else ("atomic", ())
    if info.list_type in ("set", "atomic"):
        return info.list_type, ()
    if "merge" in info.patch_strategy:
        return ("map", merge_key) if merge_key else ("set", ())
    return "atomic", ()


def _shape(value: Any, info: TypeInfo | None) -> str:
    """How apply walks a value: 'struct', 'map', 'list-map', 'list-set' or 'leaf'."""
    if isinstance(value, dict):
        if info is None or info.kind == "map":
            return "map"
        return "struct" if info.kind == "object" else "leaf"
    if isinstance(value, list):
        kind, _ = _list_keys(info)
        if kind == "map" and all(isinstance(item, dict) for item in value):
            return "list-map"
        return "list-set" if kind == "set" else "leaf"
    return "leaf"


def _item_pe(item: Any, shape: str, info: TypeInfo | None) -> str:
    if shape == "list-set":
        return "v:" + _compact(item)
    key = {}
    for name in _list_keys(info)[1]:
        if name in item:
            key[name] = item[name]
        elif name in _KEY_DEFAULTS:
            key[name] = _KEY_DEFAULTS[name]
        else:
            raise PatchError(f'associative list with keys has an element that omits key field "{name}"')
    return "k:" + _compact(key)


def _items(value: list[Any], shape: str, info: TypeInfo | None) -> dict[str, Any]:
    """List items by path element; the first of duplicates wins."""
    found: dict[str, Any] = {}
    for item in value:
        found.setdefault(_item_pe(item, shape, info), item)
    return found


# --- The fields an object sets ----------------------------------------------------------------


def fields_of(obj: Any, info: TypeInfo | None) -> FieldSet:
    """The paths an applied configuration sets, as upstream's ToFieldSet counts them.

    Scalars, atomic lists and empty or null values are members; so are map entries and
    list items. Named struct fields holding more structure are only parents.
    """
    out = FieldSet()
    _collect(obj, info, out)
    return out


def _collect(value: Any, info: TypeInfo | None, node: FieldSet) -> None:
    shape = _shape(value, info)
    if shape in ("struct", "map"):
        for key, child in value.items():
            pe = "f:" + key
            child_info = typeinfo.child(info, key)
            child_shape = _shape(child, child_info)
            named = shape == "struct" and child_info is not None
            if not named or child_shape == "leaf" or child is None or child == {}:
                node.members.add(pe)
            if child_shape != "leaf":
                _collect_below(child, child_info, node, pe)
    elif shape in ("list-map", "list-set"):
        elem = info.elem() if info is not None else None
        for item in value:
            pe = _item_pe(item, shape, info)
            node.members.add(pe)
            if shape == "list-map":
                _collect_below(item, elem, node, pe)


def _collect_below(value: Any, info: TypeInfo | None, node: FieldSet, pe: str) -> None:
    below = node.child(pe)
    _collect(value, info, below)
    if below.empty():
        del node.children[pe]


# --- What changed between two versions of an object -------------------------------------------


def _compare(old: Any, new: Any, info: TypeInfo | None) -> tuple[FieldSet, FieldSet]:
    """(added or modified, removed) paths between two versions, as upstream's Compare."""
    changed, removed = FieldSet(), FieldSet()
    _diff_children(old, new, info, changed, removed)
    return changed, removed


def _diff_children(old: Any, new: Any, info: TypeInfo | None, changed: FieldSet, removed: FieldSet) -> None:
    """Record changes below one path whose old and new values have the same container shape."""
    shape = _shape(new, info)
    if shape in ("struct", "map"):
        for key in old.keys() | new.keys():
            before, after = old.get(key, _MISSING), new.get(key, _MISSING)
            _diff_value("f:" + key, before, after, typeinfo.child(info, key), shape, changed, removed)
    else:
        elem = info.elem() if info is not None else None
        old_items, new_items = _items(old, shape, info), _items(new, shape, info)
        for pe in old_items.keys() | new_items.keys():
            before, after = old_items.get(pe, _MISSING), new_items.get(pe, _MISSING)
            _diff_value(pe, before, after, elem, shape, changed, removed)


def _diff_value(
    pe: str, old: Any, new: Any, info: TypeInfo | None, parent: str, changed: FieldSet, removed: FieldSet
) -> None:
    if new is _MISSING:
        _record_whole(pe, old, info, parent, removed)
        return
    if old is _MISSING:
        _record_whole(pe, new, info, parent, changed)
        return
    # Plain equality runs at C speed; it only conflates `true` with `1`, which no schema allows.
    if old is new or old == new:
        return
    old_shape, new_shape = _shape(old, info), _shape(new, info)
    if old_shape != new_shape or new_shape == "leaf":
        changed.members.add(pe)
        _record_below(pe, old, info, old_shape, removed)
        _record_below(pe, new, info, new_shape, changed)
        return
    below_changed, below_removed = FieldSet(), FieldSet()
    _diff_children(old, new, info, below_changed, below_removed)
    if not below_changed.empty():
        changed.children[pe] = below_changed
    if not below_removed.empty():
        removed.children[pe] = below_removed


def _record_whole(pe: str, value: Any, info: TypeInfo | None, parent: str, into: FieldSet) -> None:
    """A whole subtree appeared or disappeared."""
    shape = _shape(value, info)
    # Upstream owns a node that appeared unless it is a struct that Go's zero value already had;
    # plain JSON cannot tell, so non-empty structs under structs are treated as always present.
    if parent != "struct" or info is None or shape != "struct" or not value:
        into.members.add(pe)
    _record_below(pe, value, info, shape, into)


def _record_below(pe: str, value: Any, info: TypeInfo | None, shape: str, into: FieldSet) -> None:
    if shape in ("struct", "map"):
        items = [("f:" + k, v, typeinfo.child(info, k)) for k, v in value.items()]
    elif shape in ("list-map", "list-set"):
        elem = info.elem() if info is not None else None
        items = [(_item_pe(item, shape, info), item, elem) for item in value]
    else:
        return
    below = into.children.get(pe) or FieldSet()
    for child_pe, child, child_info in items:
        _record_whole(child_pe, child, child_info, shape, below)
    if not below.empty():
        into.children[pe] = below


# --- Merging an applied configuration ---------------------------------------------------------


def _merge(live: Any, config: Any, info: TypeInfo | None) -> Any:
    """Merge an applied configuration into (a copy of) the live value, as upstream's typed merge."""
    shape = _shape(config, info)
    if shape in ("struct", "map"):
        out = live if isinstance(live, dict) else {}
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = _merge(out.get(key), value, typeinfo.child(info, key))
        return out
    if shape in ("list-map", "list-set") and isinstance(live, list) and _shape(live, info) == shape:
        return _merge_list(live, config, info, shape)
    if shape in ("list-map", "list-set"):
        return _merge_list([], config, info, shape)
    return deep_copy(config)


def _merge_list(live: list[Any], config: list[Any], info: TypeInfo | None, shape: str) -> list[Any]:
    """Merge list items by key; configured items keep their order, live-only items their place."""
    elem = info.elem() if info is not None else None
    config_pes = [_item_pe(item, shape, info) for item in config]
    config_items: dict[str, Any] = {}
    for pe, item in zip(config_pes, config, strict=True):
        if pe in config_items:
            raise PatchError(f"duplicate entries for key {path_string([pe])}")
        config_items[pe] = item
    live_pes = [_item_pe(item, shape, info) for item in live]
    live_items = _items(live, shape, info)
    shared = iter([pe for pe in config_pes if pe in live_items])
    next_shared = next(shared, None)
    done: set[str] = set()
    out: list[Any] = []

    def take(pe: str) -> None:
        done.add(pe)
        merged = config_items[pe]
        if shape == "list-map":
            merged = _merge(live_items.get(pe), merged, elem)
        out.append(deep_copy(merged) if shape == "list-set" else merged)

    li = ri = 0
    while li < len(live) or ri < len(config):
        if li < len(live) and ri < len(config):
            pe = live_pes[li]
            if pe == config_pes[ri]:
                take(pe)
                li, ri = li + 1, ri + 1
                next_shared = next(shared, None)
                continue
            if pe in config_items and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(live):
            pe = live_pes[li]
            if pe not in config_items:
                out.append(live[li])
                li += 1
                continue
            if pe in done:
                li += 1
                continue
        pe = config_pes[ri]
        take(pe)
        ri += 1
        if pe == next_shared:
            next_shared = next(shared, None)
    return out


def _named_fields_as_members(fields: FieldSet, info: TypeInfo | None) -> FieldSet:
    """Also own each named struct field that has owned fields below it (upstream's
    EnsureNamedFieldsAreMembers), so pruning can drop a struct emptied of owned fields."""
    out = FieldSet()
    out.members = set(fields.members)
    for pe, below in fields.children.items():
        if pe.startswith("f:"):
            child_info = typeinfo.child(info, pe[2:])
            if info is not None and info.kind == "object" and child_info is not None:
                out.members.add(pe)
        else:
            child_info = info.elem() if info is not None else None
        out.children[pe] = _named_fields_as_members(below, child_info)
    return out


def _remove_fields(value: Any, fields: FieldSet, info: TypeInfo | None) -> None:
    """Remove every member path of `fields` from `value`, in place."""
    shape = _shape(value, info)
    if shape in ("struct", "map"):
        for pe in fields.members:
            if pe.startswith("f:"):
                value.pop(pe[2:], None)
        for pe, below in fields.children.items():
            key = pe[2:]
            if pe.startswith("f:") and key in value:
                _remove_fields(value[key], below, typeinfo.child(info, key))
    elif shape in ("list-map", "list-set"):
        elem = info.elem() if info is not None else None
        kept = []
        for item in value:
            pe = _item_pe(item, shape, info)
            if pe in fields.members:
                continue
            if pe in fields.children:
                _remove_fields(item, fields.children[pe], elem)
            kept.append(item)
        value[:] = kept


# --- Managed fields entries -------------------------------------------------------------------


class _Entry:
    """One managedFields entry. Its FieldsV1 is parsed only when a change touches it, and
    written back as it came when untouched: most writes change few managers' fields."""

    __slots__ = ("_fields", "_raw", "api_version", "manager", "operation", "subresource", "time")

    def __init__(
        self,
        manager: str,
        operation: str,
        api_version: str,
        subresource: str,
        time: str | None,
        fields: FieldSet | None = None,
        raw: dict[str, Any] | None = None,
    ) -> None:
        self.manager = manager
        self.operation = operation
        self.api_version = api_version
        self.subresource = subresource
        self.time = time
        self._fields = fields
        self._raw = raw

    @property
    def fields(self) -> FieldSet:
        if self._fields is None:
            self._fields = FieldSet.from_fields_v1(self._raw)
        return self._fields

    @fields.setter
    def fields(self, value: FieldSet) -> None:
        self._fields = value
        self._raw = None

    @property
    def ident(self) -> tuple[str, str, str, str]:
        # Appliers keep one entry across API versions; updaters get one per version.
        version = "" if self.operation == "Apply" else self.api_version
        return self.manager, self.operation, version, self.subresource

    def empty(self) -> bool:
        return not self._raw if self._raw is not None else self.fields.empty()

    def subtract(self, paths: FieldSet) -> None:
        """Give up the members of `paths`."""
        if self._raw is not None:
            self._raw, self._fields = _raw_minus(self._raw, paths), None
        else:
            self.fields = self.fields.difference(paths)

    def add(self, paths: FieldSet) -> None:
        """Take the members of `paths`."""
        if self._raw is not None:
            self._raw, self._fields = _raw_plus(self._raw, paths), None
        else:
            self.fields = self.fields.union(paths)

    def touches(self, paths: FieldSet) -> bool:
        """Whether `paths` may overlap this entry's fields (without parsing them)."""
        return self._raw is None or _raw_touches(self._raw, paths)

    def printed(self) -> str:
        """The manager as upstream names it in conflict messages."""
        out = json.dumps(self.manager)
        if self.subresource:
            out += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            out += f" using {self.api_version}"
        return out

    def encode(self) -> Obj:
        entry: Obj = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time is not None:
            entry["time"] = self.time
        entry["fieldsType"] = "FieldsV1"
        entry["fieldsV1"] = self._raw if self._raw is not None else self.fields.to_fields_v1()
        if self.subresource:
            entry["subresource"] = self.subresource
        return entry


def _raw_touches(raw: dict[str, Any], paths: FieldSet) -> bool:
    if any(pe in raw for pe in paths.members):
        return True
    for pe, below in paths.children.items():
        node = raw.get(pe)
        if isinstance(node, dict) and _raw_touches(node, below):
            return True
    return False


def _decode(raw: Any, *, parse: bool) -> dict[tuple[str, str, str, str], _Entry]:
    """Managed fields by manager identity; ValueError when malformed.

    Without `parse`, FieldsV1 is parsed (and so checked) only when first needed.
    """
    entries: dict[tuple[str, str, str, str], _Entry] = {}
    if raw is None:
        return entries
    if not isinstance(raw, list):
        raise ValueError("metadata.managedFields must be a list")
    for item in raw:
        if not isinstance(item, dict):
            raise ValueError("a managedFields entry must be an object")
        operation = item.get("operation")
        if operation not in ("Apply", "Update"):
            raise ValueError(f"managedFields operation must be Apply or Update, got {operation!r}")
        if item.get("fieldsType", "FieldsV1") != "FieldsV1":
            raise ValueError(f"unsupported managedFields fieldsType {item.get('fieldsType')!r}")
        fields_v1 = item.get("fieldsV1", {})
        if not isinstance(fields_v1, dict):
            raise ValueError("managedFields fieldsV1 must be an object")
        entry = _Entry(
            manager=str(item.get("manager", "")),
            operation=operation,
            api_version=str(item.get("apiVersion", "")),
            subresource=str(item.get("subresource", "")),
            time=item.get("time"),
            fields=FieldSet.from_fields_v1(fields_v1) if parse else None,
            raw=fields_v1,
        )
        previous = entries.get(entry.ident)
        if previous is not None:
            entry.fields = entry.fields.union(previous.fields)
        entries[entry.ident] = entry
    return entries


def _encode(obj: Obj, entries: dict[tuple[str, str, str, str], _Entry]) -> None:
    kept = [e for e in entries.values() if not e.empty()]
    kept.sort(key=lambda e: (e.operation, e.time or "", e.manager, e.api_version, e.subresource))
    metadata = obj.setdefault("metadata", {})
    if kept:
        metadata["managedFields"] = [e.encode() for e in kept]
    else:
        metadata.pop("managedFields", None)


def _is_reset(raw: Any) -> bool:
    """An explicit empty list (or one empty entry) asks to drop all ownership, as upstream."""
    return bool(raw == [] or raw == [{}])


def _without_server_fields(obj: Any) -> Any:
    """A shallow copy of `obj` without the metadata the server owns, for ownership purposes."""
    if not isinstance(obj, dict):
        return {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    metadata = out.get("metadata")
    if isinstance(metadata, dict):
        out["metadata"] = {k: v for k, v in metadata.items() if k not in _SERVER_METADATA}
        if not out["metadata"]:
            # Go's zero ObjectMeta: nothing anyone set, so no `f:metadata` entry (upstream records
            # no managedFields at all for an object that says nothing but its name).
            del out["metadata"]
    return out


# --- Updates ----------------------------------------------------------------------------------


def track_update(
    old: Obj | None,
    new: Obj,
    manager: str,
    info: TypeInfo | None,
    api_version: str,
    now: str,
    *,
    subresource: str = "",
) -> None:
    """Give `manager` (operation Update) the fields that changed from `old` to `new`.

    Other managers lose those fields and any removed ones; entries left empty are dropped.
    Rewrites `new["metadata"]["managedFields"]`. `old` is None on create. Call it after the
    strategy has reset what the endpoint may not change (status on the main resource).
    """
    metadata = new.get("metadata")
    if not isinstance(metadata, dict):
        return
    try:
        entries = _update_entries(old, metadata.get("managedFields"), subresource)
        if old is not None and not entries:
            # Upstream never starts tracking an existing object on update: a reset sticks.
            metadata.pop("managedFields", None)
            return
        changed, removed = _compare(_without_server_fields(old), _without_server_fields(new), info)
        touched = changed.union(removed)
        for entry in entries.values():
            if entry.touches(touched):
                entry.subtract(touched)
        ident = (manager, "Update", api_version, subresource)
        own = entries.get(ident)
        if own is None:
            own = entries[ident] = _Entry(manager, "Update", api_version, subresource, None, raw={})
        if not changed.empty():
            own.add(changed)
            own.time = now
    except (ValueError, PatchError):
        # Upstream drops managed fields it cannot compute rather than failing the write.
        metadata.pop("managedFields", None)
        return
    _encode(new, entries)


def _update_entries(
    old: Obj | None, new_raw: Any, subresource: str
) -> dict[tuple[str, str, str, str], _Entry]:
    """The entries an update starts from: those the client sent, else the live object's."""
    live_raw = old.get("metadata", {}).get("managedFields") if old else None
    if new_raw and new_raw == live_raw:
        return _decode(new_raw, parse=False)
    if not subresource:
        if _is_reset(new_raw):
            return {}
        if new_raw:
            try:
                return _decode(new_raw, parse=True)
            except ValueError:
                pass  # upstream falls back to the live object's entries
    # The entries end up in the new object, which must not share structure with the old one.
    return _decode(deep_copy(live_raw), parse=False)


# --- Server-side apply ------------------------------------------------------------------------


class ApplyConflict(Exception):
    """Applied values differ from values other managers own; the server answers 409 Conflict."""

    def __init__(self, conflicts: list[tuple[str, str]]) -> None:
        """`conflicts`: (manager as upstream prints it, e.g. '"kubectl" using apps/v1', field path)."""
        self.conflicts = conflicts
        super().__init__(self.message)

    @property
    def message(self) -> str:
        if len(self.conflicts) == 1:
            manager, path = self.conflicts[0]
            return f"Apply failed with 1 conflict: conflict with {manager}: {path}"
        lines = []
        for manager in dict.fromkeys(m for m, _ in self.conflicts):
            lines.append(f"conflicts with {manager}:")
            lines.extend(f"- {path}" for m, path in self.conflicts if m == manager)
        return f"Apply failed with {len(self.conflicts)} conflicts: " + "\n".join(lines)

    def causes(self) -> list[dict[str, str]]:
        return [
            {"reason": "FieldManagerConflict", "message": f"conflict with {manager}", "field": path}
            for manager, path in self.conflicts
        ]

    def api_error(self) -> ApiError:
        return ApiError(409, "Conflict", self.message, details={"causes": self.causes()})


def server_side_apply(
    live: Obj | None,
    applied: Obj,
    manager: str,
    force: bool,
    info: TypeInfo | None,
    api_version: str,
    now: str,
    *,
    subresource: str = "",
) -> Obj:
    """Merge an applied configuration into the live object and return the new object.

    `manager` then owns exactly the fields of `applied`; fields it applied before but omits
    now are removed unless another manager owns them. Raises ApplyConflict when a changed
    field is owned by another manager and not `force`; with `force`, that manager loses it.
    Raises PatchError for an invalid configuration.
    """
    if not isinstance(applied, dict):
        raise PatchError("an apply configuration must be a JSON object")
    applied_meta = applied.get("metadata")
    if isinstance(applied_meta, dict) and applied_meta.get("managedFields") is not None:
        raise PatchError("metadata.managedFields must be nil")
    before: Obj = deep_copy(live) if live else {}
    before_meta = before.get("metadata")
    raw = before_meta.pop("managedFields", None) if isinstance(before_meta, dict) else None
    try:
        entries = _decode(raw, parse=True)
    except ValueError as err:
        raise PatchError(f"failed to decode managed fields: {err}") from None

    merged: Obj = _merge(deep_copy(before), applied, info)
    applied_fields = fields_of(applied, info)
    ident = (manager, "Apply", "", subresource)
    previous = entries.get(ident)
    entries[ident] = _Entry(
        manager,
        "Apply",
        api_version,
        subresource,
        previous.time if previous else None,
        fields_of(_without_server_fields(applied), info),
    )
    if previous is not None:
        _prune(merged, previous.fields, entries, ident, applied_fields, info)

    changed, removed = _compare(_without_server_fields(before), _without_server_fields(merged), info)
    others = [e for key, e in entries.items() if key != ident]
    conflicts = [(e, e.fields.intersection(changed)) for e in others if e.touches(changed)]
    conflicts = [(e, c) for e, c in conflicts if not c.empty()]
    if conflicts and not force and manager == _KUBECTL_SSA_MANAGER:
        allowed = _upgradable_from_client_side_apply(before, info, api_version)
        remaining = [(e, c.difference(allowed)) for e, c in conflicts]
        force = all(c.empty() for _, c in remaining)
        if not force:
            conflicts = [(e, c) for e, c in remaining if not c.empty()]
    if conflicts and not force:
        conflicts.sort(key=lambda ec: ec[0].ident)
        raise ApplyConflict([(e.printed(), path_string(p)) for e, c in conflicts for p in c.paths()])
    for entry, taken in conflicts:
        entry.fields = entry.fields.difference(taken)
    for entry in others:
        if entry.touches(removed):
            entry.fields = entry.fields.difference(removed)
    if previous is None or not changed.empty() or not removed.empty():
        entries[ident].time = now
    _encode(merged, entries)
    return merged


def _upgradable_from_client_side_apply(live: Obj, info: TypeInfo | None, api_version: str) -> FieldSet:
    """Fields `kubectl apply` (client-side) set that still have the values it gave them.

    Upstream's lastAppliedManager lets `kubectl apply --server-side` take these over
    without a conflict, so that moving an object from client-side to server-side apply
    just works; any other conflict still stops the apply.
    """
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    try:
        last_applied = json.loads(annotations.get(LAST_APPLIED_ANNOTATION) or "null")
    except ValueError:
        return FieldSet()
    if not isinstance(last_applied, dict) or last_applied.get("apiVersion") != api_version:
        return FieldSet()
    last_applied = _without_server_fields(last_applied)
    differing, missing = _compare(last_applied, _without_server_fields(live), info)
    return fields_of(last_applied, info).difference(differing.union(missing))


def _prune(
    merged: Obj,
    last_applied: FieldSet,
    entries: dict[tuple[str, str, str, str], _Entry],
    ident: tuple[str, str, str, str],
    applied_fields: FieldSet,
    info: TypeInfo | None,
) -> None:
    """Remove what this applier set last time, dropped now, and nobody else owns."""
    owned = applied_fields
    for key, entry in entries.items():
        if key != ident:
            owned = owned.union(entry.fields)
    doomed = _named_fields_as_members(last_applied, info).difference(_named_fields_as_members(owned, info))
    doomed.members -= {"f:apiVersion", "f:kind", "f:metadata"}
    _remove_fields(merged, doomed, info)
