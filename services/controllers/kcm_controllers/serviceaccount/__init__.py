"""The ServiceAccount controller (upstream pkg/controller/serviceaccount, serviceaccounts_controller.go)."""
