"""Label and field selectors, driven by upstream apimachinery's table cases."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kcm_shared.apimachinery.selectors import (
    EVERYTHING,
    NOTHING,
    LabelSelector,
    Requirement,
    SelectorError,
    Token,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    label_selector_from_dict,
    lex,
    new_requirement,
    parse_field_selector,
    parse_label_selector,
    selector_from_set,
)

# --- lexer (labels/selector_test.go TestLexer, TestLexerSequence) --------------------------


@pytest.mark.parametrize(
    ("text", "token"),
    [
        ("", Token.END_OF_STRING),
        (",", Token.COMMA),
        ("notin", Token.NOT_IN),
        ("in", Token.IN),
        ("=", Token.EQUALS),
        ("==", Token.DOUBLE_EQUALS),
        (">", Token.GREATER_THAN),
        ("<", Token.LESS_THAN),
        ("!", Token.DOES_NOT_EXIST),
        ("!=", Token.NOT_EQUALS),
        ("(", Token.OPEN_PAR),
        (")", Token.CLOSED_PAR),
        ("~", Token.IDENTIFIER),
        ("||", Token.IDENTIFIER),
    ],
)
def test_lexer_reads_longest_token(text: str, token: Token) -> None:
    assert lex(text)[0] == (token, text)


ID, C = Token.IDENTIFIER, Token.COMMA


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("key in ( value )", [ID, Token.IN, Token.OPEN_PAR, ID, Token.CLOSED_PAR]),
        ("key notin ( value )", [ID, Token.NOT_IN, Token.OPEN_PAR, ID, Token.CLOSED_PAR]),
        ("key in ( value1, value2 )", [ID, Token.IN, Token.OPEN_PAR, ID, C, ID, Token.CLOSED_PAR]),
        ("key", [ID]),
        ("!key", [Token.DOES_NOT_EXIST, ID]),
        ("()", [Token.OPEN_PAR, Token.CLOSED_PAR]),
        ("x in (),y", [ID, Token.IN, Token.OPEN_PAR, Token.CLOSED_PAR, C, ID]),
        (
            "== != (), = notin",
            [
                Token.DOUBLE_EQUALS,
                Token.NOT_EQUALS,
                Token.OPEN_PAR,
                Token.CLOSED_PAR,
                C,
                Token.EQUALS,
                Token.NOT_IN,
            ],
        ),
        ("key>2", [ID, Token.GREATER_THAN, ID]),
        ("key<1", [ID, Token.LESS_THAN, ID]),
    ],
)
def test_lexer_sequence(text: str, tokens: list[Token]) -> None:
    assert [t for t, _ in lex(text)] == [*tokens, Token.END_OF_STRING]


# --- parsing (TestSelectorParse, TestSetSelectorParser) -----------------------------------


@pytest.mark.parametrize(
    "text",
    ["x=a,y=b,z=c", "", "x!=a,y=b", "x=", "x= ", "x=,z= ", "x= ,z= ", "!x", "x>1", "x>1,z<5"],
)
def test_parse_round_trips_without_spaces(text: str) -> None:
    assert str(parse_label_selector(text)) == text.replace(" ", "")


@pytest.mark.parametrize(
    "text",
    [
        "x=a||y=b",
        "x==a==b",
        "!x=a",
        "x<a",
        "x,,y",
        ",x,y",
        "x nott in (y)",
        "a in (xyz),",
        "a in (xyz)b notin ()",
        "a in (xyz abc)",
        "a notin(",
        "a (",
        "(",
        "x=a b",
        "Bad Key=1",
        "x=" + "a" * 64,
        "a/b/c",
        "/x",
        "x in (a!b)",
    ],
)
def test_parse_rejects_bad_syntax(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_label_selector(text)


def _req(key: str, op: str, *values: str) -> Requirement:
    return new_requirement(key, op, values)


@pytest.mark.parametrize(
    ("text", "requirements"),
    [
        ("", []),
        ("\rx", [_req("x", "exists")]),
        (
            "this-is-a-dns.domain.com/key-with-dash",
            [_req("this-is-a-dns.domain.com/key-with-dash", "exists")],
        ),
        (
            "this-is-another-dns.domain.com/key-with-dash in (so,what)",
            [_req("this-is-another-dns.domain.com/key-with-dash", "in", "so", "what")],
        ),
        (
            "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
            [_req("0.1.2.domain/99", "notin", "10.10.100.1", "tick.tack.clock")],
        ),
        ("foo  in\t (abc)", [_req("foo", "in", "abc")]),
        ("x notin\n (abc)", [_req("x", "notin", "abc")]),
        ("x  notin\t\t\t(abc,def)", [_req("x", "notin", "abc", "def")]),
        ("x in (abc,def)", [_req("x", "in", "abc", "def")]),
        ("x in (abc,)", [_req("x", "in", "", "abc")]),
        ("x in ()", [_req("x", "in", "")]),
        (
            "x notin (abc,,def),bar,z in (),w",
            [
                _req("bar", "exists"),
                _req("w", "exists"),
                _req("x", "notin", "", "abc", "def"),
                _req("z", "in", ""),
            ],
        ),
        ("x,y in (a)", [_req("x", "exists"), _req("y", "in", "a")]),
        ("x=a", [_req("x", "=", "a")]),
        ("x==a", [_req("x", "==", "a")]),
        ("x>1", [_req("x", "gt", "1")]),
        ("x<7", [_req("x", "lt", "7")]),
        ("x=a,y!=b", [_req("x", "=", "a"), _req("y", "!=", "b")]),
        (
            "x=a,y!=b,z in (h,i,j)",
            [_req("x", "=", "a"), _req("y", "!=", "b"), _req("z", "in", "h", "i", "j")],
        ),
        ("x notin ( )", [_req("x", "notin", "")]),
        ("x notin (, a)", [_req("x", "notin", "", "a")]),
        ("a ", [_req("a", "exists")]),
        ("a in (x,y,notin, z,in)", [_req("a", "in", "in", "notin", "x", "y", "z")]),
        ("notin=in", [_req("notin", "=", "in")]),
    ],
)
def test_parse_builds_requirements_sorted_by_key(text: str, requirements: list[Requirement]) -> None:
    assert parse_label_selector(text).requirements == tuple(requirements)


def test_parse_is_deterministic() -> None:
    assert str(parse_label_selector("x=a,a=x")) == str(parse_label_selector("a=x,x=a")) == "a=x,x=a"


def test_parse_error_names_the_offending_token() -> None:
    with pytest.raises(SelectorError, match="found '==', expected: ',' or 'end of string'"):
        parse_label_selector("x==a==b")


# --- matching (TestSelectorMatches, TestRequirementSelectorMatching) ----------------------


@pytest.mark.parametrize(
    ("text", "labels", "want"),
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x", {"x": "z"}, True),
        ("!x", {"y": "z"}, True),
        ("x>1", {"x": "2"}, True),
        ("x<1", {"x": "0"}, True),
        ("x=z", {}, False),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("x", {"y": "z"}, False),
        ("!x", {"x": "z"}, False),
        ("x>1", {"x": "0"}, False),
        ("x<1", {"x": "2"}, False),
        ("foo=bar", {"foo": "bar", "baz": "blah"}, True),
        ("baz=blah", {"foo": "bar", "baz": "blah"}, True),
        ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
        ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
        ("baz=bar", {"foo": "bar", "baz": "blah"}, False),
        ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
        ("x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
        ("x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
        ("x notin (),y", {"y": ""}, True),
        ("!x,y", {"y": ""}, True),
        ("x notin (),!y", {"y": ""}, False),
        ("x in ()", {"y": "baz"}, False),
        ("z>1", {"z": "2"}, True),
        ("z>1", {"z": "v2"}, False),
        ("x!=y", {}, True),
        ("x notin (a)", {}, True),
    ],
)
def test_selector_matches(text: str, labels: dict[str, str], want: bool) -> None:
    assert parse_label_selector(text).matches(labels) is want


def test_everything_and_nothing() -> None:
    assert EVERYTHING.matches({"x": "y"}) and EVERYTHING.empty
    assert not NOTHING.matches({}) and not NOTHING.empty
    assert parse_label_selector("").empty
    assert not parse_label_selector("x").empty


@pytest.mark.parametrize(
    ("selector", "key", "want"),
    [
        ("key in (value)", "key", "value"),
        ("key in (value,value2)", "key", None),
        ("key in (value,value1),key2 in (value2)", "key2", "value2"),
        ("key=value", "key", "value"),
        ("key==value", "key", "value"),
        ("key!=value", "key", None),
        ("other=x", "key", None),
    ],
)
def test_requires_exact_match(selector: str, key: str, want: str | None) -> None:
    assert parse_label_selector(selector).requires_exact_match(key) == want


# --- requirements (TestRequirementConstructor, TestToString) ------------------------------


@pytest.mark.parametrize(
    ("key", "op", "values", "ok"),
    [
        ("x", "in", (), False),
        ("x", "notin", (), False),
        ("x", "in", ("foo",), True),
        ("x", "notin", ("foo",), True),
        ("x", "exists", (), True),
        ("x", "!", (), True),
        ("1foo", "in", ("bar",), True),
        ("1234", "in", ("bar",), True),
        ("y", "gt", ("1",), True),
        ("z", "lt", ("6",), True),
        ("foo", "gt", ("bar",), False),
        ("barz", "lt", ("blah",), False),
        ("a" * 254, "exists", (), False),
        ("x", "=", ("a", "b"), False),
        ("x", "exists", ("a",), False),
        ("x", "like", ("a",), False),
    ],
)
def test_new_requirement_validation(key: str, op: str, values: tuple[str, ...], ok: bool) -> None:
    if ok:
        assert new_requirement(key, op, values).key == key
    else:
        with pytest.raises(SelectorError):
            new_requirement(key, op, values)


@pytest.mark.parametrize(
    ("requirements", "text"),
    [
        (
            [_req("x", "in", "abc", "def"), _req("y", "notin", "jkl"), _req("z", "exists")],
            "x in (abc,def),y notin (jkl),z",
        ),
        (
            [_req("x", "notin", "abc", "def"), _req("y", "!=", "jkl"), _req("z", "!")],
            "x notin (abc,def),y!=jkl,!z",
        ),
        (
            [_req("x", "notin", "abc"), _req("y", "in", "jkl", "mno"), _req("z", "notin", "")],
            "x notin (abc),y in (jkl,mno),z notin ()",
        ),
        (
            [_req("x", "=", "abc"), _req("y", "==", "jkl"), _req("z", "!=", "a"), _req("z", "exists")],
            "x=abc,y==jkl,z!=a,z",
        ),
        ([_req("x", "gt", "2"), _req("y", "lt", "8"), _req("z", "exists")], "x>2,y<8,z"),
        ([_req("x", "in", "def", "abc")], "x in (abc,def)"),
    ],
)
def test_canonical_string(requirements: list[Requirement], text: str) -> None:
    assert str(LabelSelector(tuple(requirements))) == text


# --- metav1.LabelSelector and plain sets ---------------------------------------------------


@pytest.mark.parametrize(
    ("sel", "labels", "want"),
    [
        (None, {"a": "b"}, False),
        ({}, {"a": "b"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "web", "x": "y"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "db"}, False),
        (
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
            {"tier": "b"},
            True,
        ),
        ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]}, {"tier": "a"}, False),
        ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"tier": ""}, True),
        ({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}, {"tier": ""}, False),
        (
            {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "env", "operator": "Exists"}]},
            {"app": "web"},
            False,
        ),
    ],
)
def test_label_selector_from_dict_matches(
    sel: dict[str, object] | None, labels: dict[str, str], want: bool
) -> None:
    assert label_selector_from_dict(sel).matches(labels) is want


def test_label_selector_from_dict_none_can_mean_everything() -> None:
    assert label_selector_from_dict(None, none_matches=True) is EVERYTHING


def test_label_selector_from_dict_canonical_string() -> None:
    sel = {
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]}],
    }
    assert str(label_selector_from_dict(sel)) == "a=1,b=2,c in (x,y)"


@pytest.mark.parametrize(
    "sel",
    [
        {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
        {"matchLabels": {"bad key": "x"}},
        {"matchLabels": {"k": "bad value"}},
    ],
)
def test_label_selector_from_dict_rejects_invalid(sel: dict[str, object]) -> None:
    with pytest.raises(SelectorError):
        label_selector_from_dict(sel)


def test_invalid_operator_message_names_it() -> None:
    with pytest.raises(SelectorError, match='"Gt" is not a valid label selector operator'):
        label_selector_from_dict({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})


@pytest.mark.parametrize(
    ("sel", "labels", "want"),
    [
        ({}, {"foo": "bar"}, True),
        (None, {"foo": "bar"}, True),
        ({"foo": "bar"}, {"foo": "bar", "baz": "blah"}, True),
        ({"foo": "bar", "baz": "blah"}, {"foo": "bar", "baz": "blah"}, True),
        ({"foo": "bar", "foobar": "bar"}, {"foo": "bar", "baz": "blah"}, False),
    ],
)
def test_selector_from_set(sel: dict[str, str] | None, labels: dict[str, str], want: bool) -> None:
    assert selector_from_set(sel).matches(labels) is want


# --- name checks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "value", "ok"),
    [
        (is_dns1123_label, "my-name", True),
        (is_dns1123_label, "123-abc", True),
        (is_dns1123_label, "a.b", False),
        (is_dns1123_label, "-a", False),
        (is_dns1123_label, "a" * 64, False),
        (is_dns1123_label, "a\n", False),
        (is_dns1123_subdomain, "example.com", True),
        (is_dns1123_subdomain, "Example.com", False),
        (is_dns1123_subdomain, "a" * 254, False),
        (is_qualified_name, "example.com/MyName", True),
        (is_qualified_name, "my.name", True),
        (is_qualified_name, "/name", False),
        (is_qualified_name, "a/b/c", False),
        (is_qualified_name, "_name", False),
        (is_label_value, "", True),
        (is_label_value, "my_value", True),
        (is_label_value, "a b", False),
        (is_label_value, "a" * 64, False),
    ],
)
def test_name_checks(check: Callable[[str], list[str]], value: str, ok: bool) -> None:
    assert (check(value) == []) is ok


def test_dns_label_with_dots_says_so() -> None:
    assert is_dns1123_label("a.b") == ["must not contain dots"]


def test_subdomain_error_text_matches_upstream() -> None:
    assert is_dns1123_subdomain("Foo") == [
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
        "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
        "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]


# --- field selectors (fields/selector_test.go) ----------------------------------------------


@pytest.mark.parametrize("text", ["x=a,y=b,z=c", "", "x!=a,y=b"])
def test_field_selector_round_trips(text: str) -> None:
    assert str(parse_field_selector(text)) == text


@pytest.mark.parametrize("text", ["x=a||y=b", "x==a==b", "novalue", "x=a\\", "x=\\q"])
def test_field_selector_rejects(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_field_selector(text)


def test_field_selector_is_deterministic() -> None:
    assert str(parse_field_selector("x=a,a=x")) == str(parse_field_selector("a=x,x=a"))


@pytest.mark.parametrize(
    ("text", "fields", "want"),
    [
        ("", {"x": "y"}, True),
        ("x=y", {"x": "y"}, True),
        ("x=y,z=w", {"x": "y", "z": "w"}, True),
        ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
        ("notin=in", {"notin": "in"}, True),
        ("x=y", {"x": "z"}, False),
        ("x=y,z=w", {"x": "w", "z": "w"}, False),
        ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
        ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
        ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
        ("x==y", {"x": "y"}, True),
        ("x=", {}, True),
        ("x!=", {}, False),
        ("spec.nodeName!=", {"spec.nodeName": "n1"}, True),
    ],
)
def test_field_selector_matches(text: str, fields: dict[str, str], want: bool) -> None:
    assert parse_field_selector(text).matches(fields) is want


@pytest.mark.parametrize(
    ("text", "requirements"),
    [
        ("a=avalue", [("a", "=", "avalue")]),
        ("b==bvalue,a!=avalue", [("a", "!=", "avalue"), ("b", "=", "bvalue")]),
        ("a=avalue\\,,b=bvalue", [("a", "=", "avalue,"), ("b", "=", "bvalue")]),
        ("a=avalue\\\\,b=bvalue", [("a", "=", "avalue\\"), ("b", "=", "bvalue")]),
        ("a=x\\=y", [("a", "=", "x=y")]),
        ("a=,b=", [("a", "=", ""), ("b", "=", "")]),
        (",a=1,,", [("a", "=", "1")]),
    ],
)
def test_field_selector_splits_and_unescapes(text: str, requirements: list[tuple[str, str, str]]) -> None:
    assert parse_field_selector(text).requirements == tuple(requirements)


def test_field_selector_escapes_values_in_string_form() -> None:
    sel = parse_field_selector("a=x\\,y\\=z\\\\")
    assert str(sel) == "a=x\\,y\\=z\\\\"
    assert parse_field_selector(str(sel)) == sel


def test_field_selector_exact_match_and_empty() -> None:
    sel = parse_field_selector("metadata.name=foo,spec.nodeName!=")
    assert sel.requires_exact_match("metadata.name") == "foo"
    assert sel.requires_exact_match("spec.nodeName") is None
    assert not sel.empty and parse_field_selector("").empty
