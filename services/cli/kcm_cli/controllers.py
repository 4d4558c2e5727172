"""`kcm controllers` and `kcm controller NAME`: controller services on the shared runtime.

The launcher is the one place that knows every controller: `REGISTRY` names, one line
each, the module of every built-in controller (a folder under
services/controllers/kcm_controllers/) whose `SPEC` it runs; `BUILTIN` holds those Specs.
A line there is all a new controller needs outside its folder: the flags, `kcm dev`, the
NATS identities and the deployment manifests (`kcm manifests`) all follow from the Spec.
Controllers outside this repository run with `--plugin MODULE:ATTR`.
"""

from __future__ import annotations

import argparse
from collections.abc import Coroutine
from typing import Any

from kcm_shared import runtime
from kcm_shared.runtime import controllerflags, manager

REGISTRY = (
    "kcm_controllers.deployment.controller:SPEC",
    "kcm_controllers.replicaset.controller:SPEC",
    "kcm_controllers.replicationcontroller.controller:SPEC",
    "kcm_controllers.garbagecollector.controller:SPEC",
    "kcm_controllers.serviceaccount.controller:SPEC",
    "kcm_controllers.rootcacertpublisher.controller:SPEC",
    "kcm_controllers.clusterroleaggregation.controller:SPEC",
    "kcm_controllers.namespace.controller:SPEC",
    "kcm_controllers.serviceaccounttoken.controller:SPEC",
    "kcm_controllers.legacytokencleaner.controller:SPEC",
    "kcm_controllers.resourcequota.controller:SPEC",
    "kcm_controllers.ttlafterfinished.controller:SPEC",
    "kcm_controllers.podgc.controller:SPEC",
    "kcm_controllers.job.controller:SPEC",
    "kcm_controllers.cronjob.controller:SPEC",
    "kcm_controllers.disruption.controller:SPEC",
    "kcm_controllers.podautoscaler.controller:SPEC",
    "kcm_controllers.nodeipam.controller:SPEC",
    "kcm_controllers.nodelifecycle.controller:SPEC",
    "kcm_controllers.statefulset.controller:SPEC",
    "kcm_controllers.endpoint.controller:SPEC",
    "kcm_controllers.endpointslice.controller:SPEC",
    "kcm_controllers.daemonset.controller:SPEC",
    "kcm_controllers.endpointslicemirroring.controller:SPEC",
    "kcm_controllers.tainteviction.controller:SPEC",
    "kcm_controllers.ttl.controller:SPEC",
    "kcm_controllers.csrsigning.controller:SPEC",
    "kcm_controllers.csrapproving.controller:SPEC",
    "kcm_controllers.csrcleaner.controller:SPEC",
    "kcm_controllers.bootstrapsigner.controller:SPEC",
    "kcm_controllers.tokencleaner.controller:SPEC",
    "kcm_controllers.pvcprotection.controller:SPEC",
    "kcm_controllers.pvprotection.controller:SPEC",
    "kcm_controllers.ephemeral.controller:SPEC",
    "kcm_controllers.pvbinder.controller:SPEC",
    "kcm_controllers.attachdetach.controller:SPEC",
    "kcm_controllers.expand.controller:SPEC",
    "kcm_controllers.vapstatus.controller:SPEC",
)

BUILTIN: list[runtime.Spec] = [controllerflags.load_plugin(entry) for entry in REGISTRY]


def _run_many(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    return manager.run(args, BUILTIN)


def _run_one(args: argparse.Namespace) -> Coroutine[Any, Any, None]:
    args.controllers = args.name or ""
    return manager.run(args, BUILTIN)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    many = sub.add_parser("controllers", help="run several controllers in one process")
    controllerflags.add_arguments(many, BUILTIN)
    many.set_defaults(service="controllers", run=_run_many)
    one = sub.add_parser("controller", help="run one controller")
    one.add_argument("name", nargs="?", help="canonical name or alias (omit with --plugin)")
    controllerflags.add_arguments(one, BUILTIN)
    one.set_defaults(service="controller", run=_run_one)
