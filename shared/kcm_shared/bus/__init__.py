"""Layer 6, the bus: NATS connections, subject names, membership, fencing, leader election,
health checks and heartbeats, the ops endpoint, and the flags every bus service shares.

A controller never imports this package (an import-linter contract): the runtime
(`kcm_shared.runtime`) is its face.
"""
