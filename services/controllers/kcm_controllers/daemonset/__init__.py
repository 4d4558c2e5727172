"""The DaemonSet controller (upstream pkg/controller/daemon)."""
