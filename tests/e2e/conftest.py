"""`pytest --apiserver=upstream`: the end-to-end tests that start `kcm dev` (tests/e2e/devstack.py),
run on etcd and kube-apiserver instead of the embedded API server (make test's second tier).

- The option is registered in tests/conftest.py; here it sets `devstack.APISERVER`, so every
  stack that does not name its API server starts with `--apiserver=upstream`.
- On kube-apiserver, only the tests of modules that start their stacks through devstack are
  collected, less those that start the embedded API server themselves (`EMBEDDED_FIXTURES`); a
  module or test listed in `NOT_ON_UPSTREAM` is skipped with its reason. This is the one list
  of what does not run on kube-apiserver, and why (docs/apiserver.md points here).
"""

from __future__ import annotations

import pytest

from tests.e2e import devstack

TIME_BUDGET = "time budget: make test's second tier runs one module per controller"
BUS = f"{TIME_BUDGET}; it tests the bus and coordinator, whose behaviour does not depend on the API server"

# tests/conftest.py's fixtures that start the embedded API server without `kcm dev`.
EMBEDDED_FIXTURES = {"apiserver", "fresh_apiserver"}

# "module" or "module::test" -> why it does not run on kube-apiserver.
NOT_ON_UPSTREAM: dict[str, str] = {
    "test_upstream_apiserver.py": "names its API server itself (kube-apiserver): it runs in the first tier",
    "test_reference.py": "names its API servers itself (both): it runs in the first tier",
    "test_takeover.py": "names its API server itself (kube-apiserver): it runs in the first tier",
    "test_auth.py": "starts the embedded server in RBAC mode itself; kube-apiserver's answers to the same "
    "reviews and its 403 bodies are compared in test_apiserver_parity.py",
    "test_hpa.py": "the autoscaler reads metrics.k8s.io, which the embedded server serves from the "
    "simulator's figures and kube-apiserver here has no metrics-server for (docs/apiserver.md); on "
    "kube-apiserver every metric fails, as tools/differential's horizontalpodautoscaling scenario shows",
    "test_upstream_command_line.py": f"{TIME_BUDGET}; it checks how kcm parses upstream's flags, which "
    "does not depend on the API server",
    "test_bus_hostile.py::test_the_state_directory_is_readable_by_its_owner_only": "asserts the embedded server's SQLite file",
    "test_bus_hostile.py": BUS,
    "test_bus_least_privilege.py": BUS,
    "test_coordinator_failover.py": BUS,
    "test_fencing.py": f"{BUS}; its audit log is the embedded server's format",
    "test_health.py": BUS,
    "test_hostile_names.py": f"{TIME_BUDGET}; the garbage collector's names, no API server behaviour",
    "test_job_policies.py": f"{TIME_BUDGET}; the job controller runs in test_job.py",
    "test_cronjob.py": f"{TIME_BUDGET}; test_job.py runs a CronJob's Jobs to completion",
    "test_resourcequota.py": f"{TIME_BUDGET}; test_replicaset.py's pods are refused and admitted by a quota",
    "test_task_pages.py": f"{TIME_BUDGET}; the pages' API server parts run there in other modules: quota "
    "admission in test_replicaset.py, eviction refused by a budget in test_disruption.py, cascading deletion "
    "in test_replicationcontroller.py, and the HPA walkthrough needs the metrics.k8s.io kube-apiserver has not",
    "test_garbagecollector.py": f"{TIME_BUDGET}; the collector cascades in test_replicationcontroller.py, "
    "test_statefulset.py and test_ttlafterfinished.py",
    "test_serviceaccount_tokens.py::test_identity_files_survive_a_restart": f"{TIME_BUDGET}; it restarts "
    "the whole stack to check kcm dev's files, not a controller",
    "test_kubelet.py": f"{TIME_BUDGET}; the simulated kubelet's states and Events, whatever the API "
    "server; LimitRanger's answers are compared with kube-apiserver's in test_apiserver_parity.py, and "
    "the ServiceAccount admission tests state kube-apiserver's answers (checked there when written)",
    "test_gc_graph.py": f"{TIME_BUDGET}; the debug handler's TokenReview and SubjectAccessReview run on "
    "kube-apiserver in test_secure_port.py; the graph is the collector's own",
    "test_nats_auth.py": BUS,
    "test_replicaset_failover.py": BUS,
    "test_retry_forever.py": BUS,
}


def pytest_configure(config: pytest.Config) -> None:
    devstack.APISERVER = config.getoption("apiserver")


def _reason(item: pytest.Item) -> str | None:
    module = item.path.name
    test = getattr(item, "originalname", item.name)  # a parametrized test by its function name
    return NOT_ON_UPSTREAM.get(f"{module}::{test}") or NOT_ON_UPSTREAM.get(module)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("apiserver") != "upstream":
        return
    kept, dropped = [], []
    for item in items:
        module = getattr(item, "module", None)
        uses_devstack = getattr(module, "devstack", None) is devstack
        embedded = EMBEDDED_FIXTURES & set(getattr(item, "fixturenames", ()))
        (kept if uses_devstack and not embedded else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
    for item in kept:
        reason = _reason(item)
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"not on kube-apiserver: {reason}"))
