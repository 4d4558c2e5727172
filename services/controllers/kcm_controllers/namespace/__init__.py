"""The namespace controller (upstream pkg/controller/namespace)."""
