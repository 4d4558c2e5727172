"""One decoded object for several controllers' views of a resource: their fields' union.

Every controller reads a resource through its own view (`codec`), a msgspec Struct naming
only the fields it reads. In one process the caches of a resource share a consumer, so
each message was decoded once per view: about 14 times per pod change with every default
controller, and 14 decoded copies held per pod. `decoded_as` groups the views so that each
group's objects are decoded once, into a Struct that has every field of every member.

Contracts:
- A merged Struct reads the same JSON into every field a member view has, with that view's
  type, JSON name and default: a reader of the merged object sees exactly what its own view
  would have shown it, plus fields it does not name.
- Views merge only when that holds: the same Struct options, unknown fields allowed, no
  field required by one view only; for a field both have, the same JSON name, the same
  default (a Struct field's default the Struct itself, as `codec` views write it), and types
  that are equal or merge in turn (Structs, and lists, dicts, tuples and unions of them,
  position by position). A class that defines anything but fields (a method, a property, a
  class variable) merges with nothing but itself: a merged object would lack it. Any
  conflict leaves the view in a group of its own, never a partial merge.
- A merged Struct derives from the nearest base its members share (`codec.Meta`, `codec.View`),
  not from the members themselves: `isinstance` against a controller's own view is False.
- What differs for a reader: `==` on a merged sub-Struct compares the union of fields, so a
  handler comparing whole sub-Structs may see a change its own fields do not show (a sync
  too many, never one too few), and `msgspec.to_builtins` of one writes the fields the others
  read as well, with the object's own values.

Called by `runtime.cache` for the caches that share a consumer.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Iterable
from typing import Any

import msgspec

_CONFIG = (
    "array_like",
    "eq",
    "forbid_unknown_fields",
    "frozen",
    "gc",
    "omit_defaults",
    "order",
    "tag",
    "tag_field",
)
_STRUCT_ATTRS = frozenset({"__annotations__", "__doc__", "__module__", "__slots__", "__qualname__"})


class _Conflict(Exception):
    pass


def _is_struct(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, msgspec.Struct)


def _fields_only(cls: type[msgspec.Struct]) -> bool:
    """The class and its bases up to msgspec.Struct define nothing but fields."""
    for klass in cls.__mro__:
        if klass is msgspec.Struct or not issubclass(klass, msgspec.Struct):
            continue
        own = set(getattr(klass, "__struct_fields__", ()))
        extra = [
            k for k in vars(klass) if k not in own and k not in _STRUCT_ATTRS and not k.startswith("__struct")
        ]
        if extra:
            return False
    return True


def _spec(encode_name: str, default: Any, factory: Any) -> Any:
    if factory is not msgspec.NODEFAULT:
        return msgspec.field(name=encode_name, default_factory=factory)
    if default is not msgspec.NODEFAULT:
        return msgspec.field(name=encode_name, default=default)
    return msgspec.field(name=encode_name)


class _Merger:
    def __init__(self) -> None:
        self._done: dict[tuple[type, type], type] = {}

    def struct(self, a: type[msgspec.Struct], b: type[msgspec.Struct]) -> type[msgspec.Struct]:
        if a is b:
            return a
        pair = (a, b)
        if pair in self._done:
            return self._done[pair]
        if not (_fields_only(a) and _fields_only(b)):
            raise _Conflict(f"{a.__name__} or {b.__name__} defines more than fields")
        ca, cb = a.__struct_config__, b.__struct_config__
        if any(getattr(ca, o) != getattr(cb, o) for o in _CONFIG) or ca.forbid_unknown_fields:
            raise _Conflict(f"{a.__name__} and {b.__name__} differ in their options, or refuse fields")
        fields: dict[str, tuple[str, Any, Any]] = {}
        theirs = {f.name: f for f in msgspec.structs.fields(b)}
        for fa in msgspec.structs.fields(a):
            fb = theirs.pop(fa.name, None)
            fields[fa.name] = self._field(fa) if fb is None else self._both(fa, fb)
        for fb in theirs.values():
            fields[fb.name] = self._field(fb)
        # On the nearest base both share (`codec.Meta` for object views), so what asks whether
        # an object is one (`codec.key_of`) still finds it is.
        base = next(k for k in a.__mro__ if k in b.__mro__)
        merged = msgspec.defstruct(
            f"{a.__name__}_{b.__name__}",
            list(fields.values()),
            bases=(base,) if base is not msgspec.Struct else None,
            module=__name__,
            **{o: getattr(ca, o) for o in _CONFIG},
        )
        self._done[pair] = merged
        return merged

    @staticmethod
    def _field(f: msgspec.structs.FieldInfo) -> tuple[str, Any, Any]:
        if f.default is msgspec.NODEFAULT and f.default_factory is msgspec.NODEFAULT:
            raise _Conflict(f"{f.name} is required by one view only")  # the other's objects may lack it
        return (f.name, f.type, _spec(f.encode_name, f.default, f.default_factory))

    def _both(self, fa: msgspec.structs.FieldInfo, fb: msgspec.structs.FieldInfo) -> tuple[str, Any, Any]:
        if fa.encode_name != fb.encode_name:
            raise _Conflict(f"{fa.name} is {fa.encode_name} and {fb.encode_name}")
        merged = self.type(fa.type, fb.type)
        default, factory = fa.default, fa.default_factory
        if type(fa.default) is not type(fb.default) or fa.default != fb.default:
            raise _Conflict(f"{fa.name} has two defaults")
        if fa.default_factory is not fb.default_factory:
            # A Struct field defaults to the Struct itself; the merged one to the merged Struct.
            if not (fa.default_factory is fa.type and fb.default_factory is fb.type):
                raise _Conflict(f"{fa.name} has two default factories")
            factory = merged
        return (fa.name, merged, _spec(fa.encode_name, default, factory))

    def type(self, a: Any, b: Any) -> Any:
        if a == b:
            return a
        if _is_struct(a) and _is_struct(b):
            return self.struct(a, b)
        origin = typing.get_origin(a)
        args_a, args_b = typing.get_args(a), typing.get_args(b)
        if origin is None or origin != typing.get_origin(b) or len(args_a) != len(args_b):
            raise _Conflict(f"{a} and {b}")
        args = tuple(self.type(x, y) for x, y in zip(args_a, args_b, strict=True))
        if origin in (types.UnionType, typing.Union):
            return typing.Union[args]  # noqa: UP007 (a runtime-built union)
        return origin[args]


@functools.cache
def merge(a: type[msgspec.Struct], b: type[msgspec.Struct]) -> type[msgspec.Struct] | None:
    """A Struct with the fields of both, or None when they conflict (see the contracts).
    Remembered: `Cache.share_consumer` groups its views again as each follower joins, and
    the same pair then yields the same type instead of a new one."""
    try:
        return _Merger().struct(a, b)
    except (_Conflict, TypeError):  # TypeError: a Struct msgspec will not build from these fields
        return None


def decoded_as(views: Iterable[type[msgspec.Struct]]) -> dict[type[msgspec.Struct], type[msgspec.Struct]]:
    """Each view, and the type its objects are decoded as: views join the first group whose
    merged type they merge with, in order; one that merges with none starts a group."""
    groups: list[tuple[type[msgspec.Struct], list[type[msgspec.Struct]]]] = []
    for view in dict.fromkeys(views):
        for i, (merged, members) in enumerate(groups):
            joined = merge(merged, view)
            if joined is not None:
                groups[i] = (joined, [*members, view])
                break
        else:
            groups.append((view, [view]))
    return {view: merged for merged, members in groups for view in members}
