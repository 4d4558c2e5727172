"""The ReplicationController controller (upstream pkg/controller/replication)."""
