"""`kcm controllers` and `kcm controller NAME`: controller services on the shared runtime.

The launcher is the one place that knows every controller; `BUILTIN` lists their Specs
(the controllers themselves land in their own service folders). Controllers outside this
repository run with `--plugin MODULE:ATTR`.
"""

from __future__ import annotations

import argparse
from collections.abc import Coroutine
from typing import Any

from kcm_deployment import deployment_controller
from kcm_garbagecollector import garbagecollector
from kcm_replicaset import replicaset
from kcm_shared import controller

BUILTIN: list[controller.Spec] = [deployment_controller.SPEC, replicaset.SPEC, garbagecollector.SPEC]


def _run_many(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    return controller.run(args, BUILTIN)


def _run_one(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    args.controllers = args.name or ""
    return controller.run(args, BUILTIN)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    many = sub.add_parser("controllers", help="run several controllers in one process")
    controller.add_arguments(many, BUILTIN)
    many.set_defaults(service="controllers", run=_run_many)
    one = sub.add_parser("controller", help="run one controller")
    one.add_argument("name", nargs="?", help="canonical name or alias (omit with --plugin)")
    controller.add_arguments(one, BUILTIN)
    one.set_defaults(service="controller", run=_run_one)
