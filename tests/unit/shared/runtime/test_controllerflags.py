"""Per-controller worker flags carry upstream's names; controllers' own flags reach them."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest
from kcm_cli import controllers, devcmd, main
from kcm_shared import runtime
from kcm_shared.base import errors
from kcm_shared.runtime import controllerflags, manager


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


def _spec(name: str, declare: Callable[[runtime.FlagSet], None]) -> runtime.Spec:
    return runtime.Spec(name=name, alias=name, primary=None, views={}, build=lambda ctx: _noop, flags=declare)


async def _noop(key: str) -> None:
    return None


def _root_ca(p: runtime.FlagSet) -> None:
    p.add_argument("--root-ca-file", help="first")


def _root_ca_and_period(p: runtime.FlagSet) -> None:
    p.add_argument("--root-ca-file", help="second")
    p.add_argument("--clean-up-period", default="8760h")
    p.add_argument("--allocate", action="store_true")


SPECS = [_spec("one", _root_ca), _spec("two", _root_ca_and_period)]


def test_a_spec_declares_its_own_flags_and_a_shared_one_once() -> None:
    p = argparse.ArgumentParser()
    controllerflags.add_arguments(p, SPECS)
    args = p.parse_args(["--root-ca-file", "/ca.crt", "--allocate"])
    assert (args.root_ca_file, args.clean_up_period, args.allocate) == ("/ca.crt", "8760h", True)
    assert [a.help for a in p._actions if "--root-ca-file" in a.option_strings] == ["first"]


def test_kcm_dev_passes_through_exactly_the_controllers_flags() -> None:
    known = controllerflags.passthrough_flags(SPECS)
    ours = {"--root-ca-file", "--clean-up-period", "--allocate", "--concurrent-one-syncs", "--max-deliveries"}
    assert ours | {"--leader-elect", "--feature-gates", "-v"} <= known
    assert not {"--nats-url", "--controllers", "--kubeconfig", "--ops-port", "--plugin"} & known


def test_kcm_dev_refuses_a_flag_no_controller_has(capsys: pytest.CaptureFixture[str]) -> None:
    assert main.main(["dev", "--no-such-flag=1"]) == 1
    assert capsys.readouterr().err == "Error: unknown flag: --no-such-flag\n"
    assert main.main(["dev", "--concurrent-gc-syncs"]) == 1  # a value is wanted
    assert capsys.readouterr().err == "Error: flag needs an argument: --concurrent-gc-syncs\n"


def test_kcm_dev_hands_on_the_controllers_flags_as_pflag_read_them() -> None:
    args, words = main.parse(
        ["dev", "--concurrent-gc-syncs", "3", "--leader_elect=false", "--nodes=0", "-v4"]
    )
    assert args.nodes == 0
    assert devcmd.passthrough(args, words[1:]) == ["--concurrent-gc-syncs=3", "--leader-elect=false", "--v=4"]


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


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], (False, "kube-system")),
        (["--use-service-account-credentials"], (True, "kube-system")),
        (["--use-service-account-credentials=true"], (True, "kube-system")),
        (["--use-service-account-credentials=false"], (False, "kube-system")),
        (
            ["--use-service-account-credentials", "--service-account-credentials-namespace=kcm-system"],
            (True, "kcm-system"),
        ),
    ],
)
def test_service_account_credentials_flags(argv: list[str], expected: tuple[bool, str]) -> None:
    for command in (["controllers"], ["controller", "deployment"]):
        args = main.parser().parse_args([*command, *argv])
        assert (args.use_service_account_credentials, args.service_account_credentials_namespace) == expected


def test_clean_up_period_is_a_go_duration_defaulting_to_a_year() -> None:
    attribute = "legacy_service_account_token_clean_up_period"
    assert getattr(main.parser().parse_args(["controllers"]), attribute) == 8760 * 3600
    parsed = main.parser().parse_args(["controllers", "--legacy-service-account-token-clean-up-period=1h30m"])
    assert getattr(parsed, attribute) == 5400
    with pytest.raises(SystemExit):
        main.parser().parse_args(["controllers", "--legacy-service-account-token-clean-up-period=0s"])


def test_the_token_controller_runs_only_with_a_private_key() -> None:
    specs = controllerflags.select(controllers.BUILTIN, "serviceaccount-token,garbagecollector")
    without = main.parser().parse_args(["controllers"])
    assert [s.name for s in manager.runnable(specs, without)] == ["garbage-collector-controller"]
    with pytest.raises(SystemExit, match="no private key"):
        manager.runnable([s for s in specs if s.alias == "serviceaccount-token"], without)
    with_key = main.parser().parse_args(["controllers", "--service-account-private-key-file=/k"])
    assert {s.name for s in manager.runnable(specs, with_key)} == {
        "garbage-collector-controller",
        "serviceaccount-token-controller",
    }


@pytest.mark.parametrize(
    "name",
    [
        "legacy-serviceaccount-token-cleaner-controller",
        "legacy-service-account-token-cleaner",
        "legacy-serviceaccount-token-cleaner",
    ],
)
def test_the_token_cleaner_is_selected_by_any_of_its_names(name: str) -> None:
    (spec,) = controllerflags.select(controllers.BUILTIN, name)
    assert spec.name == "legacy-serviceaccount-token-cleaner-controller"
    assert spec not in controllerflags.select(controllers.BUILTIN, f"*,-{name}")


@pytest.mark.parametrize(("value", "runs"), [("true", True), ("false", False)])
def test_enable_garbage_collector_false_leaves_the_garbage_collector_off(value: str, runs: bool) -> None:
    args, _ = main.parse(["controllers", f"--enable-garbage-collector={value}"])
    chosen = controllerflags.select(controllers.BUILTIN, "garbagecollector,job")
    left = [spec.name for spec in manager.runnable(chosen, args)]
    assert left == (["garbage-collector-controller", "job-controller"] if runs else ["job-controller"])


def test_leader_elect_false_is_refused_by_the_controllers_in_one_line() -> None:
    args, _ = main.parse(["controllers", "--leader-elect=false"])
    with pytest.raises(
        errors.ConfigError, match=r"^--leader-elect=false is not supported by kcm.s controllers"
    ):
        controllerflags.refuse_leader_elect_false(args)
    controllerflags.refuse_leader_elect_false(main.parse(["controllers", "--leader-elect"])[0])
    controllerflags.refuse_leader_elect_false(main.parse(["controllers"])[0])
