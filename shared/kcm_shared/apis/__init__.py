"""Layer 3, upstream API semantics that both the API server and the controllers need: cron
schedules, resource quota evaluation, node affinity and taints, service account tokens.
"""
