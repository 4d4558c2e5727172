"""The Deployment controller (upstream pkg/controller/deployment)."""
