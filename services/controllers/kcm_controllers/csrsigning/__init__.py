"""The CSR signing controller (upstream pkg/controller/certificates/signer)."""
