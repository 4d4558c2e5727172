"""Go's words for a JSON body that does not parse, so a 400 reads as kube-apiserver's.

- `syntax_error(data)`: what Go's encoding/json says of the first syntax error in `data`
  (`invalid character 'b' looking for beginning of object key string`, `unexpected end of
  JSON input`), found by a recursive-descent pass over the bytes that stops where Go's scanner
  stops; "" when `data` is valid JSON.
- `summary(data)`: upstream's summarizeData, the start of the body quoted in the message.
- `unrecognized(kind, data)`: the whole message of a create or update whose JSON body does not
  parse: `the object provided is unrecognized (must be of type ConfigMap): couldn't get
  version/kind; json parse error: ... ({bad)`.

`server` calls `unrecognized` when a create or update body in JSON fails to decode.
"""

from __future__ import annotations

_SPACE = b" \t\r\n"
_ESCAPES = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v"}
_SUMMARY_BYTES = 30


class _Error(Exception):
    pass


def _quote(c: int) -> str:
    """Go's quoteChar: the byte as a rune in strconv.Quote's form, between single quotes."""
    if c == ord("'"):
        return "'\\''"
    if c == ord('"'):
        return "'\"'"
    if c in _ESCAPES:
        return f"'{_ESCAPES[c]}'"
    if c < 0x20 or c == 0x7F:
        return f"'\\x{c:02x}'"
    if 0x80 <= c <= 0xA0 or c == 0xAD:  # not printable for Go (C1 controls, no-break space, soft hyphen)
        return f"'\\u{c:04x}'"
    return f"'{chr(c)}'"


class _Scanner:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.i = 0

    def peek(self) -> int:
        if self.i >= len(self.data):
            raise _Error("unexpected end of JSON input")
        return self.data[self.i]

    def skip_space(self) -> None:
        while self.i < len(self.data) and self.data[self.i] in _SPACE:
            self.i += 1

    def fail(self, context: str) -> _Error:
        return _Error(f"invalid character {_quote(self.data[self.i])} {context}")

    def value(self) -> None:
        self.skip_space()
        c = self.peek()
        if c == ord("{"):
            self.i += 1
            self.object()
        elif c == ord("["):
            self.i += 1
            self.array()
        elif c == ord('"'):
            self.i += 1
            self.string()
        elif c == ord("-") or ord("0") <= c <= ord("9"):
            self.number()
        elif c in b"tfn":
            self.literal({ord("t"): b"true", ord("f"): b"false", ord("n"): b"null"}[c])
        else:
            raise self.fail("looking for beginning of value")

    def object(self) -> None:
        self.skip_space()
        if self.peek() == ord("}"):
            self.i += 1
            return
        while True:
            self.skip_space()
            if self.peek() != ord('"'):
                raise self.fail("looking for beginning of object key string")
            self.i += 1
            self.string()
            self.skip_space()
            if self.peek() != ord(":"):
                raise self.fail("after object key")
            self.i += 1
            self.value()
            self.skip_space()
            c = self.peek()
            self.i += 1
            if c == ord("}"):
                return
            if c != ord(","):
                self.i -= 1
                raise self.fail("after object key:value pair")

    def array(self) -> None:
        self.skip_space()
        if self.peek() == ord("]"):
            self.i += 1
            return
        while True:
            self.value()
            self.skip_space()
            c = self.peek()
            self.i += 1
            if c == ord("]"):
                return
            if c != ord(","):
                self.i -= 1
                raise self.fail("after array element")

    def string(self) -> None:
        while True:
            c = self.peek()
            if c == ord('"'):
                self.i += 1
                return
            if c < 0x20:
                raise self.fail("in string literal")
            self.i += 1
            if c == ord("\\"):
                e = self.peek()
                if e == ord("u"):
                    self.i += 1
                    for _ in range(4):
                        if self.peek() not in b"0123456789abcdefABCDEF":
                            raise self.fail("in \\u hexadecimal character escape")
                        self.i += 1
                elif e in b'"\\/bfnrt':
                    self.i += 1
                else:
                    raise self.fail("in string escape code")

    def digits(self) -> None:
        while self.i < len(self.data) and ord("0") <= self.data[self.i] <= ord("9"):
            self.i += 1

    def number(self) -> None:
        if self.peek() == ord("-"):
            self.i += 1
            if not ord("0") <= self.peek() <= ord("9"):
                raise self.fail("in numeric literal")
        if self.peek() == ord("0"):
            self.i += 1
        else:
            self.digits()
        if self.i < len(self.data) and self.data[self.i] == ord("."):
            self.i += 1
            if not ord("0") <= self.peek() <= ord("9"):
                raise self.fail("after decimal point in numeric literal")
            self.digits()
        if self.i < len(self.data) and self.data[self.i] in b"eE":
            self.i += 1
            if self.peek() in b"+-":
                self.i += 1
            if not ord("0") <= self.peek() <= ord("9"):
                raise self.fail("in exponent of numeric literal")
            self.digits()

    def literal(self, word: bytes) -> None:
        for expected in word:
            if self.peek() != expected:
                raise self.fail(f"in literal {word.decode()} (expecting {_quote(expected)})")
            self.i += 1


def syntax_error(data: bytes) -> str:
    scanner = _Scanner(data)
    try:
        scanner.value()
        scanner.skip_space()
        if scanner.i < len(data):
            raise scanner.fail("after top-level value")
    except _Error as exc:
        return str(exc)
    return ""


def summary(data: bytes) -> str:
    if not data:
        return "<empty>"
    head = data[:_SUMMARY_BYTES]
    more = " ..." if len(data) > _SUMMARY_BYTES else ""
    if data[:1] == b"{":
        return head.decode("utf-8", "replace") + more
    return head.hex() + more


def unrecognized(kind: str, data: bytes) -> str:
    return (
        f"the object provided is unrecognized (must be of type {kind}): couldn't get version/kind; "
        f"json parse error: {syntax_error(data)} ({summary(data)})"
    )
