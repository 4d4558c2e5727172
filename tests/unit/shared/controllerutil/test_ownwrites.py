"""OwnWrites: a sync starts from its own last write only while the cache still shows a
version that write replaced."""

from __future__ import annotations

import pytest
from kcm_shared.apimachinery import codec
from kcm_shared.controllerutil import ownwrites


def obj(rv: str, name: str = "web") -> codec.Meta:
    return codec.Meta(metadata=codec.ObjectMeta(name=name, namespace="default", resource_version=rv))


def test_without_writes_the_cache_is_used() -> None:
    writes: ownwrites.OwnWrites[codec.Meta] = ownwrites.OwnWrites()
    cached = obj("5")
    assert writes.latest("default/web", cached) is cached
    assert writes.latest("default/web", None) is None


@pytest.mark.parametrize(
    ("writes_made", "cache_shows"),
    [
        ([("5", "6")], ["5", "5"]),  # behind on this sync and the next: still ours
        ([("5", "6"), ("6", "7")], ["5", "6"]),  # chained: the last write, whichever it shows
    ],
)
def test_a_cache_behind_our_writes_gives_the_last_written_object(
    writes_made: list[tuple[str, str]], cache_shows: list[str]
) -> None:
    writes: ownwrites.OwnWrites[codec.Meta] = ownwrites.OwnWrites()
    results = [obj(after) for _, after in writes_made]
    for (before, _), result in zip(writes_made, results, strict=True):
        writes.record("default/web", before, result)
    for rv in cache_shows:
        assert writes.latest("default/web", obj(rv)) is results[-1]


def test_caught_up_deleted_or_changed_elsewhere_forgets_the_write() -> None:
    writes: ownwrites.OwnWrites[codec.Meta] = ownwrites.OwnWrites()
    for cached in (obj("6"), None, obj("9")):
        writes.record("default/web", "5", obj("6"))
        assert writes.latest("default/web", cached) is cached
        assert len(writes) == 0
        # Forgotten: an old version seen again (a relist) is taken as it is.
        old = obj("5")
        assert writes.latest("default/web", old) is old


def test_a_write_on_a_version_we_did_not_write_starts_afresh() -> None:
    writes: ownwrites.OwnWrites[codec.Meta] = ownwrites.OwnWrites()
    writes.record("default/web", "5", obj("6"))
    nine = obj("9")
    writes.record("default/web", "8", nine)  # someone else wrote 7 and 8 meanwhile
    assert writes.latest("default/web", obj("8")) is nine
    # 5 was replaced by a write this no longer follows: the cache's 5 is not taken for 9.
    five = obj("5")
    assert writes.latest("default/web", five) is five


def test_retain_forgets_the_writes_of_keys_whose_partition_moved_away() -> None:
    writes: ownwrites.OwnWrites[codec.Meta] = ownwrites.OwnWrites()
    writes.record("ns/kept", "1", obj("2", "kept"))
    writes.record("ns/moved", "1", obj("2", "moved"))
    writes.retain(lambda key: key == "ns/kept")
    assert len(writes) == 1
    assert writes.latest("ns/kept", obj("1", "kept")) == obj("2", "kept")
