"""The root CA certificate publisher (upstream pkg/controller/certificates/rootcacertpublisher)."""
