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

from kcm_shared import controller

REGISTRY = (
    "kcm_controllers.deployment.deployment_controller:SPEC",
    "kcm_controllers.replicaset.replicaset:SPEC",
    "kcm_controllers.replicationcontroller.replicationcontroller:SPEC",
    "kcm_controllers.garbagecollector.garbagecollector:SPEC",
    "kcm_controllers.serviceaccount.serviceaccounts:SPEC",
    "kcm_controllers.rootcacertpublisher.publisher:SPEC",
    "kcm_controllers.clusterroleaggregation.clusterroleaggregation:SPEC",
    "kcm_controllers.namespace.namespace_controller:SPEC",
    "kcm_controllers.serviceaccounttoken.tokens_controller:SPEC",
    "kcm_controllers.legacytokencleaner.cleaner:SPEC",
    "kcm_controllers.resourcequota.resourcequota:SPEC",
    "kcm_controllers.ttlafterfinished.ttlafterfinished_controller:SPEC",
    "kcm_controllers.podgc.gc_controller:SPEC",
    "kcm_controllers.job.job_controller:SPEC",
    "kcm_controllers.cronjob.cronjob_controller:SPEC",
    "kcm_controllers.disruption.disruption:SPEC",
    "kcm_controllers.podautoscaler.horizontal:SPEC",
    "kcm_controllers.nodeipam.node_ipam_controller:SPEC",
    "kcm_controllers.statefulset.statefulset:SPEC",
    "kcm_controllers.endpoint.endpoints_controller:SPEC",
    "kcm_controllers.endpointslice.endpointslice_controller:SPEC",
    "kcm_controllers.daemonset.daemon_controller:SPEC",
    "kcm_controllers.endpointslicemirroring.endpointslicemirroring_controller:SPEC",
)

BUILTIN: list[controller.Spec] = [controller.load_plugin(entry) for entry in REGISTRY]


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
