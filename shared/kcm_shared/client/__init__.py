"""Layer 4, the API client: HTTP/1.1, token-bucket rate limits, `KubeClient`, discovery and the
scale subresource (what upstream's client-go rest, discovery and scale clients do).
"""
