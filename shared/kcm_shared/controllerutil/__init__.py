"""Layer 9, upstream's controller_utils and what one family of controllers shares: pod control,
ControllerRefs, expectations, pod ranking, ControllerRevision history, own-write tracking, the
cluster identity flags, settling side-by-side writes (a 404 is done), and a package per family
(`replicaset/`: the ReplicaSet and ReplicationController sync; `endpoints/`: the
Service-networking controllers).

What two controllers share lives here, never in one of them for the other to import.
"""
