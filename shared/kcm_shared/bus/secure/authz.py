"""Delegated authorization of the secure port's requests (upstream's
DelegatingAuthorizationOptions), every one a non-resource request:

1. a user in an always-allowed group (`system:masters`, as upstream's default) is allowed;
2. a path of `--authorization-always-allow-paths` is allowed (a trailing `*` matches a prefix,
   the leading `/` is optional; upstream refuses a `*` elsewhere);
3. else the API server decides (SubjectAccessReview through `--authorization-kubeconfig`, the
   verb the HTTP method in lower case), its answer cached for
   `--authorization-webhook-cache-authorized-ttl` / `-unauthorized-ttl`;
4. with no client to ask, everything else is forbidden.
`Decision.error` is set when the review itself failed (the server answers 500, as upstream).
Called by `kcm_shared.bus.secure.server`.
"""

from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kcm_shared.base import errors
from kcm_shared.bus.secure.authn import User
from kcm_shared.client import kubeclient

log = logging.getLogger("kcm.secure")

ALWAYS_ALLOW_GROUPS = ("system:masters",)
CACHE_SIZE = 4096  # reviews remembered; bounded as the token cache is


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    error: str = ""


class Paths:
    """Upstream's path authorizer: exact paths and `prefix*` patterns."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self._exact: set[str] = set()
        self._prefixes: list[str] = []
        for pattern in patterns:
            p = pattern.strip().removeprefix("/")
            if "*" in p:
                if not p.endswith("*") or "*" in p[:-1]:
                    raise errors.ConfigError(f"only trailing * allowed in {pattern!r}")
                self._prefixes.append(p[:-1])
            elif p or pattern:
                self._exact.add(p)

    def allows(self, path: str) -> bool:
        p = path.removeprefix("/")
        return p in self._exact or any(p.startswith(prefix) for prefix in self._prefixes)


class Authorizer:
    def __init__(
        self,
        paths: Paths,
        client: kubeclient.KubeClient | None,
        allow_ttl: float,
        deny_ttl: float,
        groups: Iterable[str] = ALWAYS_ALLOW_GROUPS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._paths = paths
        self._client = client
        self._ttls = (allow_ttl, deny_ttl)
        self._groups = frozenset(groups)
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, Decision]] = OrderedDict()

    async def authorize(self, user: User, verb: str, path: str) -> Decision:
        if self._groups & set(user.groups):
            return Decision(True)
        if self._paths.allows(path):
            return Decision(True)
        if self._client is None:
            return Decision(False)
        spec = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        key = json.dumps(spec, sort_keys=True)
        hit = self._cache.get(key)
        if hit is not None and hit[0] > self._clock():
            return hit[1]
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        try:
            answer = await self._client.request(
                "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body=body
            )
        except kubeclient.REQUEST_ERRORS as exc:
            log.warning("SubjectAccessReview failed", extra={"error": repr(exc)})
            return Decision(False, error=f"SubjectAccessReview failed: {exc}")
        status = answer.get("status") or {}
        decision = Decision(
            bool(status.get("allowed")) and not status.get("denied"), str(status.get("reason", ""))
        )
        self._cache[key] = (self._clock() + self._ttls[0 if decision.allowed else 1], decision)
        self._cache.move_to_end(key)
        while len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return decision
