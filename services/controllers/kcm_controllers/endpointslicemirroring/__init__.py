"""The endpointslice-mirroring controller (upstream pkg/controller/endpointslicemirroring)."""
