"""The validatingadmissionpolicy-status-controller."""
