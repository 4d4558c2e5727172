"""Per-controller worker flags carry upstream's names."""

from __future__ import annotations

import pytest
from kcm_cli import main


@pytest.mark.parametrize(
    ("flag", "attribute", "default"),
    [
        ("--concurrent-replicaset-syncs", "concurrent_replicaset_syncs", 5),
        ("--concurrent-deployment-syncs", "concurrent_deployment_syncs", 5),
        ("--concurrent-gc-syncs", "concurrent_gc_syncs", 20),
    ],
)
def test_workers_flag(flag: str, attribute: str, default: int) -> None:
    assert getattr(main.parser().parse_args(["controllers"]), attribute) == default
    assert getattr(main.parser().parse_args(["controllers", flag, "7"]), attribute) == 7


def test_the_garbage_collector_has_no_alias_derived_flag() -> None:
    with pytest.raises(SystemExit):
        main.parser().parse_args(["controllers", "--concurrent-garbagecollector-syncs", "7"])
