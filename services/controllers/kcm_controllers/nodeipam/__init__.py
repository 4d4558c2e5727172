"""The node IPAM controller's range allocator (upstream pkg/controller/nodeipam)."""
