"""Kubernetes label and field selectors: parsing, matching and canonical string forms.

The API server parses `labelSelector` / `fieldSelector` query parameters with
`parse_label_selector` / `parse_field_selector` to filter list and watch results;
controllers turn a `spec.selector` (metav1.LabelSelector) into a matcher with
`label_selector_from_dict` to find the pods they own. The name checks used by label
keys (`is_qualified_name`, `is_label_value`, `is_dns1123_subdomain`, `is_dns1123_label`)
are exported for object validation.

Behaviour follows apimachinery's pkg/labels and pkg/fields, including their error texts.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kcm_shared.base.goquote import go_quote

__all__ = [
    "EVERYTHING",
    "NOTHING",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "Token",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "is_label_value",
    "is_qualified_name",
    "label_selector_from_dict",
    "lex",
    "new_requirement",
    "parse_field_selector",
    "parse_label_selector",
    "selector_from_set",
]


class SelectorError(ValueError):
    """A selector that cannot be parsed or built; the API server answers 400 BadRequest."""


# --- name checks shared with object validation -------------------------------------------

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_FMT = f"({_QUALIFIED_NAME_FMT})?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)

_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_QUALIFIED_NAME_EXAMPLES = ("MyName", "my.name", "123-abc")
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream's wording for a failed pattern check, examples first."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    # Go's RegexError ends each example with "', " and joins them with " or ": hence the two
    # spaces kube-apiserver prints before each "or".
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def is_dns1123_label(value: str) -> list[str]:
    """Errors for a string that is not a lowercase RFC 1123 label (namespace names, ...)."""
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """Errors for a string that is not a lowercase RFC 1123 subdomain (most object names)."""
    errs = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """Errors for a string that is not a label key / qualified name (`[prefix/]name`)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, *_QUALIFIED_NAME_EXAMPLES)
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append(
            "name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, *_QUALIFIED_NAME_EXAMPLES)
        )
    return errs


def is_label_value(value: str) -> list[str]:
    """Errors for a string that is not a valid label value (63 characters, may be empty)."""
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# --- label requirements -----------------------------------------------------------------

# Operator spellings are upstream's selection.Operator values.
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
EXISTS = "exists"
DOES_NOT_EXIST = "!"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN, EXISTS, DOES_NOT_EXIST)
_INT64_RE = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    if not _INT64_RE.fullmatch(text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


@dataclass(frozen=True)
class Requirement:
    """One condition on one label key; a selector ANDs its requirements."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels or len(self.values) != 1:
                return False
            have, want = _parse_int64(labels[self.key]), _parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        if self.operator == EXISTS:
            return self.key
        if self.operator == DOES_NOT_EXIST:
            return "!" + self.key
        values = ",".join(sorted(self.values))
        if self.operator in (IN, NOT_IN):
            return f"{self.key} {self.operator} ({values})"
        symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(self.operator, self.operator)
        return f"{self.key}{symbol}{values}"


def _go_string_list(values: Iterable[str]) -> str:
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def new_requirement(key: str, operator: str, values: Iterable[str] = ()) -> Requirement:
    """A validated requirement; raises SelectorError naming every problem (upstream NewRequirement)."""
    vals = tuple(values)
    errs: list[str] = []
    if key_errs := is_qualified_name(key):
        errs.append(f"key: Invalid value: {go_quote(key)}: {'; '.join(key_errs)}")
    if operator in (IN, NOT_IN):
        if not vals:
            errs.append(
                f"values: Invalid value: {_go_string_list(vals)}: for 'in', 'notin' operators, "
                "values set can't be empty"
            )
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            errs.append(
                f"values: Invalid value: {_go_string_list(vals)}: "
                "exact-match compatibility requires one single value"
            )
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if vals:
            errs.append(
                f"values: Invalid value: {_go_string_list(vals)}: "
                "values set must be empty for exists and does not exist"
            )
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            errs.append(
                f"values: Invalid value: {_go_string_list(vals)}: "
                "for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, value in enumerate(vals):
            if _parse_int64(value) is None:
                errs.append(
                    f"values[{i}]: Invalid value: {go_quote(value)}: "
                    "for 'Gt', 'Lt' operators, the value must be an integer"
                )
    else:
        supported = ", ".join(go_quote(o) for o in _OPERATORS)
        errs.append(f"operator: Unsupported value: {go_quote(operator)}: supported values: {supported}")
    for i, value in enumerate(vals):
        if value_errs := is_label_value(value):
            errs.append(f"values[{i}][{key}]: Invalid value: {go_quote(value)}: {'; '.join(value_errs)}")
    if errs:
        raise SelectorError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]")
    return Requirement(key, operator, vals)


# --- label selectors --------------------------------------------------------------------


@dataclass(frozen=True)
class LabelSelector:
    """An immutable AND of requirements, kept sorted by key like upstream's parser output.

    `nothing` marks upstream's labels.Nothing(): the selector of a nil metav1.LabelSelector,
    which matches no object at all.
    """

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (matches every label set)."""
        return not self.nothing and not self.requirements

    def requires_exact_match(self, key: str) -> str | None:
        """The single value `key` must have for a match, if the selector pins one."""
        for r in self.requirements:
            if r.key == key:
                exact = r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1
                return r.values[0] if exact else None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


def _sorted_selector(requirements: Iterable[Requirement]) -> LabelSelector:
    return LabelSelector(tuple(sorted(requirements, key=lambda r: r.key)))


def selector_from_set(labels: Mapping[str, str] | None) -> LabelSelector:
    """Exact-match selector for a plain label map (ReplicationController and Service selectors).

    None and {} both give EVERYTHING, as upstream's SelectorFromSet does.
    """
    return _sorted_selector(new_requirement(k, EQUALS, (v,)) for k, v in (labels or {}).items())


_EXPRESSION_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_dict(
    sel: Mapping[str, object] | None, *, none_matches: bool = False
) -> LabelSelector:
    """Selector for a metav1.LabelSelector decoded from JSON (upstream LabelSelectorAsSelector).

    None gives NOTHING (no object matches), as upstream does for a nil selector; pass
    `none_matches=True` for the few callers that treat a missing selector as "everything".
    An empty dict gives EVERYTHING.
    """
    if sel is None:
        return EVERYTHING if none_matches else NOTHING
    match_labels = sel.get("matchLabels") or {}
    expressions = sel.get("matchExpressions") or []
    if not isinstance(match_labels, Mapping) or not isinstance(expressions, list):
        raise SelectorError("matchLabels must be an object and matchExpressions a list")
    requirements = [new_requirement(str(k), EQUALS, (str(v),)) for k, v in match_labels.items()]
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError("matchExpressions entries must be objects")
        operator = expr.get("operator")
        op = _EXPRESSION_OPERATORS.get(operator) if isinstance(operator, str) else None
        if op is None:
            raise SelectorError(f"{go_quote(str(operator))} is not a valid label selector operator")
        values = expr.get("values") or []
        if not isinstance(values, list):
            raise SelectorError("matchExpressions values must be a list")
        requirements.append(new_requirement(str(expr.get("key", "")), op, (str(v) for v in values)))
    return _sorted_selector(requirements)


# --- label selector string syntax -------------------------------------------------------


class Token(enum.Enum):
    ERROR = "error"
    END_OF_STRING = "end of string"
    CLOSED_PAR = ")"
    COMMA = ","
    DOES_NOT_EXIST = "!"
    DOUBLE_EQUALS = "=="
    EQUALS = "="
    GREATER_THAN = ">"
    IDENTIFIER = "identifier"
    IN = "in"
    LESS_THAN = "<"
    NOT_EQUALS = "!="
    NOT_IN = "notin"
    OPEN_PAR = "("


_LITERAL_TOKENS = {t.value: t for t in Token if t not in (Token.ERROR, Token.END_OF_STRING, Token.IDENTIFIER)}
_SPECIAL = frozenset("=!(),><")
_WHITESPACE = frozenset(" \t\r\n")


def lex(text: str) -> list[tuple[Token, str]]:
    """Split a label selector into (token, literal) pairs, ending with END_OF_STRING.

    Operators are read greedily (longest valid symbol run); `in`/`notin` are keywords here
    and the parser demotes them back to identifiers where a value is expected.
    """
    items: list[tuple[Token, str]] = []
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in _WHITESPACE:
            pos += 1
        if pos >= n:
            items.append((Token.END_OF_STRING, ""))
            return items
        if text[pos] in _SPECIAL:
            best: tuple[Token, str] | None = None
            end = pos
            while end < n and text[end] in _SPECIAL:
                candidate = text[pos : end + 1]
                if candidate in _LITERAL_TOKENS:
                    best = (_LITERAL_TOKENS[candidate], candidate)
                elif best is not None:
                    break
                end += 1
            if best is None:
                items.append((Token.ERROR, f"error expected: keyword found '{text[pos:end]}'"))
                pos = end
            else:
                items.append(best)
                pos += len(best[1])
            continue
        start = pos
        while pos < n and text[pos] not in _SPECIAL and text[pos] not in _WHITESPACE:
            pos += 1
        word = text[start:pos]
        items.append((_LITERAL_TOKENS.get(word, Token.IDENTIFIER), word))


_BINARY = {
    Token.IN: IN,
    Token.NOT_IN: NOT_IN,
    Token.EQUALS: EQUALS,
    Token.DOUBLE_EQUALS: DOUBLE_EQUALS,
    Token.NOT_EQUALS: NOT_EQUALS,
    Token.GREATER_THAN: GREATER_THAN,
    Token.LESS_THAN: LESS_THAN,
}


class _Parser:
    """Recursive descent over the token list, mirroring upstream's grammar and messages."""

    def __init__(self, text: str) -> None:
        self.items = lex(text)
        self.pos = 0

    def peek(self, as_value: bool = True) -> tuple[Token, str]:
        return self._demote(self.items[self.pos], as_value)

    def take(self, as_value: bool = True) -> tuple[Token, str]:
        item = self.items[self.pos]
        self.pos += 1
        return self._demote(item, as_value)

    @staticmethod
    def _demote(item: tuple[Token, str], as_value: bool) -> tuple[Token, str]:
        if as_value and item[0] in (Token.IN, Token.NOT_IN):
            return Token.IDENTIFIER, item[1]
        return item

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            tok, lit = self.peek()
            if tok == Token.END_OF_STRING:
                return requirements
            if tok not in (Token.IDENTIFIER, Token.DOES_NOT_EXIST):
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except SelectorError as err:
                raise SelectorError(f"unable to parse requirement: {err}") from None
            tok, lit = self.take()
            if tok == Token.END_OF_STRING:
                return requirements
            if tok != Token.COMMA:
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            tok, lit = self.peek()
            if tok not in (Token.IDENTIFIER, Token.DOES_NOT_EXIST):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        negated = False
        tok, key = self.take()
        if tok == Token.DOES_NOT_EXIST:
            negated = True
            tok, key = self.take()
        if tok != Token.IDENTIFIER:
            raise SelectorError(f"found '{key}', expected: identifier")
        if key_errs := is_qualified_name(key):
            raise SelectorError(f"Invalid value: {go_quote(key)}: {'; '.join(key_errs)}")
        if negated:
            # `!key` takes no operator: anything after it is left for the caller to reject.
            return new_requirement(key, DOES_NOT_EXIST)
        if self.peek()[0] in (Token.END_OF_STRING, Token.COMMA):
            return new_requirement(key, EXISTS)
        tok, lit = self.take(as_value=False)
        op = _BINARY.get(tok)
        if op is None:
            expected = ", ".join(_OPERATORS[:7])
            raise SelectorError(f"found '{lit}', expected: {expected}")
        values = self.value_set() if op in (IN, NOT_IN) else self.exact_value()
        return new_requirement(key, op, sorted(values))

    def value_set(self) -> set[str]:
        tok, lit = self.take()
        if tok != Token.OPEN_PAR:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.peek()
        if tok == Token.CLOSED_PAR:
            self.take()
            return {""}
        if tok not in (Token.IDENTIFIER, Token.COMMA):
            raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.take()[0] != Token.CLOSED_PAR:
            raise SelectorError(f"found '{lit}', expected: ')'")
        return values

    def identifiers(self) -> set[str]:
        values: set[str] = set()
        while True:
            tok, lit = self.take()
            if tok == Token.IDENTIFIER:
                values.add(lit)
                nxt, nxt_lit = self.peek()
                if nxt == Token.CLOSED_PAR:
                    return values
                if nxt != Token.COMMA:
                    raise SelectorError(f"found '{nxt_lit}', expected: ',' or ')'")
            elif tok == Token.COMMA:
                # A comma with nothing before or after it stands for the empty value.
                if not values:
                    values.add("")
                if self.peek()[0] in (Token.CLOSED_PAR, Token.COMMA):
                    values.add("")
                if self.peek()[0] == Token.CLOSED_PAR:
                    return values
            else:
                raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> set[str]:
        if self.peek()[0] in (Token.END_OF_STRING, Token.COMMA):
            return {""}
        tok, lit = self.take()
        if tok != Token.IDENTIFIER:
            raise SelectorError(f"found '{lit}', expected: identifier")
        return {lit}


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the `labelSelector` string syntax (`a=b,c in (d,e),!f,g>1`); "" matches everything."""
    return _sorted_selector(_Parser(text).parse())


# --- field selectors --------------------------------------------------------------------


@dataclass(frozen=True)
class FieldSelector:
    """An AND of (field, op, value) terms with op "=" or "!="; a missing field reads as ""."""

    requirements: tuple[tuple[str, str, str], ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all((fields.get(name, "") == value) == (op == "=") for name, op, value in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def requires_exact_match(self, name: str) -> str | None:
        for field_name, op, value in self.requirements:
            if field_name == name and op == "=":
                return value
        return None

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{escape_field_value(v)}" for f, op, v in self.requirements)


def escape_field_value(value: str) -> str:
    """Backslash-escape `\\`, `,` and `=` so a value survives a round trip through the syntax."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    out: list[str] = []
    escaped = False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {ch!r}")
        else:
            out.append(ch)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(text: str) -> list[str]:
    """Split on commas that are not backslash-escaped, keeping the escapes in the terms."""
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    # The field name has no escaping, so the first operator occurrence splits the term;
    # "!=" and "==" are tried before "=" at each position so no '=' is left on the value.
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def parse_field_selector(text: str) -> FieldSelector:
    """Parse the `fieldSelector` syntax (`a=b,c!=d`, `==` same as `=`, `\\` escapes in values)."""
    terms: list[tuple[str, str, str]] = []
    for part in sorted(_split_terms(text)) if text else []:
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        name, op, raw = split
        terms.append((name, "!=" if op == "!=" else "=", _unescape_field_value(raw)))
    return FieldSelector(tuple(terms))
