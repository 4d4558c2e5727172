"""Creating and deleting a workload's pods, with upstream's Events, and slow-start batches.

Upstream's PodControlInterface and RealPodControl (pkg/controller/controller_utils.go):
`create_pods` builds a pod from the owner's template - the template's labels, annotations
and finalizers, its spec copied byte for byte (`PodTemplate.spec` is `msgspec.Raw`), the
owner as controlling ownerReference and `generateName: <owner name>-` - and records
`SuccessfulCreate` "Created pod: X" or `FailedCreate` "Error creating: ..." on the owner;
`delete_pod` records `SuccessfulDelete` / `FailedDelete` the same way. Tests use the testing
kit's recording fake (`kcm_shared.testing.recorders.RecordingPodControl`).

`slow_start_batch` is upstream's slowStartBatch: run a call in batches of 1, 2, 4, ... and
stop at the first batch with an error, so a template the API server rejects costs one
request instead of `BURST_REPLICAS`. Used by the ReplicaSet controller (and any other
controller that creates pods from a template).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import msgspec

from kcm_shared.apimachinery import codec, selectors
from kcm_shared.client import kubeclient
from kcm_shared.controllerutil import expectations
from kcm_shared.runtime import events

log = logging.getLogger("kcm.podcontrol")

BURST_REPLICAS = 500  # most pods one sync creates or deletes (upstream BurstReplicas)
SLOW_START_INITIAL_BATCH_SIZE = 1

SUCCESSFUL_CREATE = "SuccessfulCreate"
FAILED_CREATE = "FailedCreate"
SUCCESSFUL_DELETE = "SuccessfulDelete"
FAILED_DELETE = "FailedDelete"
NAMESPACE_TERMINATING_CAUSE = "NamespaceTerminating"

PODS_PATH = ("", "v1", "pods")


class TemplateMeta(codec.View):
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    finalizers: list[str] = msgspec.field(default_factory=list)


def _empty_spec() -> msgspec.Raw:
    return msgspec.Raw(b"{}")


class PodTemplate(codec.View):
    """A PodTemplateSpec as a cached view holds it: the spec stays undecoded JSON."""

    metadata: TemplateMeta = msgspec.field(default_factory=TemplateMeta)
    spec: msgspec.Raw = msgspec.field(default_factory=_empty_spec)


def pod_name_prefix(owner_name: str) -> str:
    """`<owner>-` when that is a valid generateName, else the bare name (getPodsPrefix)."""
    prefix = f"{owner_name}-"
    # A generateName is checked with its trailing dash masked, as the API server does.
    if selectors.is_dns1123_subdomain(prefix[:-1] + "a"):
        return owner_name
    return prefix


def pod_from_template(
    template: PodTemplate, owner_name: str, ref: codec.OwnerReference, generate_name: str | None = None
) -> dict[str, Any]:
    """The pod to POST for one replica (upstream GetPodFromTemplate); `generate_name`
    replaces the default `<owner>-` (upstream CreatePodsWithGenerateName)."""
    meta: dict[str, Any] = {
        "generateName": generate_name or pod_name_prefix(owner_name),
        "ownerReferences": [msgspec.to_builtins(ref)],
    }
    if template.metadata.labels:
        meta["labels"] = dict(template.metadata.labels)
    if template.metadata.annotations:
        meta["annotations"] = dict(template.metadata.annotations)
    if template.metadata.finalizers:
        meta["finalizers"] = list(template.metadata.finalizers)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template.spec}


def error_message(exc: BaseException) -> str:
    """What Go's err.Error() shows: the API server's message for an API error."""
    if isinstance(exc, kubeclient.ApiError) and exc.message:
        return exc.message
    return str(exc) or type(exc).__name__  # a bare TimeoutError says nothing by itself


def has_status_cause(exc: BaseException, cause: str) -> bool:
    """Whether an API error's Status carries `cause` (upstream apierrors.HasStatusCause)."""
    if not isinstance(exc, kubeclient.ApiError):
        return False
    causes = (exc.status.get("details") or {}).get("causes") or []
    # metav1.StatusCause serialises its Type as "reason".
    return any(isinstance(c, dict) and c.get("reason") == cause for c in causes)


class DeletePodError(Exception):
    """A pod delete that failed other than with 404 (the API error is its `__cause__`)."""


class PodControl(Protocol):
    """What a workload controller does to pods; `RealPodControl`, or the testing kit's fake."""

    async def create_pods(
        self,
        namespace: str,
        template: PodTemplate,
        owner: codec.Meta,
        ref: codec.OwnerReference,
        *,
        generate_name: str | None = None,
    ) -> None:
        """Create one pod from `template` controlled by `ref`; raises on failure."""

    async def delete_pod(self, namespace: str, name: str, owner: codec.Meta) -> None:
        """Delete one pod; raises on failure (404 included: the caller decides)."""


class RealPodControl:
    def __init__(self, client: kubeclient.KubeClient, recorder: events.EventRecorder) -> None:
        self._client = client
        self._recorder = recorder

    async def create_pods(
        self,
        namespace: str,
        template: PodTemplate,
        owner: codec.Meta,
        ref: codec.OwnerReference,
        *,
        generate_name: str | None = None,
    ) -> None:
        if not template.metadata.labels:
            raise ValueError("unable to create pods, no labels")
        pod = pod_from_template(template, owner.metadata.name, ref, generate_name)
        try:
            created = await self._client.create(kubeclient.resource_path(*PODS_PATH, namespace), pod)
        except Exception as exc:  # a timeout or a reset connection is a failed create too
            # A namespace being deleted refuses every create: upstream stays quiet about it.
            if not has_status_cause(exc, NAMESPACE_TERMINATING_CAUSE):
                self._recorder.event(
                    owner, events.WARNING, FAILED_CREATE, f"Error creating: {error_message(exc)}"
                )
            raise
        name = (created.get("metadata") or {}).get("name", "")
        log.debug("created pod", extra={"owner": codec.key_of(owner), "pod": name})
        self._recorder.event(owner, events.NORMAL, SUCCESSFUL_CREATE, f"Created pod: {name}")

    async def delete_pod(self, namespace: str, name: str, owner: codec.Meta) -> None:
        log.info("deleting pod", extra={"owner": codec.key_of(owner), "pod": f"{namespace}/{name}"})
        try:
            await self._client.delete(kubeclient.resource_path(*PODS_PATH, namespace, name))
        except Exception as exc:
            if isinstance(exc, kubeclient.ApiError) and exc.not_found:
                raise
            self._recorder.event(
                owner, events.WARNING, FAILED_DELETE, f"Error deleting: {error_message(exc)}"
            )
            # Upstream's wording, which reaches the ReplicaFailure condition's message.
            raise DeletePodError(f"unable to delete pods: {error_message(exc)}") from exc
        self._recorder.event(owner, events.NORMAL, SUCCESSFUL_DELETE, f"Deleted pod: {name}")


async def slow_start_batch(
    count: int,
    initial_batch_size: int,
    fn: Callable[[], Awaitable[None]],
    max_batch: int | None = None,
) -> tuple[int, Exception | None]:
    """Call `fn` `count` times in concurrent batches of initial, 2x, 4x, ... size (at most
    `max_batch` at once when given: the StatefulSet controller's MaxBatchSize).

    Stops after the first batch in which a call failed; returns how many calls succeeded and
    the first error (None when all succeeded).
    """
    remaining = count
    successes = 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        errors: list[Exception] = []
        for result in results:
            if isinstance(result, Exception):
                errors.append(result)
            elif isinstance(result, BaseException):
                raise result  # cancellation is not a failed call
        successes += batch - len(errors)
        if errors:
            return successes, errors[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
        if max_batch is not None:
            batch = min(batch, max_batch)
    return successes, None


async def create_in_batches(
    count: int,
    create: Callable[[], Awaitable[None]],
    expected: expectations.ControllerExpectations,
    key: str,
) -> tuple[int, Exception | None]:
    """Create `count` pods of controller `key` by calling `create` in slow-start batches, as
    the manage step of upstream's ReplicaSet and Job controllers (and DaemonSet's syncNodes) does.

    The creations are expected before they are made (their add events may beat the replies);
    a create refused because the namespace is terminating counts as done, quietly; each pod
    never created is marked observed so the next sync does not wait for it. Returns how many
    were created and the first error.
    """
    expected.expect_creations(key, count)

    async def one() -> None:
        try:
            await create()
        except kubeclient.ApiError as exc:
            if not has_status_cause(exc, NAMESPACE_TERMINATING_CAUSE):
                raise

    created, error = await slow_start_batch(count, SLOW_START_INITIAL_BATCH_SIZE, one)
    for _ in range(count - created):
        expected.creation_observed(key)
    return created, error
