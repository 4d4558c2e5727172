"""The runtime every kcm service shares, in layers; each may import only the layers below it
(`make lint` checks it with import-linter's `layers` contract in pyproject.toml):

    testing          the kit tests are written with: fake API client, caches filled by hand, ...
    controllerutil   upstream controller_utils and per-family helpers (pod control, refs, ...)
    runtime          Spec, Context, Manager, Cache, Events: a controller author's face
    workqueue        the in-process queue, rate limiters and the durable NATS queue
    bus              NATS, subjects, membership, fencing, leader election, health, ops endpoint
    reconcile        what a reconcile returns or raises (Result, TerminalError, NotOwner) and
                     what each leads to: the outcome table
    client           HTTP/1.1, rate limits, KubeClient, discovery, scale
    apis             upstream API semantics: cron, quota, node affinity, service account tokens
    apimachinery     codec and views, selectors, quantities, resourceVersions, GVR
    base             errors, logs, tracing, cancellation

A controller author learns `runtime` and `controllerutil` (plus the apimachinery
types they name), tests with `testing`, and never imports `bus` or `workqueue`.
docs/runtime.md walks one change through them. The modules' old flat paths
(`kcm_shared.controller`, `kcm_shared.cache`, ...) still import, with a DeprecationWarning, for
plugins written against them (`kcm_shared._moved`).
"""

from kcm_shared import _moved

_moved.install()
