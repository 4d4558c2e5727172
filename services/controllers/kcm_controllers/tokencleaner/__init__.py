"""The bootstrap token cleaner (upstream pkg/controller/bootstrap, tokencleaner.go)."""
