"""The embedded server's ServiceAccount admission on pod creates (kcm_apiserver.saadmission)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kcm_apiserver import errors, saadmission
from kcm_apiserver.registry import Registry, ResourceType
from kcm_apiserver.store import Store

Obj = dict[str, Any]
PATH = saadmission.TOKEN_MOUNT_PATH


def rt(resource: str) -> ResourceType:
    found = Registry().lookup("", "v1", resource)
    assert found is not None
    return found


def pod(**spec: Any) -> Obj:
    base: Obj = {
        "containers": [{"name": "c", "image": "nginx"}],
        "initContainers": [{"name": "i", "image": "x"}],
    }
    return {"metadata": {"name": "p", "namespace": "ns"}, "spec": {**base, **spec}}


def store_with(**account: Any) -> Store:
    store = Store()
    store.put(saadmission.SERVICE_ACCOUNTS_KEY, {"metadata": {"name": "robot", "namespace": "ns"}, **account})
    return store


def admit(obj: Obj, store: Store | None = None) -> Obj:
    saadmission.admit_create(store or Store(), rt("pods"), obj)
    spec: Obj = obj["spec"]
    return spec


def test_a_pod_gets_the_default_account_and_the_token_volume_in_every_container() -> None:
    spec = admit(pod())
    assert spec["serviceAccountName"] == spec["serviceAccount"] == "default"
    [volume] = spec["volumes"]
    assert (
        volume["name"].startswith("kube-api-access-") and len(volume["name"]) == len("kube-api-access-") + 5
    )
    assert volume["projected"] == saadmission.token_volume_source()
    mount = {"name": volume["name"], "readOnly": True, "mountPath": PATH}
    assert spec["containers"][0]["volumeMounts"] == [mount] == spec["initContainers"][0]["volumeMounts"]


def test_existing_mounts_and_volumes_are_kept() -> None:
    own = {"name": "mine", "mountPath": PATH}
    spec = admit(pod(containers=[{"name": "c", "image": "x", "volumeMounts": [own]}], initContainers=[]))
    assert "volumes" not in spec  # no container needed it
    spec = admit(pod(volumes=[{"name": "kube-api-access-abcde", "projected": {"sources": []}}]))
    assert [v["name"] for v in spec["volumes"]] == ["kube-api-access-abcde"]
    assert spec["containers"][0]["volumeMounts"][0]["name"] == "kube-api-access-abcde"


def test_automount_the_pod_wins_then_its_account() -> None:
    assert "volumes" not in admit(pod(automountServiceAccountToken=False))
    store = store_with(automountServiceAccountToken=False, imagePullSecrets=[{"name": "regcred"}])
    spec = admit(pod(serviceAccountName="robot"), store)
    assert "volumes" not in spec and spec["imagePullSecrets"] == [{"name": "regcred"}]
    spec = admit(
        pod(serviceAccountName="robot", automountServiceAccountToken=True, imagePullSecrets=[{"name": "x"}]),
        store,
    )
    assert len(spec["volumes"]) == 1 and spec["imagePullSecrets"] == [{"name": "x"}]


def test_mirror_pods_and_other_kinds_are_left_alone() -> None:
    mirror = pod()
    mirror["metadata"]["annotations"] = {saadmission.MIRROR_ANNOTATION: "x"}
    before = copy.deepcopy(mirror)
    admit(mirror)
    assert mirror == before
    secret: Obj = {"metadata": {"name": "s", "namespace": "ns"}}
    saadmission.admit_create(Store(), rt("secrets"), secret)
    assert secret == {"metadata": {"name": "s", "namespace": "ns"}}


def test_a_missing_account_is_refused_as_kube_apiserver_refuses_it() -> None:
    with pytest.raises(errors.ApiError) as refused:
        admit(pod(serviceAccountName="ghost"), store_with())
    assert refused.value.code == 403
    assert refused.value.status()["message"] == (
        'pods "p" is forbidden: error looking up service account ns/ghost: serviceaccount "ghost" not found'
    )
    assert refused.value.status()["details"] == {"name": "p", "kind": "pods"}
    # A name the server makes up is not known yet: the message shows the generateName.
    generated = pod(serviceAccountName="ghost")
    generated["metadata"]["generateName"] = "web-"
    with pytest.raises(errors.ApiError) as refused:
        saadmission.admit_create(Store(), rt("pods"), generated, "web-")
    assert refused.value.status()["message"].startswith('pods "web-" is forbidden: ')
    # The namespace's `default` account is admitted while the serviceaccount controller makes it.
    assert admit(pod(), Store())["serviceAccountName"] == "default"
    assert admit(pod(serviceAccountName="robot"), store_with())["serviceAccountName"] == "robot"
