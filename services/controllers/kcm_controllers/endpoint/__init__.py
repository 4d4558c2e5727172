"""The endpoints controller: Endpoints for every Service with a selector (upstream pkg/controller/endpoint)."""
