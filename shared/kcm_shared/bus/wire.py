"""Every name on the bus: message headers, event types, stream names and subject prefixes.

The contract between the watcher, the controller runtime, the coordinator and third-party
subscribers; docs/bus.md's tables list the same names (`tests/unit/shared/bus/test_wire_docs.py`
holds the two together), so a rename here fails a test until the docs follow:

- Object messages (`OBJECT_PREFIX`, kept in `OBJECTS_STREAM`): the watcher publishes them
  with `EVENT`, `RESOURCE_VERSION` and `MSG_ID`, plus `TOO_LARGE`, `MSG_TTL` and
  `TRACEPARENT` as needed and its fence `EXPECTED_LAST_SUBJECT_SEQUENCE`; the controllers'
  caches (`kcm_shared.runtime.cache`) and third parties read them.
- Progress markers (`PROGRESS_PREFIX`, same stream): the watcher publishes `RESOURCE_VERSION`
  alone; caches and `Context.published()` read them. A cache asks for one on `WATCHER_SYNC`.
- Work items (`WORK_PREFIX`, one `WORK_STREAM_PREFIX` stream per controller): the durable
  queue (`kcm_shared.workqueue.durable`) publishes and consumes them, deferred ones with
  `NOT_BEFORE`, `FAILURES`, `EXPECTED_LAST_SUBJECT_SEQUENCE` and the trace headers.
- Dead letters (`DLQ_PREFIX`, `DLQ_STREAM`): the durable queue publishes them with `KEY`,
  `REASON`, `DELIVERIES`, `ORIGINAL_SUBJECT` and `FAILURES`; operators read them.
- Coordination: controller replicas (`kcm_shared.bus.membership`) request on
  `COORD_HEARTBEAT`, and the coordinator answers and keeps the grants in `GRANTS_BUCKET`;
  the leading coordinator publishes its verdicts on `COORD_STATUS`; the watcher and every
  coordinator beat on `HEALTH_PREFIX` (`kcm_shared.bus.healthbeat`), which coordinators hear.

The split with `kcm_shared.bus.subjects`: this module holds the names only, no code;
`subjects` builds and parses subjects and subscription filters from the prefixes here, with
the token encoding. JetStream's own protocol (`$JS.…` API subjects, `KV_` stream names, the
status, flow-control and heartbeat headers read through nats-py's `api.Header`) is nats'
and not listed. The W3C trace header names belong to `kcm_shared.base.tracing`, which reads
them below the bus layer; they are repeated here by reference so the list is complete.
"""

from __future__ import annotations

from kcm_shared.base import tracing

# --- headers ---------------------------------------------------------------------------------

EVENT = "Kcm-Event"  # what happened to the object: one of the event types below
RESOURCE_VERSION = "Kcm-Resource-Version"  # orders an object's states; a marker's "published up to"
TOO_LARGE = "Kcm-Too-Large"  # the body's size, on an object message sent without it: GET it instead
NOT_BEFORE = "Kcm-Not-Before"  # unix time a deferred work item waits for (requeue_after, backoff)
FAILURES = "Kcm-Failures"  # failed reconciles of the key in a row: its backoff survives restarts
KEY = "Kcm-Key"  # a dead letter's key ("" if none); on any message whose subject has a digest token
REASON = "Kcm-Reason"  # why the item was dead-lettered, one line, for the operator
DELIVERIES = "Kcm-Deliveries"  # JetStream's delivery count of the item when it was dead-lettered
ORIGINAL_SUBJECT = "Kcm-Subject"  # the work subject a dead letter came from: publish there to retry
MSG_ID = "Nats-Msg-Id"  # JetStream's duplicate window absorbs a retried publish that had landed
MSG_TTL = "Nats-TTL"  # seconds a tombstone stays, so deletes do not grow the stream for ever
EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"  # fence: never over a newer one
TRACEPARENT = tracing.TRACEPARENT  # W3C trace of the change, from the watcher to the reconcile
TRACESTATE = tracing.TRACESTATE  # W3C vendor trace state, carried with TRACEPARENT

# --- values of EVENT -------------------------------------------------------------------------

ADDED = "ADDED"  # from the watch, as the API server said it
MODIFIED = "MODIFIED"  # from the watch
DELETED = "DELETED"  # from the watch, or a relist's tombstone for a delete the watch missed
SYNC = "SYNC"  # a relist found the stream lacking the object or holding another version

# --- streams ---------------------------------------------------------------------------------

OBJECTS_STREAM = "KCM_OBJECTS"  # latest state per object subject and the progress markers
WORK_STREAM_PREFIX = "KCM_WORK_"  # + the controller's name: one pending item per key
DLQ_STREAM = "KCM_DLQ"  # dead letters, kept 7 days for an operator
GRANTS_BUCKET = "kcm-grants"  # JetStream KV: each replica's granted partitions, outliving a coordinator

# --- subjects --------------------------------------------------------------------------------

OBJECT_PREFIX = "kcm.obj"  # + group, version, resource, namespace, name: one object's latest state
PROGRESS_PREFIX = "kcm.progress"  # + group, version, resource: everything up to a resourceVersion is out
WORK_PREFIX = "kcm.work"  # + controller, partition, namespace, name: a pending key
DLQ_PREFIX = "kcm.dlq"  # + controller: items that cannot be handled at all
HEALTH_PREFIX = "kcm.health"  # + service, instance: heartbeats with health check results
COORD_PREFIX = "kcm.coord"  # the coordinator's subjects, the two below
COORD_HEARTBEAT = f"{COORD_PREFIX}.heartbeat"  # replicas' heartbeats; the reply grants partitions
COORD_STATUS = f"{COORD_PREFIX}.status"  # the leading coordinator's verdicts, for its standbys
WATCHER_SYNC = "kcm.watcher.sync"  # request: a progress marker at or beyond a resourceVersion
