"""The StatefulSet controller (upstream pkg/controller/statefulset)."""
