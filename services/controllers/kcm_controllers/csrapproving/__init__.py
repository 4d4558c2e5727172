"""The CSR approving controller (upstream pkg/controller/certificates/approver)."""
