"""API errors as metav1.Status, with upstream's reasons and codes.

Every handler raises `ApiError`; the HTTP layer turns it into a Status JSON body, so a
client (kubectl, client-go, the Python client) reads the same error it would from
kube-apiserver, byte for byte: `status()` keeps Go's field order (details before code), and
`details` is there exactly when upstream's constructor fills it (`{}` for a resource this
server does not have, none for a BadRequest).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class ApiError(Exception):
    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        *,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
        }
        if self.details is not None:
            body["details"] = self.details
        body["code"] = self.code
        return body


def _qualified(group: str, resource: str) -> str:
    return f"{resource}.{group}" if group else resource


def _details(group: str, resource: str, name: str, **more: Any) -> dict[str, Any]:
    # metav1.StatusDetails' field order: name, group, kind, then the rest.
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    return {**details, "kind": resource, **more}


def not_found(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        404,
        "NotFound",
        f'{_qualified(group, resource)} "{name}" not found',
        details=_details(group, resource, name),
    )


def no_such_resource() -> ApiError:
    """A group-version this server serves, but no such resource or subresource in it."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", details={})


def already_exists(group: str, resource: str, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{_qualified(group, resource)} "{name}" already exists',
        details=_details(group, resource, name),
    )


def conflict(group: str, resource: str, name: str, why: str) -> ApiError:
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(group, resource)} "{name}": {why}',
        details=_details(group, resource, name),
    )


def invalid(group: str, kind: str, name: str, causes: Sequence[Mapping[str, Any]]) -> ApiError:
    # Go's aggregate prints each distinct error once, and `[a, b]` for more than one; the
    # causes keep every error.
    lines = list(
        dict.fromkeys(f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes)
    )
    summary = ", ".join(lines)
    if len(lines) > 1:
        summary = f"[{summary}]"
    qualified_kind = f"{kind}.{group}" if group else kind
    return ApiError(
        422,
        "Invalid",
        f'{qualified_kind} "{name}" is invalid: {summary}',
        details={**_details(group, kind, name), "causes": [dict(c) for c in causes]},
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def method_not_allowed(message: str) -> ApiError:
    # Upstream's NewMethodNotSupported always has details, empty when its resource is.
    return ApiError(405, "MethodNotAllowed", message, details={})


def forbidden(
    group: str, resource: str, name: str, why: str, causes: Sequence[Mapping[str, Any]] = ()
) -> ApiError:
    details = _details(group, resource, name)
    if causes:
        details["causes"] = [dict(c) for c in causes]
    return ApiError(
        403, "Forbidden", f'{_qualified(group, resource)} "{name}" is forbidden: {why}', details=details
    )


def gone(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_many_requests(message: str, retry_after: int = 1) -> ApiError:
    return ApiError(429, "TooManyRequests", message, retry_after=retry_after)


_ACCEPTED_BODIES = (
    "application/json, application/yaml, application/apply-patch+yaml, application/json-patch+json, "
    "application/merge-patch+json, application/strategic-merge-patch+json, application/vnd.kubernetes.protobuf"
)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        f'{_ACCEPTED_BODIES}; got "{content_type}"',
    )


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")
