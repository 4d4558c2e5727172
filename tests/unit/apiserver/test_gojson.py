"""Go's encoding/json words for a body that does not parse (kcm_apiserver.gojson); the same
bodies are compared with kube-apiserver's answers in tests/e2e/test_apiserver_parity.py."""

from __future__ import annotations

import pytest
from kcm_apiserver import gojson


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"{bad", "invalid character 'b' looking for beginning of object key string"),
        (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a":1 "b"}', "invalid character '\"' after object key:value pair"),
        (b"[1 2]", "invalid character '2' after array element"),
        (b'{"a":tru}', "invalid character '}' in literal true (expecting 'e')"),
        (b'{"a":-x}', "invalid character 'x' in numeric literal"),
        (b'{"a":1.}', "invalid character '}' after decimal point in numeric literal"),
        (b'{"a":1e}', "invalid character '}' in exponent of numeric literal"),
        (b'{"a":"\\q"}', "invalid character 'q' in string escape code"),
        (b'{"a":"\\u12g4"}', "invalid character 'g' in \\u hexadecimal character escape"),
        (b'{"a":"\n"}', "invalid character '\\n' in string literal"),
        (b'{"a":01}', "invalid character '1' after object key:value pair"),
        (b"{}x", "invalid character 'x' after top-level value"),
        (b"'", "invalid character '\\'' looking for beginning of value"),
        (b'{"a":', "unexpected end of JSON input"),
        (b' {"a": [1, {"b": null}], "c": -0.5e+3} ', ""),
    ],
)
def test_the_first_syntax_error_in_gos_words(data: bytes, error: str) -> None:
    assert gojson.syntax_error(data) == error


def test_the_message_quotes_the_start_of_the_body() -> None:
    assert gojson.unrecognized("ConfigMap", b"{bad") == (
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; "
        "json parse error: invalid character 'b' looking for beginning of object key string ({bad)"
    )
    assert gojson.summary(b"{" + b"x" * 40) == "{" + "x" * 29 + " ..."
    assert gojson.summary(b"[1 2]") == "5b3120325d"  # not an object: in hex, as upstream
