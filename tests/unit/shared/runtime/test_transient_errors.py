"""Which errors the runtime waits out (natsconn.is_transient, the Manager's restart rule) and
which stop a service."""

from __future__ import annotations

import nats.errors
import pytest
from kcm_shared.bus import natsconn
from kcm_shared.client import kubeclient
from kcm_shared.runtime import manager
from nats.js import errors as js_errors


@pytest.mark.parametrize(
    "exc",
    [
        nats.errors.NoRespondersError(),
        nats.errors.TimeoutError(),
        nats.errors.ConnectionReconnectingError(),
        nats.errors.StaleConnectionError(),
        js_errors.NoStreamResponseError(),
        js_errors.ServiceUnavailableError(code=503, description="JetStream not ready"),
        js_errors.APIError(code=503, description="no responders"),
        TimeoutError(),
        ConnectionRefusedError(),
    ],
)
def test_nats_trouble_is_transient(exc: Exception) -> None:
    assert natsconn.is_transient(exc)
    assert manager._transient(exc)


@pytest.mark.parametrize(
    "exc",
    [
        js_errors.BadRequestError(code=400, err_code=10058, description="stream name in use"),
        js_errors.NotFoundError(code=404, description="stream not found"),
        nats.errors.AuthorizationError(),
        nats.errors.ConnectionClosedError(),
        ValueError("a bug"),
    ],
)
def test_other_errors_are_not(exc: Exception) -> None:
    assert not natsconn.is_transient(exc)
    assert not manager._transient(exc)


@pytest.mark.parametrize(
    ("code", "transient"), [(500, True), (503, True), (429, True), (403, False), (409, False)]
)
def test_api_server_errors_are_transient_when_5xx_or_429(code: int, transient: bool) -> None:
    assert manager._transient(kubeclient.ApiError(code, "Reason", "message")) is transient


def test_a_refusal_of_the_credentials_is_recognised() -> None:
    assert natsconn._refused(nats.errors.AuthorizationError())
    assert natsconn._refused(nats.errors.Error("nats: 'Authorization Violation'"))
    assert not natsconn._refused(nats.errors.NoServersError())
