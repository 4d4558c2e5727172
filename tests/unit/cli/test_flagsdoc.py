"""docs/flags.md lists every flag `kcm controllers` accepts, as the flags are declared now."""

from __future__ import annotations

from kcm_cli import flagsdoc
from kcm_shared.runtime import upstreamflags


def test_docs_flags_md_is_current() -> None:
    assert flagsdoc.DOC.read_text() == flagsdoc.render(), "run: .venv/bin/python -m kcm_cli.flagsdoc"


def test_every_upstream_flag_has_one_row_saying_what_it_does_here() -> None:
    rows = [line for line in flagsdoc.render().splitlines() if line.startswith("| `-")]
    for flag in upstreamflags.FLAGS.values():
        (row,) = [r for r in rows if f"`{flag.option}`" in r.split("|")[1]]
        assert (
            row.rstrip(" |").endswith("takes effect")
            or "| takes effect: " in row
            or "| accepted, no effect: " in row
        )
