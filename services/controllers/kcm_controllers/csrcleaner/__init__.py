"""The CSR cleaner controller (upstream pkg/controller/certificates/cleaner)."""
