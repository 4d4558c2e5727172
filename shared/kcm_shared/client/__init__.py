"""Layer 4, the API client: HTTP/1.1, token-bucket rate limits, `KubeClient`, discovery, the
scale subresource, and clients under a ServiceAccount's TokenRequest tokens (what upstream's
client-go rest, discovery and scale clients and controller-manager's clientbuilder do).
"""
