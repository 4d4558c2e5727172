"""The sync the ReplicaSet and ReplicationController controllers share (upstream
pkg/controller/replicaset, which runs both): `replicamanager` and its status helpers."""
