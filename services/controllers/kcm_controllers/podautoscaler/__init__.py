"""The horizontal-pod-autoscaler-controller (upstream pkg/controller/podautoscaler)."""
