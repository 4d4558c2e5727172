"""The values of Kubernetes' command-line flags as Go's pflag parses them, with Go's messages.

- One function per pflag value type (`boolean` is strconv.ParseBool, `int32` strconv.ParseInt
  with 32 bits, `duration` time.ParseDuration in seconds, `strings` a StringSlice's CSV, ...):
  each takes the text after `--flag=` and returns the value or raises ValueError with the message
  upstream prints after `invalid argument "<text>" for "--<flag>" flag: `.
- `BY_TYPE` maps the type word `kube-controller-manager --help` prints (`int32`, `duration`,
  `stringToString`, ...) to its function, for the flags `kcm_shared.runtime.upstreamflags`
  declares from upstream's table.
- Called as argparse types by `kcm_shared.runtime.pflag` (which checks each value before argparse
  sees it), leader election's and the controllers' flag declarations.
"""

from __future__ import annotations

import csv
import ipaddress
import re
from collections.abc import Callable
from typing import Any

from kcm_shared.apimachinery import goduration, quantity

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def boolean(text: str) -> bool:
    """strconv.ParseBool: 1 t T TRUE true True, 0 f F FALSE false False; nothing else."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def _integer(text: str, bits: int, fn: str = "ParseInt") -> int:
    # Go's base-0 parse also takes 0x.., 0o.., 0b.. and `_` separators; flags use plain decimals.
    if not _DECIMAL.fullmatch(text) or (fn == "ParseUint" and text[0] in "+-"):
        raise ValueError(f'strconv.{fn}: parsing "{text}": invalid syntax')
    value = int(text)
    low, high = (0, (1 << bits) - 1) if fn == "ParseUint" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if not low <= value <= high:
        raise ValueError(f'strconv.{fn}: parsing "{text}": value out of range')
    return value


def int32(text: str) -> int:
    return _integer(text, 32)


def int64(text: str) -> int:
    """pflag's `int` (Go's int is 64 bits where kube-controller-manager runs)."""
    return _integer(text, 64)


def level(text: str) -> int:
    """klog's `-v` Level: strconv.ParseUint with 32 bits."""
    return _integer(text, 32, "ParseUint")


def float64(text: str) -> float:
    # Python's float() also takes surrounding blanks and `1_000`, which Go refuses.
    try:
        if text != text.strip() or "_" in text:
            raise ValueError
        return float(text)
    except ValueError:
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": invalid syntax') from None


def float32(text: str) -> float:
    value = float64(text)
    if abs(value) > 3.4028234663852886e38 and abs(value) != float("inf"):
        raise ValueError(f'strconv.ParseFloat: parsing "{text}": value out of range')
    return value


def duration(text: str) -> float:
    """time.ParseDuration, in seconds."""
    return goduration.parse(text) / 1e9


def string(text: str) -> str:
    return text


def ip(text: str) -> str:
    try:
        return str(ipaddress.ip_address(text.strip()))
    except ValueError:
        raise ValueError(f'failed to parse IP: "{text}"') from None


def strings(text: str) -> list[str]:
    """A StringSlice's value: one CSV record (`a,b`, `"a,b",c`); the empty text is no item."""
    if not text:
        return []
    try:
        (record,) = list(csv.reader([text], strict=True))
    except (csv.Error, ValueError) as exc:
        raise ValueError(str(exc)) from None
    return record


def string_to_string(text: str) -> dict[str, str]:
    """A StringToString's value: `k=v,k2=v2` (a value may hold commas inside quotes); pflag
    refuses the empty text too."""
    if not text:
        raise ValueError(" must be formatted as key=value")
    out: dict[str, str] = {}
    for pair in strings(text):
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"{pair} must be formatted as key=value")
        out[key] = value
    return out


def feature_gates(text: str) -> dict[str, str]:
    """`--feature-gates`' colon-separated multimap: `A=true,kube:B=false` as {"A": "true", ...}
    for the `kube` component (the one component kube-controller-manager has)."""
    out: dict[str, str] = {}
    prefixed: set[bool] = set()
    for pair in (p.strip() for p in text.split(",")):
        if not pair:
            continue
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"malformed pair, expect string=string: {pair}")
        component, colon, name = key.partition(":")
        if colon and component.strip() != "kube":
            raise ValueError(f"component {component.strip()!r} is not registered")
        prefixed.add(bool(colon))
        out[(name if colon else key).strip()] = value.strip()
    if len(prefixed) > 1:
        raise ValueError(
            "set kube feature gates with default empty prefix or kube: prefix consistently, do not mix use"
        )
    return out


def vmodule(text: str) -> dict[str, int]:
    """klog's `--vmodule pattern=N,...`."""
    out: dict[str, int] = {}
    for pair in (p.strip() for p in text.split(",")):
        if not pair:
            continue
        pattern, sep, value = pair.partition("=")
        if not sep or not pattern:
            raise ValueError(f"expect comma-separated list of pattern=N, got {pair!r}")
        out[pattern] = level(value)
    return out


def resource_quantity(text: str) -> str:
    """A resource.Quantity (`512`, `1K`, `2Ki`), kept as its text."""
    try:
        quantity.parse(text)
    except quantity.QuantityError as exc:
        raise ValueError(str(exc)) from None
    return text


def named_cert_key(text: str) -> list[str]:
    """`--tls-sni-cert-key`: `cert,key` or `cert,key:domain,domain`, kept as its text."""
    files, _, _ = text.partition(":")
    cert, sep, key = files.partition(",")
    if not sep or not cert or not key:
        raise ValueError("expected comma separated certificate and key file paths")
    return [text]


BY_TYPE: dict[str, Callable[[str], Any]] = {
    "bool": boolean,
    "int32": int32,
    "int": int64,
    "Level": level,
    "float32": float32,
    "float": float64,
    "duration": duration,
    "string": string,
    "ip": ip,
    "strings": strings,
    "stringToString": string_to_string,
    "colonSeparatedMultimapStringString": feature_gates,
    "pattern=N,...": vmodule,
    "quantity": resource_quantity,
    "namedCertKey": named_cert_key,
}
