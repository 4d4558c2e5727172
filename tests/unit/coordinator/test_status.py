"""`kcm status` prints what heartbeats on the bus said: never a control character raw."""

from __future__ import annotations

import io

import pytest
from kcm_coordinator import status


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("vm-1", "vm-1"),
        ("naïve-β", "naïve-β"),
        ("a\x1b[2Jb", "a\\x1b[2Jb"),
        ("title\x1b]0;x\x07", "title\\x1b]0;x\\x07"),
        ("line\nbreak\r", "line\\nbreak\\r"),
        ("bidi\u202eflip", "bidi\\u202eflip"),
        ("del\x7f", "del\\x7f"),
    ],
)
def test_visible(text: str, shown: str) -> None:
    assert status.visible(text) == shown


def test_render_escapes_every_cell_and_the_header() -> None:
    doc = {
        "leader": True,
        "identity": "coord\x1b[31m",
        "controllers": {"c\x1b[2J": {"healthy": False, "error": "boom\x07", "partitions": {"0": "x"}}},
        "members": [
            {"instance": "m\x1b]0;t\x07", "service": "controllers", "age_seconds": 1.0, "ops_url": "\x1b"}
        ],
    }
    out = io.StringIO()
    assert status.render(doc, "http://h\x1b", out) == 1
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "coord\\x1b[31m" in text and "m\\x1b]0;t\\x07" in text and "boom\\x07" in text
