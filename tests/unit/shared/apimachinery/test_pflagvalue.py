"""Flag values as Go's pflag parses them, with Go's messages (strconv, time, net, csv)."""

from __future__ import annotations

from typing import Any

import pytest
from kcm_shared.apimachinery import pflagvalue


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        *[("bool", t, True) for t in ("1", "t", "T", "TRUE", "true", "True")],
        *[("bool", f, False) for f in ("0", "f", "F", "FALSE", "false", "False")],
        ("int32", "2147483647", 2147483647),
        ("int32", "-2147483648", -2147483648),
        ("int32", "+7", 7),
        ("int", "10257", 10257),
        ("Level", "4", 4),
        ("float32", "0.55", 0.55),
        ("float32", "20", 20.0),
        ("float", "1e-1", 0.1),
        ("duration", "1m30s", 90.0),
        ("duration", "8760h0m0s", 8760 * 3600.0),
        ("duration", "0", 0.0),
        ("duration", "500ms", 0.5),
        ("ip", "127.0.0.1", "127.0.0.1"),
        ("ip", "::", "::"),
        ("strings", "*,bootstrapsigner,tokencleaner", ["*", "bootstrapsigner", "tokencleaner"]),
        ("strings", '"a,b",c', ["a,b", "c"]),
        ("strings", "", []),
        ("stringToString", "m1,l1=v1,m2=v2", None),  # a key may not hold a comma outside quotes
        ("stringToString", "a=1,b=x=y", {"a": "1", "b": "x=y"}),
        ("colonSeparatedMultimapStringString", "A=true,B=false", {"A": "true", "B": "false"}),
        ("colonSeparatedMultimapStringString", "kube:A=true,kube:B=false", {"A": "true", "B": "false"}),
        ("colonSeparatedMultimapStringString", "A=true,kube:B=false", None),  # upstream: do not mix
        ("pattern=N,...", "gc*=4,job=2", {"gc*": 4, "job": 2}),
        ("quantity", "2Ki", "2Ki"),
        ("namedCertKey", "a.crt,a.key:*.foo.com", ["a.crt,a.key:*.foo.com"]),
    ],
)
def test_values_pflag_takes(kind: str, text: str, value: Any) -> None:
    parse = pflagvalue.BY_TYPE[kind]
    if value is None:
        with pytest.raises(ValueError):
            parse(text)
    else:
        assert parse(text) == value


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("bool", "maybe", 'strconv.ParseBool: parsing "maybe": invalid syntax'),
        ("bool", "yes", 'strconv.ParseBool: parsing "yes": invalid syntax'),
        ("bool", "tRuE", 'strconv.ParseBool: parsing "tRuE": invalid syntax'),
        ("int32", "x", 'strconv.ParseInt: parsing "x": invalid syntax'),
        ("int32", "2147483648", 'strconv.ParseInt: parsing "2147483648": value out of range'),
        ("int32", "1.5", 'strconv.ParseInt: parsing "1.5": invalid syntax'),
        ("Level", "-1", 'strconv.ParseUint: parsing "-1": invalid syntax'),
        ("float32", "x", 'strconv.ParseFloat: parsing "x": invalid syntax'),
        ("float32", " 1", 'strconv.ParseFloat: parsing " 1": invalid syntax'),
        ("float32", "1_0", 'strconv.ParseFloat: parsing "1_0": invalid syntax'),
        ("duration", "5", 'time: missing unit in duration "5"'),
        ("duration", "5x", 'time: unknown unit "x" in duration "5x"'),
        ("ip", "x", 'failed to parse IP: "x"'),
        ("stringToString", "x", "x must be formatted as key=value"),
        ("colonSeparatedMultimapStringString", "A", "malformed pair, expect string=string: A"),
        ("quantity", "lots", "quantities must match the regular expression"),
    ],
)
def test_bad_values_fail_with_gos_message(kind: str, text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        pflagvalue.BY_TYPE[kind](text)
    assert str(err.value).startswith(message)
