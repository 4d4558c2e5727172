"""pflag's syntax over an argparse parser: what kube-controller-manager's command line means."""

from __future__ import annotations

import argparse

import pytest
from kcm_shared.apimachinery import pflagvalue
from kcm_shared.runtime import pflag


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=True)
    pflag.add_bool(p, "--leader-elect", default=True)
    pflag.add_bool(p, "--allocate-node-cidrs", default=False)
    p.add_argument("--kubeconfig", default="")
    p.add_argument("--concurrent-job-syncs", type=pflagvalue.int32, default=5)
    p.add_argument("--node-monitor-grace-period", type=pflagvalue.duration, default=50.0)
    p.add_argument("-v", "--v", type=pflagvalue.level, default=0)
    p.add_argument("--controllers", type=pflagvalue.strings, action=pflag.Merge, default=["*"])
    p.add_argument("--feature-gates", type=pflagvalue.feature_gates, action=pflag.Merge, default={})
    p.add_argument("--cidr-allocator-type", default="RangeAllocator")
    p.add_argument("--version", nargs="?", const="true", default="false")
    p.add_argument("name", nargs="?")
    return p


def parse(*argv: str) -> argparse.Namespace:
    p = _parser()
    return p.parse_args(pflag.normalize(p, argv))


@pytest.mark.parametrize(
    ("argv", "attribute", "value"),
    [
        ((), "leader_elect", True),
        (("--leader-elect=false",), "leader_elect", False),
        (("--leader-elect=F",), "leader_elect", False),
        (("--leader-elect=0", "--leader-elect"), "leader_elect", True),  # the last one counts
        (("--allocate-node-cidrs",), "allocate_node_cidrs", True),
        (("--allocate-node-cidrs=true",), "allocate_node_cidrs", True),
        (("--allocate_node_cidrs=True",), "allocate_node_cidrs", True),  # `_` reads as `-`
        (
            ("--kubeconfig", "/etc/kubernetes/controller-manager.conf"),
            "kubeconfig",
            "/etc/kubernetes/controller-manager.conf",
        ),
        (("--kubeconfig=-odd-",), "kubeconfig", "-odd-"),
        (("--kubeconfig", "--odd"), "kubeconfig", "--odd"),  # pflag takes the next word, whatever it is
        (("--kubeconfig=",), "kubeconfig", ""),
        (("--concurrent_job_syncs", "7"), "concurrent_job_syncs", 7),
        (("--node-monitor-grace-period=1m30s",), "node_monitor_grace_period", 90.0),
        (("-v3",), "v", 3),
        (("-v=3",), "v", 3),
        (("-v", "3"), "v", 3),
        (("--v=3",), "v", 3),
        (
            ("--controllers=*,bootstrapsigner,tokencleaner",),
            "controllers",
            ["*", "bootstrapsigner", "tokencleaner"],
        ),
        (("--controllers=*", "--controllers=-job"), "controllers", ["*", "-job"]),  # repeating adds
        (
            ("--feature-gates=A=true,B=false", "--feature-gates", "C=true"),
            "feature_gates",
            {"A": "true", "B": "false", "C": "true"},
        ),
        (("--version",), "version", "true"),
        (("--version=raw",), "version", "raw"),
        (("deployment", "--leader-elect=false"), "name", "deployment"),  # positionals anywhere
        (("--", "--leader-elect=false"), "name", "--leader-elect=false"),  # `--` ends the flags
    ],
)
def test_pflag_syntax(argv: tuple[str, ...], attribute: str, value: object) -> None:
    assert getattr(parse(*argv), attribute) == value


def test_a_bool_never_takes_the_next_word() -> None:
    # pflag reads `--allocate-node-cidrs false` as the flag and a positional `false`.
    args = parse("--allocate-node-cidrs", "false")
    assert (args.allocate_node_cidrs, args.name) == (True, "false")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--foo",), "unknown flag: --foo"),
        (("--foo=1",), "unknown flag: --foo"),
        # argparse would take a prefix as the flag it begins; pflag never does.
        (("--cidr-allocator-t=x",), "unknown flag: --cidr-allocator-t"),
        (("--kube",), "unknown flag: --kube"),
        (("-x",), "unknown shorthand flag: 'x' in -x"),
        (("-kubeconfig=x",), "unknown shorthand flag: 'k' in -kubeconfig=x"),
        (("--kubeconfig",), "flag needs an argument: --kubeconfig"),
        (
            ("--allocate-node-cidrs=maybe",),
            'invalid argument "maybe" for "--allocate-node-cidrs" flag: '
            'strconv.ParseBool: parsing "maybe": invalid syntax',
        ),
        (
            ("--node-monitor-grace-period=5",),
            'invalid argument "5" for "--node-monitor-grace-period" flag: time: missing unit in duration "5"',
        ),
        (
            ("--concurrent-job-syncs=x",),
            'invalid argument "x" for "--concurrent-job-syncs" flag: strconv.ParseInt: parsing "x": invalid syntax',
        ),
        (
            ("--v=x",),
            'invalid argument "x" for "-v, --v" flag: strconv.ParseUint: parsing "x": invalid syntax',
        ),
        (("--help=1",), "flag -h, --help takes no value"),
    ],
)
def test_what_pflag_refuses_is_one_line(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(pflag.FlagError) as err:
        pflag.normalize(_parser(), argv)
    assert str(err.value) == message
