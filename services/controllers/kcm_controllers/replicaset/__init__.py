"""The ReplicaSet controller (upstream pkg/controller/replicaset)."""
