"""The cronjob-controller (upstream pkg/controller/cronjob)."""
