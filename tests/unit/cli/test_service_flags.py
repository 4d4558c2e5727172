"""`kcm watcher` and `kcm coordinator` read their command lines with pflag's syntax, as `kcm
controllers` does (issue 29): one syntax for every kcm service."""

from __future__ import annotations

import pytest
from kcm_cli import dev, devcmd, main
from kcm_shared.base import errors
from kcm_shared.bus import flags
from kcm_shared.runtime import pflag


@pytest.mark.parametrize("command", ["watcher", "coordinator"])
def test_bools_durations_and_underscores_as_pflag_reads_them(command: str) -> None:
    args, _ = main.parse(
        [command, "--leader-elect=false", "--leader_elect_lease_duration=20s", "--kube-api-qps", "7"]
    )
    assert args.leader_elect is False
    assert args.leader_elect_lease_duration == 20.0
    assert args.kube_api_qps == 7.0
    args, _ = main.parse([command, "--leader-elect"])
    assert args.leader_elect is True
    assert args.kube_api_content_type == "application/json"  # kcm's default, not upstream's


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["watcher", "--resourc=v1/pods"], "unknown flag: --resourc"),  # argparse took the prefix
        (["coordinator", "--partition=3"], "unknown flag: --partition"),
        (["coordinator", "--leader-elect=maybe"], 'invalid argument "maybe" for "--leader-elect" flag'),
        (["watcher", "--sync-grace=2"], 'invalid argument "2" for "--sync-grace" flag'),
        (["coordinator", "--kubeconfig"], "flag needs an argument: --kubeconfig"),
    ],
)
def test_what_pflag_refuses_is_one_line(argv: list[str], message: str) -> None:
    with pytest.raises(pflag.FlagError, match=message):
        main.parse(argv)


def test_a_content_type_kcm_cannot_read_parses_as_upstreams_and_is_refused_at_start() -> None:
    args, _ = main.parse(["controllers", "--kube-api-content-type=application/yaml"])
    assert args.kube_api_content_type == "application/yaml"
    with pytest.raises(errors.ConfigError, match="'application/yaml' is not a media type kcm reads"):
        flags.kube_client(args, "test")


def test_their_own_flags_keep_working() -> None:
    args, _ = main.parse(
        ["coordinator", "--partitions-for=job=3", "--partitions-for", "cronjob=2", "--member-lease=7s"]
    )
    assert args.partitions_for == [("job", 3), ("cronjob", 2)] and args.member_lease == 7.0
    args, _ = main.parse(["watcher", "--resources=v1/pods,-v1/events", "--publish-window=8"])
    assert args.resources == "v1/pods,-v1/events" and args.publish_window == 8


def test_kcm_dev_hands_the_lease_timing_and_content_type_to_the_watcher_and_the_coordinator() -> None:
    argv = [
        "dev",
        "--leader-elect=false",
        "--leader_elect_lease_duration=20s",
        "--leader-elect-resource-name=x",
        "--kube-api-content-type",
        "application/vnd.kubernetes.protobuf",
    ]
    args, words = main.parse([*argv, "--kube-api-qps=5"])
    handed = dev.shared_flags(devcmd.passthrough(args, words[1:]))
    assert handed == [
        "--kube-api-content-type=application/vnd.kubernetes.protobuf",
        "--leader-elect=false",
        "--leader-elect-lease-duration=20s",
    ]
    for command in ("watcher", "coordinator"):
        parsed, _ = main.parse([command, *handed])
        assert parsed.leader_elect is False and parsed.leader_elect_lease_duration == 20.0
        assert parsed.kube_api_content_type == "application/vnd.kubernetes.protobuf"
