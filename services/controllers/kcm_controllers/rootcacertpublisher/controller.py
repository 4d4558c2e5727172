"""The root CA certificate publisher: ConfigMap `kube-root-ca.crt` in every namespace.

Upstream pkg/controller/certificates/rootcacertpublisher/publisher.go, and its start-up in
cmd/kube-controller-manager/app/certificates.go, on our runtime (docs/runtime.md). The CA
bundle is the file `--root-ca-file` names (it must hold at least one PEM certificate, or the
controller does not start, with upstream's message), else the CA the controller's own
kubeconfig trusts (empty when it trusts none, as upstream's empty CAData).

The work keys are namespace names: a namespace added, or updated while Active, queues
itself; the `kube-root-ca.crt` ConfigMap updated or deleted queues its namespace. The sync
creates the ConfigMap when the cache has none (a namespace gone or terminating by then is
not an error), and otherwise rewrites it when `data` is not exactly `{ca.crt: <bundle>}` or
the `kubernetes.io/description` annotation is empty. The rewrite is a merge patch carrying
the cached resourceVersion, so it is the optimistic-concurrency update upstream makes while
the fields this controller does not own (labels, other annotations, binaryData) are kept.
Each sync counts in upstream's `root_ca_cert_publisher_sync_total` and
`root_ca_cert_publisher_sync_duration_seconds`, labelled with its outcome's HTTP code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import prometheus_client
from kcm_shared import runtime
from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import identityflags, podcontrol
from kcm_shared.runtime import cache

log = logging.getLogger("kcm.rootcacertpublisher")

NAMESPACES = gvr.Resource("", "v1", "namespaces")
CONFIGMAPS = gvr.Resource("", "v1", "configmaps")
CONFIGMAP_NAME = "kube-root-ca.crt"
CA_KEY = "ca.crt"
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
    "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
    "distributions of Kubernetes clusters."
)

SYNC_TOTAL = prometheus_client.Counter(
    "root_ca_cert_publisher_sync", "Number of namespace syncs happened in root ca cert publisher.", ["code"]
)
SYNC_DURATION = prometheus_client.Histogram(
    "root_ca_cert_publisher_sync_duration_seconds",
    "Number of namespace syncs happened in root ca cert publisher.",
    ["code"],
    buckets=[0.001 * 2**i for i in range(15)],
)


def record(start: float, code: str) -> None:
    """Upstream's recordMetrics: one sync, labelled 200, the API error's code, or 500."""
    SYNC_DURATION.labels(code).observe(time.monotonic() - start)
    SYNC_TOTAL.labels(code).inc()


class ConfigMapView(codec.Meta):
    data: dict[str, str] | None = None


def needs_update(cm: ConfigMapView, bundle: str) -> bool:
    """Upstream's test: data other than exactly {ca.crt: bundle}, or no description."""
    return (cm.data or {}) != {CA_KEY: bundle} or not cm.metadata.annotations.get(DESCRIPTION_ANNOTATION)


def repair_patch(cm: ConfigMapView, bundle: str) -> dict[str, object]:
    """A merge patch that makes `cm` right, failing with 409 if it changed since it was cached."""
    data: dict[str, str | None] = {key: None for key in cm.data or {} if key != CA_KEY}
    data[CA_KEY] = bundle
    return {
        "metadata": {
            "resourceVersion": cm.metadata.resource_version,
            "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION},
        },
        "data": data,
    }


class Publisher:
    """Handlers and sync; the API client, caches and bundle are injected."""

    def __init__(
        self,
        client: kubeclient.KubeClient,
        namespaces: cache.Cache[codec.NamespaceView],
        configmaps: cache.Cache[ConfigMapView],
        enqueue: Callable[[str], None],
        bundle: str,
    ) -> None:
        self.client = client
        self.namespaces = namespaces
        self.configmaps = configmaps
        self.enqueue = enqueue
        self.bundle = bundle

    def register(self) -> None:
        self.namespaces.add_handler(
            on_add=lambda ns: self.enqueue(ns.metadata.name), on_update=self._ns_updated
        )
        self.configmaps.add_handler(on_update=lambda _, cm: self._cm_changed(cm), on_delete=self._cm_changed)

    def _ns_updated(self, _: codec.NamespaceView, ns: codec.NamespaceView) -> None:
        if ns.status.phase == "Active":
            self.enqueue(ns.metadata.name)

    def _cm_changed(self, cm: ConfigMapView) -> None:
        if cm.metadata.name == CONFIGMAP_NAME:
            self.enqueue(cm.metadata.namespace)

    async def sync(self, namespace: str) -> runtime.Result | None:
        start = time.monotonic()
        try:
            await self.publish(namespace)
        except Exception as exc:
            record(start, str(exc.code) if isinstance(exc, kubeclient.ApiError) else "500")
            raise
        record(start, "200")
        return None

    async def publish(self, namespace: str) -> None:
        cm = self.configmaps.get(namespace, CONFIGMAP_NAME)
        if cm is None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": CONFIGMAP_NAME, "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION}},
                "data": {CA_KEY: self.bundle},
            }
            try:
                await self.client.create(kubeclient.resource_path("", "v1", "configmaps", namespace), body)
            except kubeclient.ApiError as exc:
                # A namespace gone or terminating will never take it: nothing to retry.
                if not (
                    exc.not_found or podcontrol.has_status_cause(exc, podcontrol.NAMESPACE_TERMINATING_CAUSE)
                ):
                    raise
            return
        if needs_update(cm, self.bundle):
            path = kubeclient.resource_path("", "v1", "configmaps", namespace, CONFIGMAP_NAME)
            await self.client.patch(path, repair_patch(cm, self.bundle))


def build(ctx: runtime.Context) -> runtime.Reconcile:
    bundle = identityflags.root_ca(ctx.args, ctx.client.conn)
    publisher = Publisher(ctx.client, ctx.caches[NAMESPACES], ctx.caches[CONFIGMAPS], ctx.enqueue, bundle)
    publisher.register()
    return publisher.sync


SPEC = runtime.Spec(
    name="root-ca-certificate-publisher-controller",
    alias="root-ca-cert-publisher",
    queue_name="root_ca_cert_publisher",
    primary=NAMESPACES,
    views={NAMESPACES: codec.NamespaceView, CONFIGMAPS: ConfigMapView},
    build=build,
    workers=1,  # upstream runs it with one worker and no flag
    flags=identityflags.add_root_ca_file,
    package=__package__,
)
