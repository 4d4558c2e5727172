"""What the Service-networking controllers share (endpoints, endpointslice,
endpointslice-mirroring): Service and Pod rules, and the EndpointSlice tracker."""
