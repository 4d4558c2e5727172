"""A type checker for the part of CEL `celparse` parses, with cel-go's issue texts.

- Types: `Prim` (int, uint, double, string, bytes, bool, null, timestamp, duration, dyn and
  cel-go's error type), `ListT`, `MapT` and `ObjT` (an OpenAPI object's fields, built lazily
  by `schema.py`).
- `check(text, root) -> str | None`: cel-go's issues for the expression with `object` and
  `oldObject` of type `root` (`ERROR: <input>:L:C: message`, the source line and a caret, one
  per error in source order, joined by newlines), "" when it checks, None when it is undecided.
- What is typed: literals, `object`/`oldObject` and comprehension variables, field selection
  and has() (`undefined field`, `type 'T' does not support field selection`), indexing, the
  operators (equality, ordering with cross-type numbers, arithmetic, `in`, `!`, `-`, `&&`,
  `||`, `?:`), `size`, the string predicates, and the all/exists/exists_one/map/filter macros.
  Anything else (other functions, params, request, variables, an object type in a message,
  whose name cel-go makes up per run) is undecided: the caller warns nothing.
Called by `typecheck.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kcm_controllers.vapstatus.celparse import Node, Undecided, parse


@dataclass(frozen=True)
class Prim:
    name: str


@dataclass(frozen=True)
class ListT:
    elem: Type


@dataclass(frozen=True)
class MapT:
    key: Type
    value: Type


class ObjT:
    """An object type; `fields()` is computed once, on first use (schemas nest deeply)."""

    def __init__(self, build: Callable[[], dict[str, Type]]) -> None:
        self._build = build
        self._fields: dict[str, Type] | None = None

    def fields(self) -> dict[str, Type]:
        if self._fields is None:
            self._fields = self._build()
        return self._fields


Type = Prim | ListT | MapT | ObjT

INT, UINT, DOUBLE = Prim("int"), Prim("uint"), Prim("double")
STRING, BYTES, BOOL, NULL = Prim("string"), Prim("bytes"), Prim("bool"), Prim("null")
TIMESTAMP, DURATION = Prim("timestamp"), Prim("duration")
DYN, ERROR = Prim("dyn"), Prim("*error*")
# A field whose schema this checker cannot type as upstream does: using it is undecided.
UNKNOWN = Prim("*unknown*")
_NUMBERS = (INT, UINT, DOUBLE)
_ORDERED = (*_NUMBERS, STRING, BYTES, BOOL, TIMESTAMP, DURATION)
_LITERALS = {t.name: t for t in (INT, UINT, DOUBLE, STRING, BYTES, BOOL, NULL)}
_ARITH = {
    "_+_": (INT, UINT, DOUBLE, STRING, BYTES),
    "_-_": _NUMBERS,
    "_*_": _NUMBERS,
    "_/_": _NUMBERS,
    "_%_": (INT, UINT),
}
_STRING_PREDICATES = ("startsWith", "endsWith", "contains", "matches")
_KNOWN = frozenset(
    {
        "_==_",
        "_!=_",
        "_<_",
        "_<=_",
        "_>_",
        "_>=_",
        "@in",
        "!_",
        "-_",
        "_?_:_",
        "size",
        *_ARITH,
        *_STRING_PREDICATES,
    }
)


def _loose(t: Type) -> bool:
    return t in (DYN, ERROR)


def fmt(t: Type) -> str:
    """A type as cel-go's FormatCELType prints it; undecided for object types."""
    if isinstance(t, ListT):
        return f"list({fmt(t.elem)})"
    if isinstance(t, MapT):
        return f"map({fmt(t.key)}, {fmt(t.value)})"
    if isinstance(t, ObjT) or t == ERROR:
        raise Undecided("an object type's name is cel-go's own per run")
    return t.name


def _assignable(a: Type, b: Type) -> bool:
    """Whether `a` and `b` unify as one type parameter (equality, `in`, `?:`)."""
    if _loose(a) or _loose(b):
        return True
    if isinstance(a, ListT) and isinstance(b, ListT):
        return _assignable(a.elem, b.elem)
    if isinstance(a, MapT) and isinstance(b, MapT):
        return _assignable(a.key, b.key) and _assignable(a.value, b.value)
    if isinstance(a, ObjT) or isinstance(b, ObjT):
        if a is b or NULL in (a, b):
            return True
        raise Undecided("two object types")
    if NULL in (a, b) and (isinstance(a, (ListT, MapT)) or isinstance(b, (ListT, MapT))):
        raise Undecided("null and a container")
    return a == b


@dataclass
class _Issue:
    pos: int
    message: str


class _Checker:
    def __init__(self, root: Type) -> None:
        self.root = root
        self.scopes: list[dict[str, Type]] = []
        self.issues: list[_Issue] = []

    def error(self, node: Node, message: str) -> Type:
        self.issues.append(_Issue(node.pos, message))
        return ERROR

    def no_overload(self, node: Node, args: list[Type]) -> Type:
        return self.error(
            node,
            f"found no matching overload for '{node.name}' applied to '({', '.join(fmt(a) for a in args)})'",
        )

    def check(self, node: Node) -> Type:
        if node.kind == "lit":
            return _LITERALS[node.lit]
        if node.kind == "ident":
            for scope in reversed(self.scopes):
                if node.name in scope:
                    return scope[node.name]
            if node.name in ("object", "oldObject"):
                return self.root
            raise Undecided(f"identifier {node.name}")
        if node.kind == "select":
            return self.select(node)
        if node.kind == "index":
            return self.index(node)
        if node.kind == "list":
            return self.list_literal(node)
        if node.kind == "compr":
            return self.comprehension(node)
        return self.call(node)

    def select(self, node: Node) -> Type:
        operand = self.check(node.args[0])
        result: Type
        if isinstance(operand, MapT):
            result = operand.value
        elif isinstance(operand, ObjT):
            if "__" in node.name:
                raise Undecided("an escaped field name")
            found = operand.fields().get(node.name)
            if found == UNKNOWN:
                raise Undecided(f"field {node.name}")
            result = found if found is not None else self.error(node, f"undefined field '{node.name}'")
        elif _loose(operand):
            result = DYN
        elif isinstance(operand, ListT):
            raise Undecided("a list's element type name is cel-go's own")
        else:
            result = self.error(node, f"type '{fmt(operand)}' does not support field selection")
        return BOOL if node.test_only else result

    def index(self, node: Node) -> Type:
        operand, key = self.check(node.args[0]), self.check(node.args[1])
        if isinstance(operand, ListT) and (key == INT or _loose(key)):
            return operand.elem
        if isinstance(operand, MapT) and _assignable(operand.key, key):
            return operand.value
        if _loose(operand):
            return DYN
        raise Undecided("an index of another kind")

    def list_literal(self, node: Node) -> Type:
        elems = [self.check(a) for a in node.args]
        if not elems:
            raise Undecided("an empty list's element type is a type parameter")
        first = elems[0]
        if all(e == first for e in elems):
            return ListT(first)
        if any(_loose(e) for e in elems):
            return ListT(DYN)
        raise Undecided("a list literal of mixed types")

    def comprehension(self, node: Node) -> Type:
        target = self.check(node.args[0])
        if isinstance(target, ListT):
            var = target.elem
        elif isinstance(target, MapT):
            var = target.key
        elif _loose(target):
            var = DYN
        else:
            raise Undecided("a macro over another kind")
        self.scopes.append({node.var: var})
        body = self.check(node.args[1])
        self.scopes.pop()
        if node.name == "map":
            return ListT(body)
        if body != BOOL and not _loose(body):
            raise Undecided("a macro's predicate of another type")
        return ListT(var) if node.name == "filter" else BOOL

    def call(self, node: Node) -> Type:
        args = [self.check(a) for a in node.args]
        name = node.name
        if name in ("_&&_", "_||_"):
            for arg, arg_node in zip(args, node.args, strict=True):
                if arg != BOOL and not _loose(arg):
                    self.error(arg_node, f"expected type 'bool' but found '{fmt(arg)}'")
            return BOOL
        if any(a == ERROR for a in args):
            if name not in _KNOWN:
                raise Undecided(f"function {name}")
            return self.lenient(name, args)
        if name in ("_==_", "_!=_"):
            return BOOL if _assignable(args[0], args[1]) else self.no_overload(node, args)
        if name in ("_<_", "_<=_", "_>_", "_>=_"):
            return BOOL if _ordered(args[0], args[1]) else self.no_overload(node, args)
        if name in _ARITH:
            return self.arithmetic(node, args)
        if name == "@in":
            container = args[1]
            if _loose(container):
                return BOOL
            if isinstance(container, ListT) and _assignable(args[0], container.elem):
                return BOOL
            if isinstance(container, MapT) and _assignable(args[0], container.key):
                return BOOL
            return self.no_overload(node, args)
        if name == "!_":
            return BOOL if args[0] in (BOOL, DYN) else self.no_overload(node, args)
        if name == "-_":
            return args[0] if args[0] in (INT, DOUBLE, DYN) else self.no_overload(node, args)
        if name == "_?_:_":
            if args[0] not in (BOOL, DYN) or not _assignable(args[1], args[2]):
                return self.no_overload(node, args)
            return args[1] if not _loose(args[1]) else args[2]
        sized = len(args) == 1 and (args[0] in (STRING, BYTES, DYN) or isinstance(args[0], (ListT, MapT)))
        if name == "size" and sized:
            return INT
        if name in _STRING_PREDICATES and args == [STRING, STRING]:
            return BOOL
        raise Undecided(f"function {name}")

    def lenient(self, name: str, args: list[Type]) -> Type:
        """The result of an operator one of whose arguments already failed: no new error."""
        if name in ("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in", "!_"):
            return BOOL
        known = [a for a in args if not _loose(a)]
        if name in _ARITH and known and all(a == known[0] for a in known) and known[0] in _ARITH[name]:
            return known[0]
        return DYN

    def arithmetic(self, node: Node, args: list[Type]) -> Type:
        a, b = args
        allowed = _ARITH[node.name]
        if _loose(a) and _loose(b):
            return DYN
        known = b if _loose(a) else a
        if (a == b or _loose(a) or _loose(b)) and known in allowed:
            return known
        if node.name == "_+_" and isinstance(a, ListT) and isinstance(b, ListT) and _assignable(a, b):
            return a
        if TIMESTAMP in (a, b) or DURATION in (a, b):
            raise Undecided("time arithmetic")
        return self.no_overload(node, args)


def _ordered(a: Type, b: Type) -> bool:
    if _loose(a) and _loose(b):
        return True
    if _loose(a) or _loose(b):
        known = b if _loose(a) else a
        if isinstance(known, (ListT, MapT, ObjT)):
            raise Undecided("an ordering of a container")
        return known in _ORDERED
    if a in _NUMBERS and b in _NUMBERS:
        return True  # Kubernetes' CEL compares numbers across types
    return a == b and a in _ORDERED


def check(text: str, root: Type) -> str | None:
    try:
        tree = parse(text)
        checker = _Checker(root)
        checker.check(tree)
    except (Undecided, RecursionError):
        return None
    issues = sorted(checker.issues, key=lambda i: i.pos)
    return "\n".join(_display(text, i) for i in issues)


def _display(text: str, issue: _Issue) -> str:
    """cel-go's Error.ToDisplayString: location (1-based column in characters), the source line
    with tabs as spaces, and a caret under the column (full-width for non-ASCII)."""
    line_no = text.count("\n", 0, issue.pos) + 1
    start = text.rfind("\n", 0, issue.pos) + 1
    end = text.find("\n", issue.pos)
    snippet = text[start : end if end >= 0 else len(text)].replace("\t", " ")
    column = issue.pos - start
    out = f"ERROR: <input>:{line_no}:{column + 1}: {issue.message}"
    dots = "".join("." if ord(ch) < 0x80 else "\uff0e" for ch in snippet[:column])
    at = snippet[column : column + 1]
    caret = "^" if not at or ord(at) < 0x80 else "\uff3e"
    return f"{out}\n | {snippet}\n | {dots}{caret}"
