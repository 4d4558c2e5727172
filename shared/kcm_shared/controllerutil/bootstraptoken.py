"""Bootstrap token Secrets in a controller: the cached view and the API read (their data's
format is `kcm_shared.apis.bootstrapsecret`).

- `is_token_secret(view)`: a cached Secret of type `bootstrap.kubernetes.io/token` in
  kube-system (the bus carries its metadata and type only, never its data: docs/bus.md).
- `token_secrets(client)`: every bootstrap token Secret of kube-system, with its data, from the
  API (a field selector on the type).

Used by the bootstrap signer and the token cleaner.
"""

from __future__ import annotations

from typing import Any

from kcm_shared.apimachinery import codec, gvr
from kcm_shared.apis import bootstrapsecret
from kcm_shared.client import kubeclient

SECRETS = gvr.Resource("", "v1", "secrets")


class SecretView(codec.Meta):
    type: str = ""


def is_token_secret(view: SecretView) -> bool:
    return view.type == bootstrapsecret.SECRET_TYPE and view.metadata.namespace == bootstrapsecret.NAMESPACE


async def token_secrets(client: kubeclient.KubeClient) -> list[dict[str, Any]]:
    path = kubeclient.resource_path("", "v1", "secrets", bootstrapsecret.NAMESPACE)
    listed = await client.get(path, {"fieldSelector": f"type={bootstrapsecret.SECRET_TYPE}"})
    return [item for item in listed.get("items") or [] if isinstance(item, dict)]
