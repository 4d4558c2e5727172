"""`ConfigError`: what a service raises when its configuration stops it from starting.

Everything else a service meets at start-up (NATS or the API server not up yet, JetStream
answering 503, timeouts) is retried; a configuration error is not, since retrying cannot
cure it. The launcher (kcm_cli.main) prints it as one line, `kcm: <what>`, and exits non-zero.
Raised by `flags.kube_client` (an unreadable kubeconfig), `natsconn.connect` (credentials
the NATS server refuses) and `tracing.setup` (an OTEL_* setting this build cannot honour).
"""

from __future__ import annotations


class ConfigError(Exception):
    """A configuration the service cannot start with; the message says what to fix."""
