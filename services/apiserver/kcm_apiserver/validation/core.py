"""Validation of core/v1 kinds, after upstream's pkg/apis/core/validation.

Pods, PodTemplates and ReplicationControllers (pod specs and templates, and what a pod update
may change), Services (ports, node ports, an immutable cluster IP), Nodes (podCIDRs),
Endpoints, ConfigMaps and Secrets (data keys, immutability) and ResourceQuotas (quantities
and scopes). `apps`, `batch` and `discovery` reuse the pod template, port and IP rules.

Callers: the dispatch in `validation/__init__.py`; the group modules named above.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from typing import Any

from kcm_shared.apimachinery import quantity
from kcm_shared.apimachinery.selectors import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    max_len_error,
    regex_error,
)
from kcm_shared.apis.quota.evaluators import STANDARD_SCOPES
from kcm_shared.controllerutil.endpoints import endpointutil

from .fielderrors import (
    IMMUTABLE,
    Causes,
    GoText,
    Obj,
    as_dict,
    as_list,
    go_quote,
    go_string_map,
    is_int,
    semantic,
    validate_nonnegative,
    validate_one_of,
)
from .metav1 import validate_annotations, validate_labels

MAX_INT32 = 2**31 - 1


# --- pod specs ----------------------------------------------------------------------------------

PROTOCOLS = ("SCTP", "TCP", "UDP")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
POD_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PORT_NAME_CHARS = re.compile("[-a-z0-9]+")
_PORT_NAME_LETTER = re.compile("[a-z]")


def is_valid_port_name(name: str) -> list[str]:
    """Errors for an IANA_SVC_NAME: at most 15 of [-a-z0-9], one letter, no '--', no edge '-'."""
    errs = []
    if len(name) > 15:
        errs.append(max_len_error(15))
    if not _PORT_NAME_CHARS.fullmatch(name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER.search(name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _port_number(c: Causes, value: Any, path: str) -> None:
    if not is_int(value) or not 1 <= value <= 65535:
        c.invalid(path, value, "must be between 1 and 65535, inclusive")


def _volumes(c: Causes, volumes: Any, path: str) -> set[str]:
    names: set[str] = set()
    for i, volume in enumerate(map(as_dict, as_list(volumes))):
        at = f"{path}[{i}].name"
        name = volume.get("name")
        if not name:
            c.required(at, "")
            continue
        for msg in is_dns1123_label(str(name)):
            c.invalid(at, name, msg)
        if name in names:
            c.duplicate(at, name)
        names.add(str(name))
    return names


def _container(c: Causes, container: Obj, at: str, volumes: set[str]) -> None:
    if not container.get("image"):
        c.required(f"{at}.image", "")
    elif str(container["image"]) != str(container["image"]).strip():
        c.invalid(f"{at}.image", container["image"], "must not have leading or trailing whitespace")
    policy = container.get("imagePullPolicy")
    if policy not in (None, "") and policy not in _PULL_POLICIES:
        c.not_supported(f"{at}.imagePullPolicy", policy, _PULL_POLICIES)
    port_names: set[str] = set()
    for j, port in enumerate(map(as_dict, as_list(container.get("ports")))):
        pat = f"{at}.ports[{j}]"
        if name := port.get("name"):
            for msg in is_valid_port_name(str(name)):
                c.invalid(f"{pat}.name", name, msg)
            if name in port_names:
                c.duplicate(f"{pat}.name", name)
            port_names.add(str(name))
        if port.get("containerPort") is None:
            c.required(f"{pat}.containerPort", "")
        else:
            _port_number(c, port["containerPort"], f"{pat}.containerPort")
        if port.get("hostPort"):
            _port_number(c, port["hostPort"], f"{pat}.hostPort")
        validate_one_of(c, port, "protocol", pat, PROTOCOLS, required=False)
    for j, mount in enumerate(map(as_dict, as_list(container.get("volumeMounts")))):
        mat = f"{at}.volumeMounts[{j}]"
        if not mount.get("name"):
            c.required(f"{mat}.name", "")
        elif mount["name"] not in volumes:
            c.not_found(f"{mat}.name", mount["name"])
        if not mount.get("mountPath"):
            c.required(f"{mat}.mountPath", "")


def _pod_spec(c: Causes, spec: Obj, path: str, restart_policies: tuple[str, ...]) -> None:
    volumes = _volumes(c, spec.get("volumes"), f"{path}.volumes")
    if not as_list(spec.get("containers")):
        c.required(f"{path}.containers", "")
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, container in enumerate(map(as_dict, as_list(spec.get(key)))):
            at = f"{path}.{key}[{i}]"
            name = container.get("name")
            if not name:
                c.required(f"{at}.name", "")
            else:
                for msg in is_dns1123_label(str(name)):
                    c.invalid(f"{at}.name", name, msg)
                if name in names:
                    c.duplicate(f"{at}.name", name)
                names.add(str(name))
            _container(c, container, at, volumes)
    validate_one_of(c, spec, "restartPolicy", path, restart_policies)
    validate_one_of(c, spec, "dnsPolicy", path, _DNS_POLICIES)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not is_int(deadline) or not 1 <= deadline <= MAX_INT32):
        c.invalid(f"{path}.activeDeadlineSeconds", deadline, f"must be between 1 and {MAX_INT32}, inclusive")


def validate_pod_template_spec(
    c: Causes, template: Any, path: str, restart_policies: tuple[str, ...], owner: str = ""
) -> None:
    """A PodTemplateSpec; `owner` names the workload kind that may not set activeDeadlineSeconds."""
    if not isinstance(template, dict):
        c.required(path, "")
        return
    meta = as_dict(template.get("metadata"))
    validate_labels(c, meta.get("labels"), f"{path}.metadata.labels")
    validate_annotations(c, meta.get("annotations"), f"{path}.metadata.annotations")
    spec = as_dict(template.get("spec"))
    _pod_spec(c, spec, f"{path}.spec", restart_policies)
    if owner and spec.get("activeDeadlineSeconds") is not None:
        c.forbidden(
            f"{path}.spec.activeDeadlineSeconds", f"activeDeadlineSeconds in {owner} is not Supported"
        )


_POD_UPDATE_RULE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


def _pod_update(c: Causes, spec: Obj, old_spec: Obj) -> None:
    if spec == old_spec:
        # Status, binding and metadata writes, nearly every pod update: nothing here can fail.
        return
    new_deadline, old_deadline = spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if new_deadline is None and old_deadline is not None:
        c.invalid("spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value")
    elif is_int(new_deadline) and is_int(old_deadline) and new_deadline > old_deadline:
        c.invalid("spec.activeDeadlineSeconds", new_deadline, "must be less than or equal to previous value")
    # Start from the old spec, let through what may change, and compare with what was sent.
    allowed = copy.deepcopy(old_spec)
    for key in ("containers", "initContainers"):
        for mine, sent in zip(as_list(allowed.get(key)), as_list(spec.get(key)), strict=False):
            if isinstance(mine, dict) and isinstance(sent, dict):
                mine["image"] = sent.get("image")
    allowed["activeDeadlineSeconds"] = new_deadline
    old_tolerations, new_tolerations = as_list(old_spec.get("tolerations")), as_list(spec.get("tolerations"))
    if all(t in new_tolerations for t in old_tolerations):
        allowed["tolerations"] = new_tolerations
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if is_int(old_grace) and old_grace < 0 and spec.get("terminationGracePeriodSeconds") == 1:
        allowed["terminationGracePeriodSeconds"] = 1
    gates = as_list(spec.get("schedulingGates"))
    if all(g in as_list(old_spec.get("schedulingGates")) for g in gates):
        allowed["schedulingGates"] = gates
    # Ephemeral containers change only through their own subresource.
    allowed["ephemeralContainers"] = spec.get("ephemeralContainers")
    if semantic(allowed) != semantic(spec):
        c.forbidden("spec", _POD_UPDATE_RULE)


def validate_replication_controller(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    validate_nonnegative(c, spec, "replicas", "spec")
    validate_nonnegative(c, spec, "minReadySeconds", "spec")
    selector = spec.get("selector")
    if not selector:
        c.required("spec.selector", "")
    else:
        validate_labels(c, selector, "spec.selector")
    template = spec.get("template")
    if template is None:
        c.required("spec.template", "")
        return
    labels = as_dict(as_dict(template).get("metadata")).get("labels")
    if isinstance(selector, dict) and any(as_dict(labels).get(k) != v for k, v in selector.items()):
        c.invalid(
            "spec.template.metadata.labels",
            go_string_map(labels),
            "`selector` does not match template `labels`",
        )
    validate_pod_template_spec(c, template, "spec.template", ("Always",), "ReplicationController")


def validate_pod(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    _pod_spec(c, spec, "spec", POD_RESTART_POLICIES)
    if old is not None:
        _pod_update(c, spec, as_dict(old.get("spec")))


def validate_pod_template(c: Causes, obj: Obj, old: Obj | None) -> None:
    validate_pod_template_spec(c, obj.get("template"), "template", POD_RESTART_POLICIES)


# --- services and other kinds -------------------------------------------------------------------

_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")


def validate_service(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    svc_type = spec.get("type")
    validate_one_of(c, spec, "type", "spec", _SERVICE_TYPES)
    validate_one_of(c, spec, "sessionAffinity", "spec", ("ClientIP", "None"))
    ports = as_list(spec.get("ports"))
    if svc_type == "ExternalName":
        if not spec.get("externalName"):
            c.required("spec.externalName", "")
        else:
            for msg in is_dns1123_subdomain(str(spec["externalName"]).rstrip(".")):
                c.invalid("spec.externalName", spec["externalName"], msg)
    elif not ports and spec.get("clusterIP") != "None":
        c.required("spec.ports", "")
    names: set[str] = set()
    for i, port in enumerate(map(as_dict, ports)):
        at = f"spec.ports[{i}]"
        name = port.get("name")
        if not name:
            if len(ports) > 1:
                c.required(f"{at}.name", "")
        else:
            for msg in is_dns1123_label(str(name)):
                c.invalid(f"{at}.name", name, msg)
            if name in names:
                c.duplicate(f"{at}.name", name)
            names.add(str(name))
        _port_number(c, port.get("port"), f"{at}.port")
        validate_one_of(c, port, "protocol", at, PROTOCOLS)
        target = port.get("targetPort")
        if isinstance(target, str):
            for msg in is_valid_port_name(target):
                c.invalid(f"{at}.targetPort", target, msg)
        elif target is not None:
            _port_number(c, target, f"{at}.targetPort")
    _node_ports(c, spec, ports)
    validate_labels(c, spec.get("selector"), "spec.selector")
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        if "ExternalName" not in (svc_type, old_spec.get("type")) and old_spec.get("clusterIP"):
            c.immutable("spec.clusterIP", spec.get("clusterIP", ""), old_spec.get("clusterIP"))


def _node_ports(c: Causes, spec: Obj, ports: list[Any]) -> None:
    """Upstream ValidateService's nodePort rules: none on a ClusterIP Service, each valid, and
    no two ports with the same nodePort and protocol."""
    seen: set[tuple[Any, Any]] = set()
    for i, port in enumerate(map(as_dict, ports)):
        node_port = port.get("nodePort")
        if not node_port:
            continue
        at = f"spec.ports[{i}].nodePort"
        if spec.get("type") == "ClusterIP":
            c.forbidden(at, "may not be used when `type` is 'ClusterIP'")
            continue
        _port_number(c, node_port, at)
        key = (node_port, port.get("protocol"))
        if key in seen:
            c.duplicate(at, node_port)
        seen.add(key)


def validate_node(c: Causes, obj: Obj, old: Obj | None) -> None:
    """Upstream ValidateNode's and ValidateNodeUpdate's podCIDRs rules: valid CIDRs, at most one
    per family, no duplicate, and no change once set (the node IPAM controller sets them once)."""
    cidrs = as_list(as_dict(obj.get("spec")).get("podCIDRs"))
    families = []
    for i, value in enumerate(cidrs):
        try:
            families.append(ipaddress.ip_network(str(value), strict=False).version)
        except ValueError:
            c.invalid(
                f"spec.podCIDRs[{i}]",
                value,
                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
            )
    if len(cidrs) > 1 and (len(cidrs) > 2 or set(families) != {4, 6}) and len(families) == len(cidrs):
        c.invalid(
            "spec.podCIDRs",
            GoText(_go_string_list(cidrs)),
            "may specify no more than one CIDR for each IP family",
        )
    for i, value in enumerate(cidrs):
        if value in cidrs[:i]:
            c.duplicate(f"spec.podCIDRs[{i}]", value)
    if old is not None:
        before = as_list(as_dict(old.get("spec")).get("podCIDRs"))
        if before and before != cidrs:
            c.forbidden("spec.podCIDRs", 'node updates may not change podCIDR except from "" to valid')


def _go_string_list(values: list[Any]) -> str:
    """A []string as field.Invalid prints it (%#v): []string{"a", "b"}."""
    return "[]string{" + ", ".join(go_quote(str(v)) for v in values) + "}"


def _link_local_multicast(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv4Address):
        return ip in ipaddress.IPv4Network("224.0.0.0/24")
    packed = ip.packed
    return packed[0] == 0xFF and packed[1] & 0x0F == 0x02


def validate_non_special_ip(c: Causes, value: str, path: str) -> None:
    """Upstream ValidateNonSpecialIP (Endpoints, EndpointSlices, external IPs): a valid IP that
    is not unspecified, loopback, link-local or link-local multicast."""
    ip = endpointutil.parse_ip(value)
    if ip is None:
        c.invalid(path, value, "must be a valid IP address")
        return
    if ip.is_unspecified:
        c.invalid(path, value, f"may not be unspecified ({value})")
    if ip.is_loopback:
        c.invalid(path, value, "may not be in the loopback range (127.0.0.0/8, ::1/128)")
    if ip.is_link_local:
        c.invalid(path, value, "may not be in the link-local range (169.254.0.0/16, fe80::/10)")
    if _link_local_multicast(ip):
        c.invalid(path, value, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)")


def _endpoint_address(c: Causes, address: Obj, path: str) -> None:
    ip = str(address.get("ip") or "")
    if endpointutil.parse_ip(ip) is None:
        c.invalid(f"{path}.ip", ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
    hostname = address.get("hostname")
    if hostname:
        for msg in is_dns1123_label(str(hostname)):
            c.invalid(f"{path}.hostname", hostname, msg)
    node_name = address.get("nodeName")
    if node_name is not None:
        for msg in is_dns1123_subdomain(str(node_name)):
            c.invalid(f"{path}.nodeName", node_name, msg)
    validate_non_special_ip(c, ip, f"{path}.ip")


def _endpoint_port(c: Causes, port: Obj, require_name: bool, path: str) -> None:
    name = port.get("name")
    if require_name and not name:
        c.required(f"{path}.name", "")
    elif name:
        for msg in is_dns1123_label(str(name)):
            c.invalid(f"{path}.name", name, msg)
    _port_number(c, port.get("port"), f"{path}.port")
    validate_one_of(c, port, "protocol", path, PROTOCOLS)
    app_protocol = port.get("appProtocol")
    if app_protocol is not None:
        for msg in is_qualified_name(str(app_protocol)):
            c.invalid(f"{path}.appProtocol", app_protocol, msg)


def validate_endpoints(c: Causes, obj: Obj, old: Obj | None) -> None:
    """Upstream ValidateEndpoints / ValidateEndpointsUpdate (the subsets; metadata is common)."""
    for i, subset in enumerate(map(as_dict, as_list(obj.get("subsets")))):
        at = f"subsets[{i}]"
        ready = as_list(subset.get("addresses"))
        not_ready = as_list(subset.get("notReadyAddresses"))
        if not ready and not not_ready:
            c.required(at, "must specify `addresses` or `notReadyAddresses`")
        for j, address in enumerate(map(as_dict, ready)):
            _endpoint_address(c, address, f"{at}.addresses[{j}]")
        for j, address in enumerate(map(as_dict, not_ready)):
            _endpoint_address(c, address, f"{at}.notReadyAddresses[{j}]")
        ports = as_list(subset.get("ports"))
        for j, port in enumerate(map(as_dict, ports)):
            _endpoint_port(c, port, len(ports) > 1, f"{at}.ports[{j}]")


_CONFIG_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_KEY_RE = re.compile(_CONFIG_KEY_FMT)
_CONFIG_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"


def is_config_map_key(key: str) -> list[str]:
    errs = []
    if len(key) > 253:
        errs.append(max_len_error(253))
    if not _CONFIG_KEY_RE.fullmatch(key):
        errs.append(regex_error(_CONFIG_KEY_MSG, _CONFIG_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _data_keys(c: Causes, obj: Obj, fields: tuple[str, ...]) -> None:
    seen: set[str] = set()
    for name in fields:
        for key in sorted(as_dict(obj.get(name))):
            for msg in is_config_map_key(key):
                c.invalid(f"{name}[{key}]", key, msg)
            if key in seen:
                c.invalid(f"{name}[{key}]", key, "duplicate of key present in another data field")
            seen.add(key)


def _immutable_data(c: Causes, obj: Obj, old: Obj | None, fields: tuple[str, ...]) -> None:
    if old is None or old.get("immutable") is not True:
        return
    if obj.get("immutable") is not True:
        c.forbidden("immutable", "field is immutable when `immutable` is set")
    for name in fields:
        if semantic(obj.get(name)) != semantic(old.get(name)):
            c.forbidden(name, "field is immutable when `immutable` is set")


def validate_config_map(c: Causes, obj: Obj, old: Obj | None) -> None:
    _data_keys(c, obj, ("data", "binaryData"))
    _immutable_data(c, obj, old, ("data", "binaryData"))


SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"


def validate_secret(c: Causes, obj: Obj, old: Obj | None) -> None:
    # Upstream ValidateSecret: a token Secret must say whose token it holds.
    if obj.get("type") == SERVICE_ACCOUNT_TOKEN and not as_dict(
        as_dict(obj.get("metadata")).get("annotations")
    ).get(SERVICE_ACCOUNT_NAME_KEY):
        c.required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]")
    _data_keys(c, obj, ("data",))
    _immutable_data(c, obj, old, ("data",))
    if old is not None:
        c.immutable("type", obj.get("type"), old.get("type"))


_STANDARD_QUOTA_RESOURCES = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_INTEGER_QUOTA_RESOURCES = frozenset(
    {
        "pods",
        "services",
        "replicationcontrollers",
        "resourcequotas",
        "services.nodeports",
        "services.loadbalancers",
        "secrets",
        "configmaps",
        "persistentvolumeclaims",
    }
)
_POD_COMPUTE_QUOTA_RESOURCES = frozenset(
    {"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"}
)
_CONFLICTING_SCOPES = (("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating"))
_EXISTS_ONLY_SCOPES = (
    "BestEffort",
    "NotBestEffort",
    "Terminating",
    "NotTerminating",
    "CrossNamespacePodAffinity",
)


def _quota_scope_fits(scope: str, resource: str) -> bool:
    """Upstream's IsResourceQuotaScopeValidForResource."""
    if scope == "BestEffort":
        return resource == "pods"
    if scope in (
        "Terminating",
        "NotTerminating",
        "NotBestEffort",
        "PriorityClass",
        "CrossNamespacePodAffinity",
    ):
        return resource == "pods" or resource in _POD_COMPUTE_QUOTA_RESOURCES
    return True


def _quota_quantities(c: Causes, values: Any, path: str) -> None:
    for name, value in as_dict(values).items():
        try:
            amount = quantity.parse(value)
        except quantity.QuantityError as exc:
            c.invalid(f"{path}[{name}]", value, str(exc))
            continue
        if amount.sign() < 0:
            c.invalid(f"{path}[{name}]", str(amount), "must be greater than or equal to 0")
        if name in _INTEGER_QUOTA_RESOURCES and amount.milli_value() % 1000:
            c.invalid(f"{path}[{name}]", str(amount), "must be an integer")


def validate_resource_quota(c: Causes, obj: Obj, old: Obj | None) -> None:
    """Upstream ValidateResourceQuota(Update): quantities, and which scopes go with which resources."""
    spec = as_dict(obj.get("spec"))
    _quota_quantities(c, spec.get("hard"), "spec.hard")
    status = as_dict(obj.get("status"))
    _quota_quantities(c, status.get("hard"), "status.hard")
    _quota_quantities(c, status.get("used"), "status.used")
    hard = sorted(as_dict(spec.get("hard")))
    scopes = [s for s in as_list(spec.get("scopes")) if isinstance(s, str)]
    for scope in scopes:
        if scope not in STANDARD_SCOPES:
            c.invalid("spec.scopes", scopes, "unsupported scope")
        for name in hard:
            if name in _STANDARD_QUOTA_RESOURCES and not _quota_scope_fits(scope, name):
                c.invalid("spec.scopes", scopes, "unsupported scope applied to resource")
    if any(set(pair) <= set(scopes) for pair in _CONFLICTING_SCOPES):
        c.invalid("spec.scopes", scopes, "conflicting scopes")
    selector = spec.get("scopeSelector")
    if isinstance(selector, dict):
        path = "spec.scopeSelector.matchExpressions"
        chosen: set[str] = set()
        for raw in as_list(selector.get("matchExpressions")):
            req = as_dict(raw)
            name_of_scope, operator, values = (
                req.get("scopeName"),
                req.get("operator"),
                as_list(req.get("values")),
            )
            if name_of_scope not in STANDARD_SCOPES:
                c.invalid(f"{path}.scopeName", name_of_scope, "unsupported scope")
            for name in hard:
                if name in _STANDARD_QUOTA_RESOURCES and not _quota_scope_fits(str(name_of_scope), name):
                    c.invalid(path, selector, "unsupported scope applied to resource")
            if name_of_scope in _EXISTS_ONLY_SCOPES and operator != "Exists":
                c.invalid(
                    f"{path}.operator",
                    operator,
                    "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, "
                    "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                    "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                )
            if operator in ("In", "NotIn"):
                if not values:
                    c.required(
                        f"{path}.values",
                        "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                    )
            elif operator in ("Exists", "DoesNotExist"):
                if values:
                    c.invalid(
                        f"{path}.values",
                        values,
                        "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                    )
            else:
                c.invalid(f"{path}.operator", operator, "not a valid selector operator")
            chosen.add(str(name_of_scope))
        if any(set(pair) <= chosen for pair in _CONFLICTING_SCOPES):
            c.invalid(path, scopes, "conflicting scopes")
    if old is not None:
        old_scopes = set(as_list(as_dict(old.get("spec")).get("scopes")))
        if old_scopes != set(scopes):
            c.invalid("spec.scopes", scopes, IMMUTABLE)
