"""Bootstrap token Secrets as upstream reads them (k8s.io/cluster-bootstrap token/api and
secret utilities): their names, data and expiry.

- `is_token_secret(view)`: a cached Secret of type `bootstrap.kubernetes.io/token` in
  kube-system (the bus carries its metadata and type only, never its data: docs/bus.md).
- `data(secret, key)`: one data value of a Secret read from the API, decoded ("" if absent).
- `parse_name(name)`: the token id in `bootstrap-token-<id>` (6 of [a-z0-9]), else None.
- `expiration(secret, now)`: (time left, expired) from the `expiration` value (RFC 3339; none
  is never expired; unparseable counts as expired, as upstream's GetExpiration).
- `token_secrets(client)`: every bootstrap token Secret of kube-system, with its data, from the
  API (a field selector on the type).

Used by the bootstrap signer and the token cleaner.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from typing import Any

from kcm_shared.apimachinery import codec, gvr
from kcm_shared.client import kubeclient

SECRETS = gvr.Resource("", "v1", "secrets")
SECRET_TYPE = "bootstrap.kubernetes.io/token"
NAMESPACE = "kube-system"

TOKEN_ID_KEY = "token-id"
TOKEN_SECRET_KEY = "token-secret"
EXPIRATION_KEY = "expiration"
USAGE_SIGNING_KEY = "usage-bootstrap-signing"

_NAME = re.compile(r"bootstrap-token-([a-z0-9]{6})")


class SecretView(codec.Meta):
    type: str = ""


def is_token_secret(view: SecretView) -> bool:
    return view.type == SECRET_TYPE and view.metadata.namespace == NAMESPACE


def parse_name(name: str) -> str | None:
    found = _NAME.fullmatch(name)
    return found.group(1) if found else None


def data(secret: dict[str, Any], key: str) -> str:
    raw = (secret.get("data") or {}).get(key)
    if not isinstance(raw, str):
        return ""
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return ""


def _rfc3339(text: str) -> dt.datetime | None:
    """Go's time.RFC3339 layout: a date, T, a time, optional fraction, then Z or an offset."""
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})", text):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def expiration(secret: dict[str, Any], now: dt.datetime) -> tuple[dt.timedelta, bool]:
    text = data(secret, EXPIRATION_KEY)
    if not text:
        return dt.timedelta(0), False
    when = _rfc3339(text)
    if when is None:
        return dt.timedelta(0), True
    left = when - now
    if left <= dt.timedelta(0):
        return dt.timedelta(0), True
    return left, False


async def token_secrets(client: kubeclient.KubeClient) -> list[dict[str, Any]]:
    path = kubeclient.resource_path("", "v1", "secrets", NAMESPACE)
    listed = await client.get(path, {"fieldSelector": f"type={SECRET_TYPE}"})
    return [item for item in listed.get("items") or [] if isinstance(item, dict)]
