"""The ServiceAccount admission plugin of the embedded API server, as kube-apiserver v1.32 runs it
by default (plugin/pkg/admission/serviceaccount), on creates of pods:

- a pod without `serviceAccountName` gets `default` (and the deprecated `serviceAccount` field
  its value, as the v1 conversion shows it);
- unless `automountServiceAccountToken: false` is on the pod or, when the pod says nothing, on
  its ServiceAccount, every init container and container without a mount at
  /var/run/secrets/kubernetes.io/serviceaccount mounts the projected `kube-api-access-<5>`
  volume (a bound token, the `kube-root-ca.crt` ConfigMap's `ca.crt`, the namespace), which is
  added unless the pod already has a volume of that prefix;
- a pod without `imagePullSecrets` gets its ServiceAccount's.

- a pod whose ServiceAccount does not exist is refused with kube-apiserver's 403 (`pods "NAME"
  is forbidden: error looking up service account NS/SA: serviceaccount "SA" not found`, NAME the
  generateName when the server makes up the name), except a missing `default`, which is
  admitted (kube-apiserver retries it for a second or two, then refuses; docs/apiserver.md says
  why not here).

Mirror pods (annotated `kubernetes.io/config.mirror`) are left alone. Called by `operations` on
creates, after defaulting; reads ServiceAccounts from the store.
"""

from __future__ import annotations

import secrets
from typing import Any

from kcm_apiserver import errors
from kcm_apiserver.registry import ResourceType
from kcm_apiserver.store import Obj, Store

DEFAULT_SERVICE_ACCOUNT = "default"
TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
VOLUME_PREFIX = "kube-api-access-"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SERVICE_ACCOUNTS_KEY = "/serviceaccounts"
# A token a little over an hour, so that a kubelet refreshes it before the hour most clients
# assume (upstream's WarnOnlyBoundTokenExpirationSeconds).
TOKEN_EXPIRATION_SECONDS = 3607
# Upstream's utilrand alphabet: no vowels, no look-alike digits.
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def admit_create(store: Store, rt: ResourceType, obj: Obj, shown_as: str = "") -> None:
    """`shown_as` is the pod's name as the client asked for it (its generateName when the server
    makes the name up), for the refusal's message."""
    if (rt.group, rt.resource) != ("", "pods"):
        return
    meta = obj.get("metadata") or {}
    if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
        return
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return  # validation refuses it
    name = spec.get("serviceAccountName") or DEFAULT_SERVICE_ACCOUNT
    spec["serviceAccountName"] = name
    spec.setdefault("serviceAccount", name)
    namespace = str(meta.get("namespace") or "")
    account = store.get(SERVICE_ACCOUNTS_KEY, namespace, str(name))
    if account is None:
        if name != DEFAULT_SERVICE_ACCOUNT:
            why = f'error looking up service account {namespace}/{name}: serviceaccount "{name}" not found'
            raise errors.forbidden("", "pods", shown_as or str(meta.get("name") or ""), why)
        account = {}
    if _automounts(spec, account):
        mount_token(spec)
    if not spec.get("imagePullSecrets") and account.get("imagePullSecrets"):
        spec["imagePullSecrets"] = [dict(s) for s in account["imagePullSecrets"] if isinstance(s, dict)]


def _automounts(spec: Obj, account: Obj) -> bool:
    """The pod's wish wins, then its ServiceAccount's; mounting is the default."""
    for owner in (spec, account):
        wish = owner.get("automountServiceAccountToken")
        if isinstance(wish, bool):
            return wish
    return True


def mount_token(spec: Obj) -> None:
    volumes = [v for v in spec.get("volumes") or [] if isinstance(v, dict)]
    existing = next(
        (str(v.get("name")) for v in volumes if str(v.get("name", "")).startswith(VOLUME_PREFIX)), ""
    )
    volume_name = existing or VOLUME_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(5))
    mount = {"name": volume_name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}
    needed = False
    for field in ("initContainers", "containers"):
        for container in spec.get(field) or []:
            if not isinstance(container, dict):
                continue
            mounts: list[Any] = container.setdefault("volumeMounts", [])
            if not isinstance(mounts, list):
                continue
            if any(isinstance(m, dict) and m.get("mountPath") == TOKEN_MOUNT_PATH for m in mounts):
                continue  # a mount of the container's own at that path wins
            mounts.append(dict(mount))
            needed = True
    if needed and not existing:
        spec.setdefault("volumes", []).append({"name": volume_name, "projected": token_volume_source()})


def token_volume_source() -> Obj:
    return {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {
                "downwardAPI": {
                    "items": [
                        {
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            "path": "namespace",
                        }
                    ]
                }
            },
        ],
    }
