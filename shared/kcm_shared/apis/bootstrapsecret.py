"""Bootstrap token Secrets and tokens as upstream reads them (k8s.io/cluster-bootstrap token/api,
util/secrets and util/tokens): names, data, expiry, groups.

- `parse_name(name)`: the token id in `bootstrap-token-<id>` (6 of [a-z0-9]), else None.
- `parse_token(token)`: (id, secret) of a `<id>.<secret>` bearer token (6 and 16 of
  [a-z0-9]), else None.
- `data(secret, key)`: one data value of a Secret read from the API, decoded ("" if absent).
- `expiration(secret, now)`: (time left, expired) from the `expiration` value (RFC 3339; none
  is never expired; unparseable counts as expired, as upstream's GetExpiration).
- `groups(secret)`: `system:bootstrappers` plus the valid `auth-extra-groups`, sorted and
  without duplicates; ValueError with upstream's message for an invalid group name.

Used by the bootstrap signer and token cleaner (through `controllerutil.bootstraptoken`) and by
the embedded API server's bootstrap token authenticator.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from typing import Any

SECRET_TYPE = "bootstrap.kubernetes.io/token"
NAMESPACE = "kube-system"
NAME_PREFIX = "bootstrap-token-"
USER_PREFIX = "system:bootstrap:"
DEFAULT_GROUP = "system:bootstrappers"

TOKEN_ID_KEY = "token-id"
TOKEN_SECRET_KEY = "token-secret"
EXPIRATION_KEY = "expiration"
USAGE_SIGNING_KEY = "usage-bootstrap-signing"
USAGE_AUTHENTICATION_KEY = "usage-bootstrap-authentication"
EXTRA_GROUPS_KEY = "auth-extra-groups"

_NAME = re.compile(r"bootstrap-token-([a-z0-9]{6})")
_TOKEN = re.compile(r"([a-z0-9]{6})\.([a-z0-9]{16})")
GROUP_PATTERN = r"\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z"
_GROUP = re.compile(r"system:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]")


def parse_name(name: str) -> str | None:
    found = _NAME.fullmatch(name)
    return found.group(1) if found else None


def parse_token(token: str) -> tuple[str, str] | None:
    found = _TOKEN.fullmatch(token)
    return (found.group(1), found.group(2)) if found else None


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


def groups(secret: dict[str, Any]) -> list[str]:
    found = {DEFAULT_GROUP}
    extra = data(secret, EXTRA_GROUPS_KEY)
    if extra:
        for group in extra.split(","):
            if not _GROUP.fullmatch(group):
                raise ValueError(f"bootstrap group {group!r} is invalid (must match {GROUP_PATTERN})")
            found.add(group)
    return sorted(found)
