"""Validation of apiregistration.k8s.io/v1 APIServices, after upstream's kube-aggregator
pkg/apis/apiregistration/validation: the name is `<version>.<group>` of the spec, the group a
DNS-1123 subdomain (empty only for the core `v1`), the version a DNS-1035 label, the priorities
in range, and a local APIService (no `service`) has neither a caBundle nor insecureSkipTLSVerify.

Called by the dispatch in `validation/__init__.py` (metav1 checks the name is a path segment).
"""

from __future__ import annotations

from kcm_shared.apimachinery.selectors import is_dns1123_subdomain

from .fielderrors import Causes, Obj, as_dict, go_quote
from .metav1 import is_dns1035_label, is_path_segment_name


def validate_api_service(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    group, version = str(spec.get("group") or ""), str(spec.get("version") or "")
    name = str(as_dict(obj.get("metadata")).get("name") or "")
    required = f"{version}.{group}"
    if name and not is_path_segment_name(name) and name != required:
        c.invalid("metadata.name", name, f'must be `spec.version+"."+spec.group`: {go_quote(required)}')
    if not group and version != "v1":
        c.required("spec.group", "only v1 may have an empty group and it better be legacy kube")
    for message in is_dns1123_subdomain(group) if group else []:
        c.invalid("spec.group", group, message)
    for message in is_dns1035_label(version):
        c.invalid("spec.version", version, message)
    group_priority, version_priority = spec.get("groupPriorityMinimum"), spec.get("versionPriority")
    if not isinstance(group_priority, int) or not 0 < group_priority <= 20000:
        c.invalid("spec.groupPriorityMinimum", group_priority, "must be positive and less than 20000")
    if not isinstance(version_priority, int) or not 0 < version_priority <= 1000:
        c.invalid("spec.versionPriority", version_priority, "must be positive and less than 1000")
    if spec.get("service") is None:
        if spec.get("caBundle"):
            c.invalid(
                "spec.caBundle",
                f"{len(str(spec['caBundle']))} bytes",
                "local APIServices may not have a caBundle",
            )
        if spec.get("insecureSkipTLSVerify"):
            c.invalid(
                "spec.insecureSkipTLSVerify", True, "local APIServices may not have insecureSkipTLSVerify"
            )
        return
    service = as_dict(spec.get("service"))
    for key in ("namespace", "name"):
        if not service.get(key):
            c.required(f"spec.service.{key}")
    if spec.get("insecureSkipTLSVerify") and spec.get("caBundle"):
        c.invalid("spec.insecureSkipTLSVerify", True, "may not be true if caBundle is present")
