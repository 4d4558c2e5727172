"""The bootstrap signer (upstream pkg/controller/bootstrap, bootstrapsigner.go)."""
