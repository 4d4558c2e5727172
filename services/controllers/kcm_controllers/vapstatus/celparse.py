"""A parser for the part of CEL that `celcheck` types: the tree, with cel-go's node positions.

- `parse(text) -> Node`; raises `Undecided` for anything outside the subset (struct literals,
  optional selection, reserved words, a syntax error: cel-go reports those itself, and the
  API server refuses such a policy before the controller sees it).
- A node's `pos` is a character offset where cel-go places the node: a select at its `.`, a
  call of an operator at the operator, a call at its `(`, has() at its `(`, an ident or
  literal at its start (what `celcheck` reports errors at).
Called by `celcheck.check`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


class Undecided(Exception):
    """The expression uses something this checker does not type: it warns nothing."""


@dataclass
class Node:
    kind: str  # ident, lit, select, call, index, list, cond, compr
    pos: int
    name: str = ""  # ident name, selected field, function or operator name, macro name
    args: list[Node] = field(default_factory=list)  # operands; a member call's target first
    lit: str = ""  # a literal's CEL type name
    test_only: bool = False  # has()
    var: str = ""  # a comprehension's variable


_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r\n\f]+|//[^\n]*)
    |(?P<num>0x[0-9a-fA-F]+u?|\d+\.\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+u?)
    |(?P<str>[rRbB]{0,2}(?:'''|\"\"\"|'|"))
    |(?P<id>[_a-zA-Z][_a-zA-Z0-9]*)
    |(?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])""",
    re.VERBOSE,
)
RESERVED = frozenset(
    [
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)
_MACROS = {"all": 2, "exists": 2, "exists_one": 2, "map": 2, "filter": 2}
_BINARY = {
    "||": (1, "_||_"),
    "&&": (2, "_&&_"),
    "==": (3, "_==_"),
    "!=": (3, "_!=_"),
    "<": (3, "_<_"),
    "<=": (3, "_<=_"),
    ">": (3, "_>_"),
    ">=": (3, "_>=_"),
    "in": (3, "@in"),
    "+": (4, "_+_"),
    "-": (4, "_-_"),
    "*": (5, "_*_"),
    "/": (5, "_/_"),
    "%": (5, "_%_"),
}


@dataclass
class _Tok:
    kind: str
    text: str
    pos: int


def _string_end(text: str, at: int, prefix: str, quote: str) -> int:
    raw = "r" in prefix.lower()
    i = at
    while i < len(text):
        if text.startswith(quote, i):
            return i + len(quote)
        if text[i] == "\\" and not raw:
            i += 2
            continue
        if text[i] == "\n" and len(quote) == 1:
            break
        i += 1
    raise Undecided("unterminated string")


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    i = 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            raise Undecided(f"unexpected character at {i}")
        kind = m.lastgroup or ""
        if kind == "str":
            token = m.group("str")
            prefix = token.rstrip("'\"")
            end = _string_end(text, m.end(), prefix, token[len(prefix) :])
            lit = "bytes" if "b" in prefix.lower() else "string"
            out.append(_Tok("lit", lit, i))
            i = end
            continue
        if kind == "num":
            token = m.group("num")
            lit = (
                "uint"
                if token.endswith("u")
                else "double"
                if re.search(r"[.eE]", token) and not token.startswith("0x")
                else "int"
            )
            out.append(_Tok("lit", lit, i))
        elif kind == "id":
            word = m.group("id")
            if word in RESERVED:
                raise Undecided(f"reserved word {word}")
            if word in ("true", "false"):
                out.append(_Tok("lit", "bool", i))
            elif word == "null":
                out.append(_Tok("lit", "null", i))
            else:
                out.append(_Tok("id" if word != "in" else "op", word, i))
        elif kind == "op":
            out.append(_Tok("op", m.group("op"), i))
        i = m.end()
    out.append(_Tok("eof", "", len(text)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.at = 0

    def peek(self, text: str) -> bool:
        tok = self.toks[self.at]
        return tok.kind == "op" and tok.text == text

    def take(self, text: str) -> _Tok:
        if not self.peek(text):
            raise Undecided(f"expected {text!r}")
        self.at += 1
        return self.toks[self.at - 1]

    def expr(self) -> Node:
        cond = self.binary(1)
        if self.peek("?"):
            q = self.take("?")
            then = self.binary(1)
            self.take(":")
            other = self.expr()
            return Node("call", q.pos, "_?_:_", [cond, then, other])
        return cond

    def binary(self, level: int) -> Node:
        left = self.unary()
        while True:
            tok = self.toks[self.at]
            op = _BINARY.get(tok.text) if tok.kind == "op" else None
            if op is None or op[0] < level:
                return left
            self.at += 1
            right = self.binary(op[0] + 1)
            left = Node("call", tok.pos, op[1], [left, right])

    def unary(self) -> Node:
        tok = self.toks[self.at]
        if tok.kind == "op" and tok.text in ("!", "-"):
            self.at += 1
            operand = self.unary()
            return Node("call", tok.pos, "!_" if tok.text == "!" else "-_", [operand])
        return self.member(self.primary())

    def member(self, node: Node) -> Node:
        while True:
            if self.peek("."):
                dot = self.take(".")
                name = self.toks[self.at]
                if name.kind != "id":
                    raise Undecided("optional or odd selection")
                self.at += 1
                if self.peek("("):
                    paren = self.take("(")
                    node = self._member_call(node, name.text, paren.pos)
                else:
                    node = Node("select", dot.pos, name.text, [node])
            elif self.peek("["):
                bracket = self.take("[")
                index = self.expr()
                self.take("]")
                node = Node("index", bracket.pos, "_[_]", [node, index])
            else:
                return node

    def _member_call(self, target: Node, name: str, pos: int) -> Node:
        args = self.args(")")
        if name in _MACROS:
            if len(args) != _MACROS[name] or args[0].kind != "ident":
                raise Undecided(f"macro {name} of another shape")
            return Node("compr", pos, name, [target, args[1]], var=args[0].name)
        return Node("call", pos, name, [target, *args])

    def args(self, close: str) -> list[Node]:
        out: list[Node] = []
        while not self.peek(close):
            out.append(self.expr())
            if not self.peek(close):
                self.take(",")
        self.take(close)
        return out

    def primary(self) -> Node:
        tok = self.toks[self.at]
        self.at += 1
        if tok.kind == "lit":
            return Node("lit", tok.pos, lit=tok.text)
        if tok.kind == "id":
            if self.peek("("):
                paren = self.take("(")
                args = self.args(")")
                if tok.text == "has":
                    if len(args) != 1 or args[0].kind != "select":
                        raise Undecided("has() of another shape")
                    # cel-go places the presence test at has's parenthesis.
                    return Node("select", paren.pos, args[0].name, args[0].args, test_only=True)
                return Node("call", paren.pos, tok.text, args)
            if self.peek("{"):
                raise Undecided("struct literal")
            return Node("ident", tok.pos, tok.text)
        if tok.kind == "op" and tok.text == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if tok.kind == "op" and tok.text == "[":
            return Node("list", tok.pos, args=self.args("]"))
        raise Undecided(f"unexpected {tok.text!r}")


def parse(text: str) -> Node:
    parser = _Parser(text)
    node = parser.expr()
    if parser.toks[parser.at].kind != "eof":
        raise Undecided("trailing input")
    return node
