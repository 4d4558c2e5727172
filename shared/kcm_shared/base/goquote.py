"""Go's `%q` (strconv.Quote) for text that upstream prints quoted.

- `go_quote(text)`: double-quoted, `"` and `\\` escaped, Go's short escapes for \\a\\b\\f\\n\\r\\t\\v,
  printable characters as they are, others as \\xNN, \\uNNNN or \\UNNNNNNNN. Python's
  `isprintable` and Go's `unicode.IsPrint` agree on the classes: no spaces but the ASCII one,
  no control, format or unassigned characters.
- Called where upstream's text is reproduced byte for byte: the API server's field errors and
  reviews (`kcm_apiserver.validation.fielderrors`), the garbage collector's DOT dump, label
  selector errors (`kcm_shared.apimachinery.selectors`), the CronJob controller's Events.
"""

from __future__ import annotations

_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(value: str) -> str:
    out = ['"']
    for c in value:
        if c in ('"', "\\"):
            out.append("\\" + c)
        elif c in _GO_ESCAPES:
            out.append(_GO_ESCAPES[c])
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)
