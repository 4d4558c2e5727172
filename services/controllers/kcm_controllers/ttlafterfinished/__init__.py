"""The TTL-after-finished controller (upstream pkg/controller/ttlafterfinished)."""
