"""The service account token controller (upstream pkg/controller/serviceaccount/tokens_controller.go)."""
