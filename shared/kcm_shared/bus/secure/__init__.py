"""Upstream's secure serving for kcm's controller services (kube-controller-manager's
`--secure-port`): HTTPS (`certs`), delegated authentication (`authn`) and authorization
(`authz`) through the API server, and the aiohttp server that puts them in front of the ops
routes (`server`). Started by `kcm_shared.runtime.manager`; k8s.io/apiserver's
DelegatingAuthenticationOptions, DelegatingAuthorizationOptions and SecureServingOptions are
the behaviour followed, docs/flags.md lists the flags and docs/deploying.md the differences.
"""
