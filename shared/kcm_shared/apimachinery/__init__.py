"""Layer 2, API machinery: the object codec and views, label and field selectors, quantities,
resourceVersions, int-or-string, Go durations, semantic equality, and the group/version/resource
type (upstream k8s.io/apimachinery). Imports only `base`.
"""
