"""The legacy service account token cleaner (upstream pkg/controller/serviceaccount/legacy_serviceaccount_token_cleaner.go)."""
