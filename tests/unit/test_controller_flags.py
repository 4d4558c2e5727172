"""Per-controller worker flags carry upstream's names."""

from __future__ import annotations

import pytest
from kcm_cli import controllers, main
from kcm_shared import controller


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


@pytest.mark.parametrize(
    ("flag", "attribute", "default"),
    [
        ("--concurrent-serviceaccount-token-syncs", "concurrent_serviceaccount_token_syncs", 5),
        ("--service-account-private-key-file", "service_account_private_key_file", ""),
        ("--root-ca-file", "root_ca_file", ""),
        ("--cluster-signing-cert-file", "cluster_signing_cert_file", ""),
        ("--cluster-signing-key-file", "cluster_signing_key_file", ""),
    ],
)
def test_identity_flags(flag: str, attribute: str, default: object) -> None:
    assert getattr(main.parser().parse_args(["controllers"]), attribute) == default
    value = "7" if isinstance(default, int) else "/x"
    assert str(getattr(main.parser().parse_args(["controllers", f"{flag}={value}"]), attribute)) == value


def test_clean_up_period_is_a_go_duration_defaulting_to_a_year() -> None:
    attribute = "legacy_service_account_token_clean_up_period"
    assert getattr(main.parser().parse_args(["controllers"]), attribute) == 8760 * 3600
    parsed = main.parser().parse_args(["controllers", "--legacy-service-account-token-clean-up-period=1h30m"])
    assert getattr(parsed, attribute) == 5400
    with pytest.raises(SystemExit):
        main.parser().parse_args(["controllers", "--legacy-service-account-token-clean-up-period=0s"])


def test_the_token_controller_runs_only_with_a_private_key() -> None:
    specs = controller.select(controllers.BUILTIN, "serviceaccount-token,garbagecollector")
    without = main.parser().parse_args(["controllers"])
    assert [s.name for s in controller.runnable(specs, without)] == ["garbage-collector-controller"]
    with pytest.raises(SystemExit, match="no private key"):
        controller.runnable([s for s in specs if s.alias == "serviceaccount-token"], without)
    with_key = main.parser().parse_args(["controllers", "--service-account-private-key-file=/k"])
    assert {s.name for s in controller.runnable(specs, with_key)} == {
        "garbage-collector-controller",
        "serviceaccount-token-controller",
    }
