"""The launcher's subcommand table: `kcm SUB` loads only SUB's module, and that module adds
exactly the subcommands the table says, each with something to run."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from kcm_cli import main


@pytest.mark.parametrize(("names", "entry"), main.SUBCOMMANDS)
def test_each_module_registers_the_subcommands_the_table_names(names: tuple[str, ...], entry: str) -> None:
    p = argparse.ArgumentParser(prog="kcm")
    sub = p.add_subparsers(dest="command", required=True)
    main._registrar(entry)(sub)
    assert tuple(sub.choices) == names
    for name in names:
        defaults = sub.choices[name]._defaults
        assert callable(defaults.get("run")) or callable(defaults.get("main")), name


def test_the_whole_parser_lists_every_subcommand_in_the_tables_order() -> None:
    (sub,) = (a for a in main.parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == [name for names, _ in main.SUBCOMMANDS for name in names]


@pytest.mark.parametrize(
    ("argv", "absent"),
    [
        (["watcher"], ["kcm_apiserver", "kcm_simulator", "kcm_coordinator.service", "kcm_controllers"]),
        (["coordinator"], ["kcm_apiserver", "kcm_simulator", "kcm_watcher", "kcm_controllers"]),
        (
            ["sim", "--kubeconfig", "k"],
            ["kcm_apiserver", "kcm_watcher", "kcm_coordinator", "kcm_controllers"],
        ),
        (["controllers"], ["kcm_apiserver", "kcm_simulator", "kcm_watcher", "kcm_coordinator"]),
    ],
)
def test_a_service_process_imports_none_of_the_other_services(argv: list[str], absent: list[str]) -> None:
    code = f"import json, sys\nfrom kcm_cli import main\nmain.parse({argv!r})\nprint(json.dumps(list(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert "kcm_cli.main" in loaded
    assert not [m for m in loaded if any(m == a or m.startswith(a + ".") for a in absent)]


def test_a_refused_command_line_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main.main(["sim", "--backoff-scale", "0", "--kubeconfig", "k"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: kcm [-h]")
    assert err.rstrip().endswith("kcm: error: kcm sim: --backoff-scale must be more than 0, not 0.0")
