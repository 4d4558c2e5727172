"""kcm_shared.controllerutil.settle: writes side by side, a 404 is done, the first other error kept."""

from __future__ import annotations

import asyncio

import pytest
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import settle

GONE = kubeclient.ApiError(404, "NotFound", "gone")
BROKEN = kubeclient.ApiError(500, "InternalError", "broken")


def wrapped(exc: Exception) -> RuntimeError:
    try:
        raise RuntimeError(f"removing the finalizer: {exc}") from exc
    except RuntimeError as wrapper:
        return wrapper


def run(outcomes: dict[str, BaseException | None]) -> settle.Settled[str]:
    started: list[str] = []

    async def write(name: str) -> None:
        started.append(name)
        await asyncio.sleep(0)
        outcome = outcomes[name]
        if outcome is not None:
            raise outcome

    settled = asyncio.run(settle.each(list(outcomes), write))
    assert started == list(outcomes)  # every write ran, whatever the others did
    return settled


def test_a_404_is_done_and_the_first_other_error_is_kept() -> None:
    timeout = TimeoutError("slow")
    settled = run(
        {"ok": None, "gone": GONE, "broken": BROKEN, "wrapped-gone": wrapped(GONE), "slow": timeout}
    )
    assert settled.done == ["ok", "gone", "wrapped-gone"]
    assert settled.raised == ["gone", "broken", "wrapped-gone", "slow"]
    assert settled.error is BROKEN


def test_all_done() -> None:
    assert run({"a": None, "b": GONE}) == settle.Settled(["a", "b"], ["b"], None)


def test_no_items() -> None:
    assert run({}) == settle.Settled([], [], None)


def test_a_cancelled_write_cancels_the_sync() -> None:
    with pytest.raises(asyncio.CancelledError):
        run({"a": None, "b": asyncio.CancelledError()})


@pytest.mark.parametrize(
    ("exc", "gone"),
    [(GONE, True), (BROKEN, False), (wrapped(GONE), True), (wrapped(BROKEN), False), (KeyError("x"), False)],
)
def test_not_found(exc: Exception, gone: bool) -> None:
    assert settle.not_found(exc) is gone
