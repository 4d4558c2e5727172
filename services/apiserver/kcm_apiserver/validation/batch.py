"""Validation of built-in objects before they are stored, with upstream's error causes.

`operations` calls `validate` after defaulting on every create (`old` None) and update; a
non-empty result becomes a 422 Invalid Status whose `details.causes` are these causes.
Rules and messages follow upstream's pkg/apis/*/validation and apimachinery's metadata
validation, limited to what keeps controllers working: object names and metadata, label
selectors and their templates, pod specs, workload strategies, and the fields that may
not change once set. Unknown kinds (custom resources) get the metadata checks only.
"""

from __future__ import annotations

import copy
import datetime as dt
import ipaddress
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypedDict, TypeGuard

from kcm_shared.apimachinery import quantity
from kcm_shared.apimachinery.selectors import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    label_selector_from_dict,
    max_len_error,
    regex_error,
)
from kcm_shared.apis import cron
from kcm_shared.apis.quota.evaluators import STANDARD_SCOPES
from kcm_shared.controllerutil.endpoints import endpointutil

from kcm_apiserver.registry import BUILTIN

__all__ = ["Cause", "is_dns1035_label", "is_dns1123_label", "is_dns1123_subdomain", "validate"]

Obj = dict[str, Any]


class Cause(TypedDict):
    """One metav1.StatusCause: `reason` is upstream's cause type, `field` a JSON path."""

    reason: str
    message: str
    field: str


REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
NOT_FOUND = "FieldValueNotFound"

IMMUTABLE = "field is immutable"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
MAX_INT32 = 2**31 - 1


# --- rendering values the way Go's field errors print them --------------------------------


class GoText(str):
    """A value already rendered in Go syntax (%#v of a struct); printed as is."""


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(value: str) -> str:
    """Go's %q (strconv.Quote): printable characters as they are, others escaped."""
    out = ['"']
    for c in value:
        if c in ('"', "\\"):
            out.append("\\" + c)
        elif c in _GO_ESCAPES:
            out.append(_GO_ESCAPES[c])
        elif c.isprintable():  # unicode.IsPrint's classes: no other spaces, no format or control
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) <= 0xFFFF:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


def go_string_map(value: Mapping[str, Any] | None) -> GoText:
    if value is None:
        return GoText("map[string]string(nil)")
    items = ", ".join(f"{go_quote(str(k))}:{go_quote(str(value[k]))}" for k in sorted(value))
    return GoText(f"map[string]string{{{items}}}")


def go_label_selector(sel: Mapping[str, Any]) -> GoText:
    expressions = sel.get("matchExpressions")
    if expressions is None:
        rendered = "[]v1.LabelSelectorRequirement(nil)"
    else:
        parts = []
        for e in expressions if isinstance(expressions, list) else []:
            e = e if isinstance(e, dict) else {}
            values = ", ".join(go_quote(str(v)) for v in e.get("values") or [])
            parts.append(
                f"v1.LabelSelectorRequirement{{Key:{go_quote(str(e.get('key', '')))}, "
                f"Operator:{go_quote(str(e.get('operator', '')))}, Values:[]string{{{values}}}}}"
            )
        rendered = "[]v1.LabelSelectorRequirement{" + ", ".join(parts) + "}"
    labels = sel.get("matchLabels")
    return GoText(f"v1.LabelSelector{{MatchLabels:{go_string_map(labels)}, MatchExpressions:{rendered}}}")


def go_value(value: Any) -> str:
    if isinstance(value, GoText):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return go_string_map(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class _Causes(list[Cause]):
    """Collects causes with upstream's message shapes (field.Error.ErrorBody)."""

    def _add(self, reason: str, path: str, message: str, detail: str = "") -> None:
        self.append(
            {"reason": reason, "message": f"{message}: {detail}" if detail else message, "field": path}
        )

    def required(self, path: str, detail: str = "") -> None:
        self._add(REQUIRED, path, "Required value", detail)

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self._add(INVALID, path, f"Invalid value: {go_value(value)}", detail)

    def not_supported(self, path: str, value: Any, supported: Iterable[str]) -> None:
        listed = ", ".join(go_quote(s) for s in supported)
        self._add(NOT_SUPPORTED, path, f"Unsupported value: {go_value(value)}", f"supported values: {listed}")

    def invalid_omitted(self, path: str, detail: str) -> None:
        """field.Invalid with field.OmitValueType: the message names no value."""
        self._add(INVALID, path, "Invalid value", detail)

    def too_many(self, path: str, actual: int, limit: int) -> None:
        self._add(
            TOO_MANY,
            path,
            f"Too many: {actual}",
            f"must have at most {limit} item{'' if limit == 1 else 's'}",
        )

    def duplicate(self, path: str, value: Any) -> None:
        self._add(DUPLICATE, path, f"Duplicate value: {go_value(value)}")

    def forbidden(self, path: str, detail: str) -> None:
        self._add(FORBIDDEN, path, "Forbidden", detail)

    def too_long(self, path: str, limit: int) -> None:
        self._add(TOO_LONG, path, "Too long", f"may not be more than {limit} bytes")

    def not_found(self, path: str, value: Any) -> None:
        self._add(NOT_FOUND, path, f"Not found: {go_value(value)}")

    def immutable(self, path: str, new: Any, old: Any) -> None:
        if _semantic(new) != _semantic(old):
            self.invalid(path, new, IMMUTABLE)


# --- small helpers --------------------------------------------------------------------------


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _semantic(value: Any) -> Any:
    """A form for equality checks that, like apimachinery's Semantic.DeepEqual, does not tell
    a missing field from a null, empty string, empty map or empty list."""
    if isinstance(value, dict):
        out = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in (None, "", {}, [])}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def _nonnegative(c: _Causes, obj: Obj, key: str, path: str) -> None:
    value = obj.get(key)
    if value is None:
        return
    if not _is_int(value):
        c.invalid(f"{path}.{key}", value, "must be an integer")
    elif value < 0:
        c.invalid(f"{path}.{key}", value, "must be greater than or equal to 0")


def _one_of(
    c: _Causes, obj: Obj, key: str, path: str, allowed: tuple[str, ...], *, required: bool = True
) -> None:
    value = obj.get(key)
    if value in (None, ""):
        if required:
            c.required(f"{path}.{key}", "")
    elif value not in allowed:
        c.not_supported(f"{path}.{key}", value, allowed)


# --- names ------------------------------------------------------------------------------------

NameCheck = Callable[[str], list[str]]

_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)


def is_dns1035_label(value: str) -> list[str]:
    """Errors for a string that is not an RFC 1035 label (Service names: must start with a letter)."""
    errs = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(regex_error(_DNS1035_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_path_segment_name(value: str) -> list[str]:
    """Errors for a name that cannot be one segment of a URL path (RBAC object names)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{ch}'" for ch in "/%" if ch in value]


_RBAC = "rbac.authorization.k8s.io"
_NAME_CHECKS: dict[tuple[str, str], NameCheck] = {
    ("", "Namespace"): is_dns1123_label,
    ("", "Service"): is_dns1035_label,
    (_RBAC, "Role"): is_path_segment_name,
    (_RBAC, "ClusterRole"): is_path_segment_name,
    (_RBAC, "RoleBinding"): is_path_segment_name,
    (_RBAC, "ClusterRoleBinding"): is_path_segment_name,
    ("certificates.k8s.io", "CertificateSigningRequest"): is_path_segment_name,
}
_NAMESPACED = {(rt.group, rt.kind): rt.namespaced for rt in BUILTIN}


def _as_prefix(name: str) -> str:
    # A generateName prefix may end in '-': upstream swaps the tail for a letter before checking.
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


# --- metadata -----------------------------------------------------------------------------------


def _labels(c: _Causes, labels: Any, path: str) -> None:
    if labels is None:
        return
    if not isinstance(labels, dict):
        c.invalid(path, labels, "must be a map of string keys to string values")
        return
    for key in sorted(labels):
        for msg in is_qualified_name(key):
            c.invalid(path, key, msg)
        value = labels[key]
        if not isinstance(value, str):
            c.invalid(path, value, "must be a string")
            continue
        for msg in is_label_value(value):
            c.invalid(path, value, msg)


def _annotations(c: _Causes, annotations: Any, path: str) -> None:
    if annotations is None:
        return
    if not isinstance(annotations, dict):
        c.invalid(path, annotations, "must be a map of string keys to string values")
        return
    for key in sorted(annotations):
        # Annotation keys are qualified names compared case-insensitively.
        for msg in is_qualified_name(key.lower()):
            c.invalid(path, key, msg)
    size = sum(len(k.encode()) + len(str(v).encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        c.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT)


def _owner_references(c: _Causes, refs: Any, path: str) -> None:
    first_controller = ""
    for ref in map(_dict, _list(refs)):
        api_version = str(ref.get("apiVersion") or "")
        if not api_version.rsplit("/", 1)[-1]:
            c.invalid(f"{path}.apiVersion", api_version, "version must not be empty")
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                c.invalid(f"{path}.{key}", ref.get(key, ""), "must not be empty")
        if ref.get("controller") is True:
            current = f"{ref.get('kind')}/{ref.get('name')}"
            if first_controller:
                c.invalid(
                    path,
                    refs,
                    'Only one reference can have Controller set to true. Found "true" in references for '
                    f"{first_controller} and {current}",
                )
            else:
                first_controller = current


def _metadata(c: _Causes, group: str, kind: str, meta: Obj) -> None:
    check = _NAME_CHECKS.get((group, kind), is_dns1123_subdomain)
    generate_name = meta.get("generateName")
    if generate_name:
        for msg in check(_as_prefix(str(generate_name))):
            c.invalid("metadata.generateName", generate_name, msg)
    name = meta.get("name")
    if not name:
        c.required("metadata.name", "name or generateName is required")
    else:
        for msg in check(str(name)):
            c.invalid("metadata.name", name, msg)
    namespaced = _NAMESPACED.get((group, kind))
    namespace = meta.get("namespace")
    if namespaced is True and not namespace:
        c.required("metadata.namespace", "")
    elif namespaced is False and namespace:
        c.forbidden("metadata.namespace", "not allowed on this type")
    elif namespace:
        for msg in is_dns1123_label(str(namespace)):
            c.invalid("metadata.namespace", namespace, msg)
    _nonnegative(c, meta, "generation", "metadata")
    _labels(c, meta.get("labels"), "metadata.labels")
    _annotations(c, meta.get("annotations"), "metadata.annotations")
    _owner_references(c, meta.get("ownerReferences"), "metadata.ownerReferences")


def _metadata_update(c: _Causes, meta: Obj, old_meta: Obj) -> None:
    for key in ("name", "namespace", "uid"):
        if old_meta.get(key) and meta.get(key) != old_meta.get(key):
            c.invalid(f"metadata.{key}", meta.get(key, ""), IMMUTABLE)


# --- label selectors ----------------------------------------------------------------------------


def _label_selector(c: _Causes, sel: Obj, path: str) -> None:
    """Structure of a metav1.LabelSelector (upstream ValidateLabelSelector)."""
    _labels(c, sel.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(map(_dict, _list(sel.get("matchExpressions")))):
        at = f"{path}.matchExpressions[{i}]"
        op, values = expr.get("operator"), _list(expr.get("values"))
        if op in ("In", "NotIn"):
            if not values:
                c.required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                c.forbidden(
                    f"{at}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
        else:
            c.invalid(f"{at}.operator", op, "not a valid selector operator")
        for msg in is_qualified_name(str(expr.get("key", ""))):
            c.invalid(f"{at}.key", expr.get("key", ""), msg)
        for j, value in enumerate(values):
            for msg in is_label_value(str(value)):
                c.invalid(f"{at}.values[{j}]", value, msg)


def _selector_matches_template(c: _Causes, spec: Obj, base: str, what: str, *, required: bool = True) -> None:
    """A workload's selector: present, valid, non-empty and selecting its own pod template."""
    sel = spec.get("selector")
    if sel is None:
        if required:
            c.required(f"{base}.selector", "")
        return
    if not isinstance(sel, dict):
        c.invalid(f"{base}.selector", sel, "must be a label selector")
        return
    before = len(c)
    _label_selector(c, sel, f"{base}.selector")
    if not sel.get("matchLabels") and not sel.get("matchExpressions"):
        c.invalid(f"{base}.selector", go_label_selector(sel), f"empty selector is invalid for {what}")
    elif len(c) == before:
        labels = _dict(_dict(spec.get("template")).get("metadata")).get("labels")
        if not label_selector_from_dict(sel).matches(_dict(labels)):
            c.invalid(
                f"{base}.template.metadata.labels",
                go_string_map(labels),
                "`selector` does not match template `labels`",
            )


# --- pod specs ----------------------------------------------------------------------------------

_PROTOCOLS = ("SCTP", "TCP", "UDP")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_POD_RESTART_POLICIES = ("Always", "OnFailure", "Never")
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


def _port_number(c: _Causes, value: Any, path: str) -> None:
    if not _is_int(value) or not 1 <= value <= 65535:
        c.invalid(path, value, "must be between 1 and 65535, inclusive")


def _volumes(c: _Causes, volumes: Any, path: str) -> set[str]:
    names: set[str] = set()
    for i, volume in enumerate(map(_dict, _list(volumes))):
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


def _container(c: _Causes, container: Obj, at: str, volumes: set[str]) -> None:
    if not container.get("image"):
        c.required(f"{at}.image", "")
    elif str(container["image"]) != str(container["image"]).strip():
        c.invalid(f"{at}.image", container["image"], "must not have leading or trailing whitespace")
    policy = container.get("imagePullPolicy")
    if policy not in (None, "") and policy not in _PULL_POLICIES:
        c.not_supported(f"{at}.imagePullPolicy", policy, _PULL_POLICIES)
    port_names: set[str] = set()
    for j, port in enumerate(map(_dict, _list(container.get("ports")))):
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
        _one_of(c, port, "protocol", pat, _PROTOCOLS, required=False)
    for j, mount in enumerate(map(_dict, _list(container.get("volumeMounts")))):
        mat = f"{at}.volumeMounts[{j}]"
        if not mount.get("name"):
            c.required(f"{mat}.name", "")
        elif mount["name"] not in volumes:
            c.not_found(f"{mat}.name", mount["name"])
        if not mount.get("mountPath"):
            c.required(f"{mat}.mountPath", "")


def _pod_spec(c: _Causes, spec: Obj, path: str, restart_policies: tuple[str, ...]) -> None:
    volumes = _volumes(c, spec.get("volumes"), f"{path}.volumes")
    if not _list(spec.get("containers")):
        c.required(f"{path}.containers", "")
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, container in enumerate(map(_dict, _list(spec.get(key)))):
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
    _one_of(c, spec, "restartPolicy", path, restart_policies)
    _one_of(c, spec, "dnsPolicy", path, _DNS_POLICIES)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (not _is_int(deadline) or not 1 <= deadline <= MAX_INT32):
        c.invalid(f"{path}.activeDeadlineSeconds", deadline, f"must be between 1 and {MAX_INT32}, inclusive")


def _pod_template(
    c: _Causes, template: Any, path: str, restart_policies: tuple[str, ...], owner: str = ""
) -> None:
    """A PodTemplateSpec; `owner` names the workload kind that may not set activeDeadlineSeconds."""
    if not isinstance(template, dict):
        c.required(path, "")
        return
    meta = _dict(template.get("metadata"))
    _labels(c, meta.get("labels"), f"{path}.metadata.labels")
    _annotations(c, meta.get("annotations"), f"{path}.metadata.annotations")
    spec = _dict(template.get("spec"))
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


def _pod_update(c: _Causes, spec: Obj, old_spec: Obj) -> None:
    if spec == old_spec:
        # Status, binding and metadata writes, nearly every pod update: nothing here can fail.
        return
    new_deadline, old_deadline = spec.get("activeDeadlineSeconds"), old_spec.get("activeDeadlineSeconds")
    if new_deadline is None and old_deadline is not None:
        c.invalid("spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value")
    elif _is_int(new_deadline) and _is_int(old_deadline) and new_deadline > old_deadline:
        c.invalid("spec.activeDeadlineSeconds", new_deadline, "must be less than or equal to previous value")
    # Start from the old spec, let through what may change, and compare with what was sent.
    allowed = copy.deepcopy(old_spec)
    for key in ("containers", "initContainers"):
        for mine, sent in zip(_list(allowed.get(key)), _list(spec.get(key)), strict=False):
            if isinstance(mine, dict) and isinstance(sent, dict):
                mine["image"] = sent.get("image")
    allowed["activeDeadlineSeconds"] = new_deadline
    old_tolerations, new_tolerations = _list(old_spec.get("tolerations")), _list(spec.get("tolerations"))
    if all(t in new_tolerations for t in old_tolerations):
        allowed["tolerations"] = new_tolerations
    old_grace = old_spec.get("terminationGracePeriodSeconds")
    if _is_int(old_grace) and old_grace < 0 and spec.get("terminationGracePeriodSeconds") == 1:
        allowed["terminationGracePeriodSeconds"] = 1
    gates = _list(spec.get("schedulingGates"))
    if all(g in _list(old_spec.get("schedulingGates")) for g in gates):
        allowed["schedulingGates"] = gates
    # Ephemeral containers change only through their own subresource.
    allowed["ephemeralContainers"] = spec.get("ephemeralContainers")
    if _semantic(allowed) != _semantic(spec):
        c.forbidden("spec", _POD_UPDATE_RULE)


# --- workloads ----------------------------------------------------------------------------------

_PERCENT_RE = re.compile("[0-9]+%")


def _int_or_percent_value(value: Any) -> int | None:
    if _is_int(value):
        return int(value)
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value):
        return int(value[:-1])
    return None


def _int_or_percent(c: _Causes, value: Any, path: str) -> None:
    """A non-negative integer or a percent string (upstream ValidatePositiveIntOrPercent)."""
    if value is None:
        return
    if isinstance(value, str):
        if not _PERCENT_RE.fullmatch(value):
            msg = "a valid percent string must be a numeric string followed by an ending '%'"
            c.invalid(path, value, regex_error(msg, "[0-9]+%", "1%", "93%"))
    elif _is_int(value):
        if value < 0:
            c.invalid(path, value, "must be greater than or equal to 0")
    else:
        c.invalid(path, value, "must be an integer or percentage (e.g '5%')")


def _not_over_100_percent(c: _Causes, value: Any, path: str) -> None:
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value) and int(value[:-1]) > 100:
        c.invalid(path, value, "must not be greater than 100%")


def _deployment(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    _nonnegative(c, spec, "replicas", "spec")
    _selector_matches_template(c, spec, "spec", "deployment")
    _pod_template(c, spec.get("template"), "spec.template", ("Always",), "ReplicaSet")
    strategy = _dict(spec.get("strategy"))
    kind = strategy.get("type")
    if kind == "Recreate":
        if strategy.get("rollingUpdate") is not None:
            c.forbidden(
                "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"
            )
    elif kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            c.required("spec.strategy.rollingUpdate", "this should be defaulted and never be nil")
        else:
            path = "spec.strategy.rollingUpdate"
            _int_or_percent(c, rolling.get("maxUnavailable"), f"{path}.maxUnavailable")
            _int_or_percent(c, rolling.get("maxSurge"), f"{path}.maxSurge")
            if (
                _int_or_percent_value(rolling.get("maxUnavailable"))
                == 0
                == _int_or_percent_value(rolling.get("maxSurge"))
            ):
                c.invalid(
                    f"{path}.maxUnavailable",
                    rolling.get("maxUnavailable"),
                    "may not be 0 when `maxSurge` is 0",
                )
            _not_over_100_percent(c, rolling.get("maxUnavailable"), f"{path}.maxUnavailable")
    else:
        c.not_supported(
            "spec.strategy", GoText(json.dumps(strategy, sort_keys=True)), ("Recreate", "RollingUpdate")
        )
    for key in ("minReadySeconds", "revisionHistoryLimit", "progressDeadlineSeconds"):
        _nonnegative(c, spec, key, "spec")
    deadline = spec.get("progressDeadlineSeconds")
    if _is_int(deadline) and deadline <= (spec.get("minReadySeconds") or 0):
        c.invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds")
    if old is not None:
        _selector_immutable(c, spec, _dict(old.get("spec")))


def _selector_immutable(c: _Causes, spec: Obj, old_spec: Obj) -> None:
    if _semantic(spec.get("selector")) != _semantic(old_spec.get("selector")):
        c.invalid("spec.selector", go_label_selector(_dict(spec.get("selector"))), IMMUTABLE)


def _replica_set(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    _nonnegative(c, spec, "replicas", "spec")
    _nonnegative(c, spec, "minReadySeconds", "spec")
    # Upstream reuses the Deployment wording here.
    _selector_matches_template(c, spec, "spec", "deployment")
    _pod_template(c, spec.get("template"), "spec.template", ("Always",), "ReplicaSet")
    if old is not None:
        _selector_immutable(c, spec, _dict(old.get("spec")))


def _replication_controller(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    _nonnegative(c, spec, "replicas", "spec")
    _nonnegative(c, spec, "minReadySeconds", "spec")
    selector = spec.get("selector")
    if not selector:
        c.required("spec.selector", "")
    else:
        _labels(c, selector, "spec.selector")
    template = spec.get("template")
    if template is None:
        c.required("spec.template", "")
        return
    labels = _dict(_dict(template).get("metadata")).get("labels")
    if isinstance(selector, dict) and any(_dict(labels).get(k) != v for k, v in selector.items()):
        c.invalid(
            "spec.template.metadata.labels",
            go_string_map(labels),
            "`selector` does not match template `labels`",
        )
    _pod_template(c, template, "spec.template", ("Always",), "ReplicationController")


_STS_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "revisionHistoryLimit",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)


def _stateful_set(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    policy = spec.get("podManagementPolicy")
    if not policy:
        c.required("spec.podManagementPolicy", "")
    elif policy not in ("OrderedReady", "Parallel"):
        c.invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'")
    strategy = _dict(spec.get("updateStrategy"))
    kind = strategy.get("type")
    if not kind:
        c.required("spec.updateStrategy", "")
    elif kind == "OnDelete":
        if strategy.get("rollingUpdate") is not None:
            c.invalid(
                "spec.updateStrategy.rollingUpdate",
                strategy["rollingUpdate"],
                "only allowed for updateStrategy 'RollingUpdate'",
            )
    elif kind == "RollingUpdate":
        rolling = _dict(strategy.get("rollingUpdate"))
        _nonnegative(c, rolling, "partition", "spec.updateStrategy.rollingUpdate")
        _int_or_percent(c, rolling.get("maxUnavailable"), "spec.updateStrategy.rollingUpdate.maxUnavailable")
    else:
        c.invalid(
            "spec.updateStrategy",
            GoText(json.dumps(strategy, sort_keys=True)),
            "must be 'RollingUpdate' or 'OnDelete'",
        )
    retention = _dict(spec.get("persistentVolumeClaimRetentionPolicy"))
    for key in ("whenDeleted", "whenScaled"):
        _one_of(
            c,
            retention,
            key,
            "spec.persistentVolumeClaimRetentionPolicy",
            ("Retain", "Delete"),
            required=False,
        )
    for key in ("replicas", "minReadySeconds", "revisionHistoryLimit"):
        _nonnegative(c, spec, key, "spec")
    _nonnegative(c, _dict(spec.get("ordinals")), "start", "spec.ordinals")
    _selector_matches_template(c, spec, "spec", "statefulset")
    # Containers may mount a volumeClaimTemplate by name: the controller adds that volume to
    # each pod, so count the claims as volumes here (upstream skips the template's volume check).
    template = spec.get("template")
    if isinstance(template, dict):
        claims = [
            {"name": name}
            for t in map(_dict, _list(spec.get("volumeClaimTemplates")))
            if (name := _dict(t.get("metadata")).get("name"))
        ]
        pod = _dict(template.get("spec"))
        template = {**template, "spec": {**pod, "volumes": [*_list(pod.get("volumes")), *claims]}}
    _pod_template(c, template, "spec.template", ("Always",), "StatefulSet")
    if old is not None:
        old_spec = _dict(old.get("spec"))
        allowed = {**old_spec, **{k: spec.get(k) for k in _STS_MUTABLE}}
        if _semantic(allowed) != _semantic(spec):
            c.forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', "
                "'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and "
                "'minReadySeconds' are forbidden",
            )


def _daemon_set(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    _selector_matches_template(c, spec, "spec", "daemonset")
    _pod_template(c, spec.get("template"), "spec.template", ("Always",), "DaemonSet")
    for key in ("minReadySeconds", "revisionHistoryLimit"):
        _nonnegative(c, spec, key, "spec")
    strategy = _dict(spec.get("updateStrategy"))
    kind = strategy.get("type")
    if kind == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if not isinstance(rolling, dict):
            c.required("spec.updateStrategy.rollingUpdate", "")
        else:
            path = "spec.updateStrategy.rollingUpdate"
            unavailable, surge = rolling.get("maxUnavailable"), rolling.get("maxSurge")
            for key, value in (("maxUnavailable", unavailable), ("maxSurge", surge)):
                _int_or_percent(c, value, f"{path}.{key}")
                _not_over_100_percent(c, value, f"{path}.{key}")
            has_unavailable = _int_or_percent_value(unavailable) not in (0, None)
            has_surge = _int_or_percent_value(surge) not in (0, None)
            if has_unavailable and has_surge:
                c.invalid(f"{path}.maxSurge", surge, "may not be set when maxUnavailable is non-zero")
            elif not has_unavailable and not has_surge:
                c.invalid(f"{path}.maxUnavailable", unavailable, "cannot be 0 when maxSurge is 0")
    elif kind != "OnDelete":
        c.not_supported(
            "spec.updateStrategy", GoText(json.dumps(strategy, sort_keys=True)), ("OnDelete", "RollingUpdate")
        )
    if old is not None:
        _selector_immutable(c, spec, _dict(old.get("spec")))


_JOB_RESTART_POLICIES = ("OnFailure", "Never")
_JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
_JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
# While a Job is suspended and has never started, these template fields may be edited.
_JOB_SCHEDULING_FIELDS = ("nodeSelector", "affinity", "tolerations", "schedulingGates")
# Upstream's caps (pkg/apis/batch/validation): they bound the length of completedIndexes and
# failedIndexes, and the work of matching policies.
_MAX_INDEXED_PARALLELISM = 100_000
_MAX_FAILED_INDEXES = 100_000
_COMPLETIONS_SOFT_LIMIT = 100_000
_PARALLELISM_LIMIT_HIGH_COMPLETIONS = 10_000
_MAX_FAILED_INDEXES_HIGH_COMPLETIONS = 10_000
_MAX_POD_FAILURE_POLICY_RULES = 20
_MAX_ON_EXIT_CODES_VALUES = 255
_MAX_ON_POD_CONDITIONS_PATTERNS = 20
_MAX_MANAGED_BY_LENGTH = 63
_MAX_SUCCEEDED_INDEXES_LENGTH = 64 * 1024
_MAX_SUCCESS_POLICY_RULES = 20
_POD_FAILURE_POLICY_ACTIONS = ("Count", "FailIndex", "FailJob", "Ignore")
_ON_EXIT_CODES_OPERATORS = ("In", "NotIn")
_CONDITION_STATUSES = ("False", "True", "Unknown")
_POD_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
_HTTP_PATH_FMT = r"[A-Za-z0-9/\-._~%!$&'()*+,;=:]+"
_HTTP_PATH_RE = re.compile(_HTTP_PATH_FMT)


def _go_list(values: Iterable[str]) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(go_quote(v) for v in values) + "]"


def _go_int32s(values: list[Any]) -> GoText:
    return GoText("[]int32{" + ", ".join(str(v) for v in values) + "}")


def _go_success_policy(policy: Obj) -> GoText:
    # Upstream prints the internal struct with %#v, where the optional fields are pointers
    # (addresses); their values are shown here instead.
    rules = []
    for rule in map(_dict, _list(policy.get("rules"))):
        indexes = rule.get("succeededIndexes")
        count = rule.get("succeededCount")
        rules.append(
            "batch.SuccessPolicyRule{"
            f"SucceededIndexes:{'(*string)(nil)' if indexes is None else go_quote(str(indexes))}, "
            f"SucceededCount:{'(*int32)(nil)' if count is None else count}}}"
        )
    return GoText("batch.SuccessPolicy{Rules:[]batch.SuccessPolicyRule{" + ", ".join(rules) + "}}")


def is_domain_prefixed_path(c: _Causes, path: str, value: str) -> None:
    """apimachinery IsDomainPrefixedPath: "acme.io/foo" (a DNS subdomain, '/', an HTTP path)."""
    if not value:
        c.required(path, "")
        return
    host, sep, rest = value.partition("/")
    if not sep or not host or not rest:
        c.invalid(path, value, 'must be a domain-prefixed path (such as "acme.io/foo")')
        return
    for msg in is_dns1123_subdomain(host):
        c.invalid(path, host, msg)
    if not _HTTP_PATH_RE.fullmatch(rest):
        c.invalid(path, rest, regex_error("Invalid path", _HTTP_PATH_FMT))


def _job_spec(c: _Causes, spec: Obj, path: str) -> None:
    """validateJobSpec: what a Job and a CronJob's job template share."""
    for key in (
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ):
        _nonnegative(c, spec, key, path)
    completions = spec.get("completions")
    per_index, max_failed = spec.get("backoffLimitPerIndex"), spec.get("maxFailedIndexes")
    if max_failed is not None and per_index is None:
        c.required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified")
    managed_by = spec.get("managedBy")
    if managed_by is not None:
        is_domain_prefixed_path(c, f"{path}.managedBy", str(managed_by))
        if len(str(managed_by).encode()) > _MAX_MANAGED_BY_LENGTH:
            c.too_long(f"{path}.managedBy", _MAX_MANAGED_BY_LENGTH)
    mode = spec.get("completionMode")
    indexed = mode == "Indexed"
    if mode is not None and mode not in ("NonIndexed", "Indexed"):
        c.not_supported(f"{path}.completionMode", mode, ("NonIndexed", "Indexed"))
    if indexed:
        _indexed_limits(c, spec, path)
    if mode is None or mode == "NonIndexed":
        if per_index is not None:
            c.invalid(f"{path}.backoffLimitPerIndex", per_index, "requires indexed completion mode")
        if max_failed is not None:
            c.invalid(f"{path}.maxFailedIndexes", max_failed, "requires indexed completion mode")
    if isinstance(spec.get("podFailurePolicy"), dict):
        _pod_failure_policy(c, spec, f"{path}.podFailurePolicy")
    success_policy = spec.get("successPolicy")
    if isinstance(success_policy, dict):
        if not indexed:
            c.invalid(
                f"{path}.successPolicy",
                _go_success_policy(success_policy),
                "requires indexed completion mode",
            )
        elif _is_int(completions):
            _success_policy(c, success_policy, completions, f"{path}.successPolicy")
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        allowed = ("Failed",) if spec.get("podFailurePolicy") is not None else _POD_REPLACEMENT_POLICIES
        if replacement not in allowed:
            c.not_supported(f"{path}.podReplacementPolicy", replacement, allowed)
    # The pod-level rule accepts Always; a Job's pods must end, so it is refused here.
    _pod_template(c, spec.get("template"), f"{path}.template", _POD_RESTART_POLICIES)
    restart = _dict(_dict(spec.get("template")).get("spec")).get("restartPolicy")
    restart_path = f"{path}.template.spec.restartPolicy"
    if restart in ("Always", "", None):
        c.required(restart_path, 'valid values: "OnFailure", "Never"')
    elif restart not in _JOB_RESTART_POLICIES:
        c.not_supported(restart_path, restart, _JOB_RESTART_POLICIES)
    elif spec.get("podFailurePolicy") is not None and restart != "Never":
        c.invalid(restart_path, restart, 'only "Never" is supported when podFailurePolicy is specified')
    if spec.get("manualSelector") is True:
        _selector_matches_template(c, spec, path, "job")
    elif isinstance(spec.get("selector"), dict):
        _label_selector(c, spec["selector"], f"{path}.selector")


def _indexed_limits(c: _Causes, spec: Obj, path: str) -> None:
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    per_index, max_failed = spec.get("backoffLimitPerIndex"), spec.get("maxFailedIndexes")
    if completions is None:
        c.required(f"{path}.completions", "when completion mode is Indexed")
    if _is_int(parallelism) and parallelism > _MAX_INDEXED_PARALLELISM:
        c.invalid(
            f"{path}.parallelism",
            parallelism,
            f"must be less than or equal to {_MAX_INDEXED_PARALLELISM} when completion mode is Indexed",
        )
    if _is_int(completions) and _is_int(max_failed) and max_failed > completions:
        c.invalid(f"{path}.maxFailedIndexes", max_failed, "must be less than or equal to completions")
    if _is_int(max_failed) and max_failed > _MAX_FAILED_INDEXES:
        c.invalid(
            f"{path}.maxFailedIndexes", max_failed, f"must be less than or equal to {_MAX_FAILED_INDEXES}"
        )
    if _is_int(completions) and completions > _COMPLETIONS_SOFT_LIMIT and per_index is not None:
        high = f"when completions are above {_COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
        if max_failed is None:
            c.required(
                f"{path}.maxFailedIndexes",
                f"must be specified when completions is above {_COMPLETIONS_SOFT_LIMIT}",
            )
        if _is_int(parallelism) and parallelism > _PARALLELISM_LIMIT_HIGH_COMPLETIONS:
            c.invalid(
                f"{path}.parallelism",
                parallelism,
                f"must be less than or equal to {_PARALLELISM_LIMIT_HIGH_COMPLETIONS} {high}",
            )
        if _is_int(max_failed) and max_failed > _MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
            c.invalid(
                f"{path}.maxFailedIndexes",
                max_failed,
                f"must be less than or equal to {_MAX_FAILED_INDEXES_HIGH_COMPLETIONS} {high}",
            )


def _pod_failure_policy(c: _Causes, spec: Obj, path: str) -> None:
    rules = _list(spec["podFailurePolicy"].get("rules"))
    if len(rules) > _MAX_POD_FAILURE_POLICY_RULES:
        c.too_many(f"{path}.rules", len(rules), _MAX_POD_FAILURE_POLICY_RULES)
    pod_spec = _dict(_dict(spec.get("template")).get("spec"))
    containers = {
        str(_dict(x).get("name"))
        for key in ("containers", "initContainers")
        for x in _list(pod_spec.get(key))
    }
    for i, rule in enumerate(map(_dict, rules)):
        at = f"{path}.rules[{i}]"
        action = rule.get("action")
        if not action:
            c.required(f"{at}.action", f"valid values: {_go_list(_POD_FAILURE_POLICY_ACTIONS)}")
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                c.invalid(f"{at}.action", action, "requires the backoffLimitPerIndex to be set")
        elif action not in _POD_FAILURE_POLICY_ACTIONS:
            c.not_supported(f"{at}.action", action, _POD_FAILURE_POLICY_ACTIONS)
        on_exit_codes, on_conditions = rule.get("onExitCodes"), _list(rule.get("onPodConditions"))
        if on_exit_codes is not None:
            _on_exit_codes(c, _dict(on_exit_codes), f"{at}.onExitCodes", containers)
        if on_conditions:
            _on_pod_conditions(c, on_conditions, f"{at}.onPodConditions")
        if on_exit_codes is not None and on_conditions:
            c.invalid_omitted(at, "specifying both OnExitCodes and OnPodConditions is not supported")
        if on_exit_codes is None and not on_conditions:
            c.invalid_omitted(at, "specifying one of OnExitCodes and OnPodConditions is required")


def _on_pod_conditions(c: _Causes, patterns: list[Any], path: str) -> None:
    if len(patterns) > _MAX_ON_POD_CONDITIONS_PATTERNS:
        c.too_many(path, len(patterns), _MAX_ON_POD_CONDITIONS_PATTERNS)
    for j, pattern in enumerate(map(_dict, patterns)):
        type_ = str(pattern.get("type") or "")
        for msg in is_qualified_name(type_):
            c.invalid(f"{path}[{j}].type", type_, msg)
        status = pattern.get("status")
        if not status:
            c.required(f"{path}[{j}].status", f"valid values: {_go_list(_CONDITION_STATUSES)}")
        elif status not in _CONDITION_STATUSES:
            c.not_supported(f"{path}[{j}].status", status, _CONDITION_STATUSES)


def _on_exit_codes(c: _Causes, req: Obj, path: str, containers: set[str]) -> None:
    operator = req.get("operator")
    if not operator:
        c.required(f"{path}.operator", f"valid values: {_go_list(_ON_EXIT_CODES_OPERATORS)}")
    elif operator not in _ON_EXIT_CODES_OPERATORS:
        c.not_supported(f"{path}.operator", operator, _ON_EXIT_CODES_OPERATORS)
    name = req.get("containerName")
    if name is not None and name not in containers:
        c.invalid(
            f"{path}.containerName",
            name,
            "must be one of the container or initContainer names in the pod template",
        )
    values = _list(req.get("values"))
    if not values:
        c.invalid(f"{path}.values", _go_int32s(values), "at least one value is required")
    elif len(values) > _MAX_ON_EXIT_CODES_VALUES:
        c.too_many(f"{path}.values", len(values), _MAX_ON_EXIT_CODES_VALUES)
    seen: set[Any] = set()
    for j, value in enumerate(values):
        if operator == "In" and value == 0:
            c.invalid(f"{path}.values[{j}]", value, "must not be 0 for the In operator")
        if value in seen:
            c.duplicate(f"{path}.values[{j}]", value)
        seen.add(value)
    if any(_is_int(a) and _is_int(b) and a > b for a, b in itertools.pairwise(values)):
        c.invalid(f"{path}.values", _go_int32s(values), "must be ordered")


def _success_policy(c: _Causes, policy: Obj, completions: int, path: str) -> None:
    rules = _list(policy.get("rules"))
    if not rules:
        c.required(
            f"{path}.rules", "at least one rules must be specified when the successPolicy is specified"
        )
    if len(rules) > _MAX_SUCCESS_POLICY_RULES:
        c.too_many(f"{path}.rules", len(rules), _MAX_SUCCESS_POLICY_RULES)
    for i, rule in enumerate(map(_dict, rules)):
        at = f"{path}.rules[{i}]"
        indexes, count = rule.get("succeededIndexes"), rule.get("succeededCount")
        if indexes is None and count is None:
            c.required(at, "at least one of succeededCount or succeededIndexes must be specified")
        total = 0
        if indexes is not None:
            if len(str(indexes).encode()) > _MAX_SUCCEEDED_INDEXES_LENGTH:
                c.too_long(f"{at}.succeededIndexes", _MAX_SUCCEEDED_INDEXES_LENGTH)
            parsed, error = indexes_format(str(indexes), completions)
            if error:
                c.invalid(f"{at}.succeededIndexes", indexes, f"error parsing succeededIndexes: {error}")
            total = sum(last - first + 1 for first, last in parsed)
        if count is not None:
            _nonnegative(c, rule, "succeededCount", at)
            if _is_int(count) and count > completions:
                c.invalid(
                    f"{at}.succeededCount",
                    count,
                    f"must be less than or equal to {completions} (the number of specified completions)",
                )
            if _is_int(count) and indexes is not None and count > total:
                c.invalid(
                    f"{at}.succeededCount",
                    count,
                    f"must be less than or equal to {total} "
                    "(the number of indexes in the specified succeededIndexes field)",
                )


_ATOI_RE = re.compile(r"[+-]?[0-9]+")


def _index_interval(text: str, completions: int) -> tuple[int, int]:
    """One "x" or "x-y" part of an index list, as upstream's parseIndexInterval reads it."""
    limits = text.split("-")
    if len(limits) > 2:
        raise ValueError(
            f"the fragment {go_quote(text)} violates the requirement that an index interval can have at most "
            "two parts separated by '-'"
        )
    bounds = []
    for limit in limits:
        if not _ATOI_RE.fullmatch(limit):
            raise ValueError(f"cannot convert string to integer for index: {go_quote(limit)}")
        if int(limit) >= completions:
            raise ValueError(f"too large index: {go_quote(limit)}")
        bounds.append(int(limit))
    if len(bounds) == 2 and bounds[0] >= bounds[1]:
        raise ValueError(f"non-increasing order, previous: {bounds[0]}, current: {bounds[1]}")
    return bounds[0], bounds[-1]


def indexes_format(text: str, completions: int) -> tuple[list[tuple[int, int]], str]:
    """Upstream's validateIndexesFormat: the intervals of "1,3-5,7" and "" or why it is invalid
    (each part below `completions`, in strictly increasing order)."""
    spans: list[tuple[int, int]] = []
    if not text:
        return spans, ""
    for part in text.split(","):
        try:
            first, last = _index_interval(part, completions)
        except ValueError as exc:
            return [], str(exc)
        if spans and spans[-1][1] >= first:
            return [], f"non-increasing order, previous: {spans[-1][1]}, current: {first}"
        spans.append((first, last))
    return spans, ""


def _failed_overlapping_completed(completed: str, failed: str, completions: int) -> str:
    """Why failedIndexes and completedIndexes share an index, or "" (unparsable parts skipped)."""

    def parts(text: str) -> list[tuple[int, int]]:
        out = []
        for part in text.split(",") if text else ():
            try:
                out.append(_index_interval(part, completions))
            except ValueError:
                continue
        return out

    done, bad = parts(completed), parts(failed)
    i = j = 0
    while i < len(done) and j < len(bad):
        (cx, cy), (fx, fy) = done[i], bad[j]
        if cx <= fy and fx <= cy:
            return f"failedIndexes and completedIndexes overlap at index: {max(cx, fx)}"
        if cx <= fx:
            i += 1
        else:
            j += 1
    return ""


def _generated_selector(c: _Causes, obj: Obj) -> None:
    """On create, a Job without a manual selector must carry the labels the server generated."""
    spec, meta = _dict(obj.get("spec")), _dict(obj.get("metadata"))
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    if not uid:
        c.required("metadata.uid", "")
    labels = _dict(_dict(_dict(spec.get("template")).get("metadata")).get("labels"))
    expected = {**dict.fromkeys(_JOB_UID_LABELS, uid), **dict.fromkeys(_JOB_NAME_LABELS, name)}
    for key in (*_JOB_UID_LABELS, *_JOB_NAME_LABELS):
        at = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            c.required(at, expected[key])
        elif labels[key] != expected[key]:
            c.invalid(at, go_string_map(labels), f"must be '{expected[key]}'")
    selector = spec["selector"]
    try:
        matches = label_selector_from_dict(_dict(selector)).matches(expected)
    except ValueError:
        return  # already reported by the selector's own validation
    if not matches:
        c.invalid("spec.selector", go_label_selector(_dict(selector)), "`selector` not auto-generated")


def _job(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    _job_spec(c, spec, "spec")
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed" and _is_int(completions) and completions > 0:
        # The controller names each pod's hostname "<job>-<index>": the last must be a DNS label.
        name = str(_dict(obj.get("metadata")).get("name") or "")
        hostname = f"{name}-{completions - 1}"
        if is_dns1123_label(hostname):
            c.invalid(
                "metadata.name", name, f"will not able to create pod with invalid DNS label: {hostname}"
            )
    if old is None:
        _generated_selector(c, obj)
        return
    old_spec = _dict(old.get("spec"))
    if spec.get("completionMode") == "Indexed" and completions is not None:
        # Elastic Indexed Jobs: completions may change, but only together with parallelism.
        if _semantic(completions) != _semantic(old_spec.get("completions")) and completions != spec.get(
            "parallelism"
        ):
            c.invalid("spec.completions", completions, "can only be modified in tandem with spec.parallelism")
    elif spec.get("completionMode") != "Indexed":
        c.immutable("spec.completions", completions, old_spec.get("completions"))
    if _semantic(spec.get("selector")) != _semantic(old_spec.get("selector")):
        c.invalid("spec.selector", go_label_selector(_dict(spec.get("selector"))), IMMUTABLE)
    for key in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
        c.immutable(f"spec.{key}", spec.get(key), old_spec.get(key))
    template, old_template = _dict(spec.get("template")), copy.deepcopy(_dict(old_spec.get("template")))
    never_started = old_spec.get("suspend") is True and not _dict(old.get("status")).get("startTime")
    if never_started:
        old_template["metadata"] = template.get("metadata")
        old_pod_spec = _dict(old_template.setdefault("spec", {}))
        for key in _JOB_SCHEDULING_FIELDS:
            old_pod_spec[key] = _dict(template.get("spec")).get(key)
    c.immutable("spec.template", template, old_template)


# --- Job status (the /status subresource) ---------------------------------------------------


def _condition_true(status: Obj, type_: str) -> bool:
    return any(
        _dict(cond).get("type") == type_ and _dict(cond).get("status") == "True"
        for cond in _list(status.get("conditions"))
    )


def _condition_status(status: Obj, type_: str) -> str | None:
    for cond in _list(status.get("conditions")):
        if _dict(cond).get("type") == type_:
            status_: str | None = _dict(cond).get("status")
            return status_
    return None


def _job_finished(status: Obj) -> bool:
    return _condition_true(status, "Complete") or _condition_true(status, "Failed")


def _time(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _same_time(a: Any, b: Any) -> bool:
    ta, tb = _time(a), _time(b)
    return ta == tb if ta is not None and tb is not None else a == b


def _go_time(value: Any) -> GoText:
    """metav1.Time as Go's Time.String prints it."""
    moment = _time(value)
    if moment is None:
        return GoText(go_quote(str(value)))
    text = moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
    if moment.microsecond:
        text += f".{moment.microsecond:06d}".rstrip("0")
    return GoText(f"{text} +0000 UTC")


def _go_uncounted(uncounted: Obj) -> GoText:
    def uids(key: str) -> str:
        values = uncounted.get(key)
        if values is None:
            return "[]types.UID(nil)"
        return "[]types.UID{" + ", ".join(go_quote(str(v)) for v in _list(values)) + "}"

    return GoText(f"batch.UncountedTerminatedPods{{Succeeded:{uids('succeeded')}, Failed:{uids('failed')}}}")


def _job_status(c: _Causes, obj: Obj, old: Obj) -> None:
    """A /status write: ValidateJobUpdateStatus with the options 1.32's status strategy picks
    (JobManagedBy on): most rules apply only when the fields they look at changed, so a status
    that was already wrong does not block unrelated updates."""
    spec, status, old_status = _dict(obj.get("spec")), _dict(obj.get("status")), _dict(old.get("status"))
    for key in ("active", "succeeded", "failed", "ready", "terminating"):
        _nonnegative(c, status, key, "status")
    uncounted = status.get("uncountedTerminatedPods")
    seen: set[str] = set()
    for key in ("succeeded", "failed"):
        for i, uid in enumerate(_list(_dict(uncounted).get(key))):
            at = f"status.uncountedTerminatedPods.{key}[{i}]"
            if not uid:
                c.invalid(at, uid, "must not be empty")
            elif uid in seen:
                c.duplicate(at, uid)
            else:
                seen.add(str(uid))
    indexed = spec.get("completionMode") == "Indexed"
    complete, failed = _condition_true(status, "Complete"), _condition_true(status, "Failed")
    failure_target = _condition_true(status, "FailureTarget")
    criteria_met = _condition_true(status, "SuccessCriteriaMet")
    finished = complete or failed
    complete_changed = complete != _condition_true(old_status, "Complete")
    failed_changed = failed != _condition_true(old_status, "Failed")
    target_changed = failure_target != _condition_true(old_status, "FailureTarget")
    finished_changed = finished != _job_finished(old_status)
    completed_text = str(status.get("completedIndexes") or "")
    completed_changed = completed_text != str(old_status.get("completedIndexes") or "")
    failed_indexes = status.get("failedIndexes")
    failed_indexes_changed = failed_indexes != old_status.get("failedIndexes")
    active_changed = status.get("active", 0) != old_status.get("active", 0)
    start, completion = status.get("startTime"), status.get("completionTime")
    start_changed = not _same_time(start, old_status.get("startTime"))
    completion_changed = not _same_time(completion, old_status.get("completionTime"))
    uncounted_changed = _semantic(uncounted) != _semantic(old_status.get("uncountedTerminatedPods"))
    conditions = "status.conditions"

    if (complete_changed or failed_changed) and complete and failed:
        c.invalid_omitted(conditions, "cannot set Complete=True and Failed=true conditions")
    if (complete_changed or target_changed) and complete and failure_target:
        c.invalid_omitted(conditions, "cannot set Complete=True and FailureTarget=true conditions")
    if (complete_changed or completion_changed) and completion is not None and not complete:
        c.invalid(
            "status.completionTime",
            _go_time(completion),
            "cannot set completionTime when there is no Complete=True condition",
        )
    if (complete_changed or completion_changed) and completion is None and complete:
        c.required("status.completionTime", "completionTime is required for Complete jobs")
    started, ended = _time(start), _time(completion)
    if (start_changed or completion_changed) and started and ended and ended < started:
        c.invalid(
            "status.completionTime", _go_time(completion), "completionTime cannot be set before startTime"
        )
    active = status.get("active", 0)
    if (finished_changed or active_changed) and _is_int(active) and active > 0 and finished:
        c.invalid("status.active", active, "active>0 is invalid for finished job")
    if (finished_changed or start_changed) and start is None and finished:
        c.required("status.startTime", "startTime is required for finished job")
    pending = _list(_dict(uncounted).get("succeeded")) + _list(_dict(uncounted).get("failed"))
    if (finished_changed or uncounted_changed) and finished and pending:
        c.invalid(
            "status.uncountedTerminatedPods",
            _go_uncounted(_dict(uncounted)),
            "uncountedTerminatedPods needs to be empty for finished job",
        )
    completions = spec.get("completions")
    if completed_changed and _is_int(completions):
        _, error = indexes_format(completed_text, completions)
        if error:
            c.invalid("status.completedIndexes", completed_text, f"error parsing completedIndexes: {error}")
    if (
        failed_indexes_changed
        and _is_int(completions)
        and spec.get("backoffLimitPerIndex") is not None
        and failed_indexes is not None
    ):
        _, error = indexes_format(str(failed_indexes), completions)
        if error:
            c.invalid("status.failedIndexes", failed_indexes, f"error parsing failedIndexes: {error}")
    if completed_changed and completed_text and not indexed:
        c.invalid(
            "status.completedIndexes",
            completed_text,
            "cannot set non-empty completedIndexes when non-indexed completion mode",
        )
    if failed_indexes_changed and spec.get("backoffLimitPerIndex") is None and failed_indexes is not None:
        c.invalid(
            "status.failedIndexes",
            failed_indexes,
            "cannot set non-null failedIndexes when backoffLimitPerIndex is null",
        )
    overlap = (
        _failed_overlapping_completed(completed_text, str(failed_indexes), completions)
        if (failed_indexes_changed or completed_changed)
        and _is_int(completions)
        and failed_indexes is not None
        else ""
    )
    if overlap:
        c.invalid("status.failedIndexes", failed_indexes, overlap)
    if criteria_met and failed:
        c.invalid_omitted(conditions, "cannot set SuccessCriteriaMet=True and Failed=true conditions")
    if criteria_met and failure_target:
        c.invalid_omitted(conditions, "cannot set SuccessCriteriaMet=True and FailureTarget=true conditions")
    if spec.get("successPolicy") is not None and not criteria_met and complete:
        c.invalid_omitted(
            conditions, "cannot set Complete=True for Job with SuccessPolicy unless SuccessCriteriaMet=True"
        )
    # The rules about how the status moves from the old one.
    for type_ in ("Failed", "Complete", "FailureTarget"):
        if _condition_true(old_status, type_) and not _condition_true(status, type_):
            c.invalid_omitted(conditions, f"cannot disable the terminal {type_}=True condition")
    for key in ("failed", "succeeded"):
        new_count, old_count = status.get(key, 0), old_status.get(key, 0)
        may_decrease = key == "succeeded" and indexed and completions == spec.get("parallelism")
        if _is_int(new_count) and _is_int(old_count) and new_count < old_count and not may_decrease:
            c.invalid(f"status.{key}", new_count, f"cannot decrease the {key} counter")
    old_completion = old_status.get("completionTime")
    if completion is not None and old_completion is not None and completion_changed:
        c.invalid("status.completionTime", _go_time(completion), "completionTime cannot be mutated")
    # Resuming (Suspended True -> False) restarts the clock: 1.32.10's fix (kubernetes#135128)
    # of the rule, which before it refused every resume of a Job that had once started.
    resuming = _condition_true(old_status, "Suspended") and _condition_status(status, "Suspended") == "False"
    if (
        old_status.get("startTime") is not None
        and start_changed
        and spec.get("suspend") is not True
        and not resuming
    ):
        c.required("status.startTime", "startTime cannot be removed for unsuspended job")
    if _condition_true(old_status, "SuccessCriteriaMet") and not criteria_met:
        c.invalid_omitted(conditions, "cannot disable the SuccessCriteriaMet=True condition")
    if (
        _condition_true(old_status, "Complete")
        and not _condition_true(old_status, "SuccessCriteriaMet")
        and criteria_met
    ):
        c.invalid_omitted(
            conditions, "cannot set SuccessCriteriaMet=True for Job already has Complete=true conditions"
        )


def cron_schedule_error(schedule: str) -> str | None:
    """Why robfig/cron's ParseStandard refuses a schedule (its message), or None."""
    try:
        cron.parse_standard(schedule)
    except cron.ParseError as exc:
        return str(exc)
    return None


# One IANA name component (upstream validTimeZoneCharacters); digits and + for legacy names.
_TIME_ZONE_PART = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


def _time_zone(c: _Causes, zone: object) -> None:
    """spec.timeZone: an IANA zone the tz database knows (upstream validateTimeZone)."""
    if zone is None:
        return
    text = str(zone)
    if not text:
        c.invalid("spec.timeZone", zone, "timeZone must be nil or non-empty string")
        return
    for part in text.split("/"):
        if part in (".", "..") or part.startswith("-") or not _TIME_ZONE_PART.fullmatch(part):
            c.invalid("spec.timeZone", zone, f"unknown time zone {text}")
            return
    if text.lower() == "local":
        c.invalid(
            "spec.timeZone",
            zone,
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        )
    try:
        cron.load_location(text)
    except cron.ParseError as exc:
        c.invalid("spec.timeZone", zone, str(exc))


def _cron_job(c: _Causes, obj: Obj, old: Obj | None) -> None:
    name = str(_dict(obj.get("metadata")).get("name") or "")
    # The controller appends an 11-character suffix and job names end up as 63-character labels.
    if len(name) > 52:
        c.invalid("metadata.name", name, "must be no more than 52 characters")
    spec = _dict(obj.get("spec"))
    schedule = spec.get("schedule")
    if not schedule:
        c.required("spec.schedule", "")
    else:
        if err := cron_schedule_error(str(schedule)):
            c.invalid("spec.schedule", schedule, err)
        if "TZ" in str(schedule):
            detail = (
                "cannot use both timeZone field and TZ or CRON_TZ in schedule"
                if spec.get("timeZone")
                else "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
            )
            c.invalid("spec.schedule", schedule, detail)
    _time_zone(c, spec.get("timeZone"))
    _one_of(c, spec, "concurrencyPolicy", "spec", ("Allow", "Forbid", "Replace"))
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        _nonnegative(c, spec, key, "spec")
    job_template = _dict(spec.get("jobTemplate"))
    _labels(c, _dict(job_template.get("metadata")).get("labels"), "spec.jobTemplate.metadata.labels")
    _job_spec(c, _dict(job_template.get("spec")), "spec.jobTemplate.spec")


def _pod(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    _pod_spec(c, spec, "spec", _POD_RESTART_POLICIES)
    if old is not None:
        _pod_update(c, spec, _dict(old.get("spec")))


def _pod_template_object(c: _Causes, obj: Obj, old: Obj | None) -> None:
    _pod_template(c, obj.get("template"), "template", _POD_RESTART_POLICIES)


# --- services and other kinds -------------------------------------------------------------------

_SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")


def _service(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    svc_type = spec.get("type")
    _one_of(c, spec, "type", "spec", _SERVICE_TYPES)
    _one_of(c, spec, "sessionAffinity", "spec", ("ClientIP", "None"))
    ports = _list(spec.get("ports"))
    if svc_type == "ExternalName":
        if not spec.get("externalName"):
            c.required("spec.externalName", "")
        else:
            for msg in is_dns1123_subdomain(str(spec["externalName"]).rstrip(".")):
                c.invalid("spec.externalName", spec["externalName"], msg)
    elif not ports and spec.get("clusterIP") != "None":
        c.required("spec.ports", "")
    names: set[str] = set()
    for i, port in enumerate(map(_dict, ports)):
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
        _one_of(c, port, "protocol", at, _PROTOCOLS)
        target = port.get("targetPort")
        if isinstance(target, str):
            for msg in is_valid_port_name(target):
                c.invalid(f"{at}.targetPort", target, msg)
        elif target is not None:
            _port_number(c, target, f"{at}.targetPort")
    _node_ports(c, spec, ports)
    _labels(c, spec.get("selector"), "spec.selector")
    if old is not None:
        old_spec = _dict(old.get("spec"))
        if "ExternalName" not in (svc_type, old_spec.get("type")) and old_spec.get("clusterIP"):
            c.immutable("spec.clusterIP", spec.get("clusterIP", ""), old_spec.get("clusterIP"))


def _node_ports(c: _Causes, spec: Obj, ports: list[Any]) -> None:
    """Upstream ValidateService's nodePort rules: none on a ClusterIP Service, each valid, and
    no two ports with the same nodePort and protocol."""
    seen: set[tuple[Any, Any]] = set()
    for i, port in enumerate(map(_dict, ports)):
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


def _node(c: _Causes, obj: Obj, old: Obj | None) -> None:
    """Upstream ValidateNode's and ValidateNodeUpdate's podCIDRs rules: valid CIDRs, at most one
    per family, no duplicate, and no change once set (the node IPAM controller sets them once)."""
    cidrs = _list(_dict(obj.get("spec")).get("podCIDRs"))
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
        before = _list(_dict(old.get("spec")).get("podCIDRs"))
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


def validate_non_special_ip(c: _Causes, value: str, path: str) -> None:
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


def _endpoint_address(c: _Causes, address: Obj, path: str) -> None:
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


def _endpoint_port(c: _Causes, port: Obj, require_name: bool, path: str) -> None:
    name = port.get("name")
    if require_name and not name:
        c.required(f"{path}.name", "")
    elif name:
        for msg in is_dns1123_label(str(name)):
            c.invalid(f"{path}.name", name, msg)
    _port_number(c, port.get("port"), f"{path}.port")
    _one_of(c, port, "protocol", path, _PROTOCOLS)
    app_protocol = port.get("appProtocol")
    if app_protocol is not None:
        for msg in is_qualified_name(str(app_protocol)):
            c.invalid(f"{path}.appProtocol", app_protocol, msg)


def _endpoints(c: _Causes, obj: Obj, old: Obj | None) -> None:
    """Upstream ValidateEndpoints / ValidateEndpointsUpdate (the subsets; metadata is common)."""
    for i, subset in enumerate(map(_dict, _list(obj.get("subsets")))):
        at = f"subsets[{i}]"
        ready = _list(subset.get("addresses"))
        not_ready = _list(subset.get("notReadyAddresses"))
        if not ready and not not_ready:
            c.required(at, "must specify `addresses` or `notReadyAddresses`")
        for j, address in enumerate(map(_dict, ready)):
            _endpoint_address(c, address, f"{at}.addresses[{j}]")
        for j, address in enumerate(map(_dict, not_ready)):
            _endpoint_address(c, address, f"{at}.notReadyAddresses[{j}]")
        ports = _list(subset.get("ports"))
        for j, port in enumerate(map(_dict, ports)):
            _endpoint_port(c, port, len(ports) > 1, f"{at}.ports[{j}]")


def _pod_disruption_budget(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        c.invalid(
            "spec",
            GoText(json.dumps(spec, sort_keys=True)),
            "minAvailable and maxUnavailable cannot be both set",
        )
    for key in ("minAvailable", "maxUnavailable"):
        _int_or_percent(c, spec.get(key), f"spec.{key}")
        _not_over_100_percent(c, spec.get(key), f"spec.{key}")
    if isinstance(spec.get("selector"), dict):
        _label_selector(c, spec["selector"], "spec.selector")


def _horizontal_pod_autoscaler(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    ref = _dict(spec.get("scaleTargetRef"))
    for key in ("kind", "name"):
        if not ref.get(key):
            c.required(f"spec.scaleTargetRef.{key}", "")
    low, high = spec.get("minReplicas"), spec.get("maxReplicas")
    if low is not None and (not _is_int(low) or low < 1):
        c.invalid("spec.minReplicas", low, "must be greater than or equal to 1")
    if not _is_int(high) or high < 1:
        c.invalid("spec.maxReplicas", high, "must be greater than 0")
    elif _is_int(low) and high < low:
        c.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`")


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


def _data_keys(c: _Causes, obj: Obj, fields: tuple[str, ...]) -> None:
    seen: set[str] = set()
    for name in fields:
        for key in sorted(_dict(obj.get(name))):
            for msg in is_config_map_key(key):
                c.invalid(f"{name}[{key}]", key, msg)
            if key in seen:
                c.invalid(f"{name}[{key}]", key, "duplicate of key present in another data field")
            seen.add(key)


def _immutable_data(c: _Causes, obj: Obj, old: Obj | None, fields: tuple[str, ...]) -> None:
    if old is None or old.get("immutable") is not True:
        return
    if obj.get("immutable") is not True:
        c.forbidden("immutable", "field is immutable when `immutable` is set")
    for name in fields:
        if _semantic(obj.get(name)) != _semantic(old.get(name)):
            c.forbidden(name, "field is immutable when `immutable` is set")


def _config_map(c: _Causes, obj: Obj, old: Obj | None) -> None:
    _data_keys(c, obj, ("data", "binaryData"))
    _immutable_data(c, obj, old, ("data", "binaryData"))


SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
SERVICE_ACCOUNT_NAME_KEY = "kubernetes.io/service-account.name"


def _secret(c: _Causes, obj: Obj, old: Obj | None) -> None:
    # Upstream ValidateSecret: a token Secret must say whose token it holds.
    if obj.get("type") == SERVICE_ACCOUNT_TOKEN and not _dict(
        _dict(obj.get("metadata")).get("annotations")
    ).get(SERVICE_ACCOUNT_NAME_KEY):
        c.required(f"metadata.annotations[{SERVICE_ACCOUNT_NAME_KEY}]")
    _data_keys(c, obj, ("data",))
    _immutable_data(c, obj, old, ("data",))
    if old is not None:
        c.immutable("type", obj.get("type"), old.get("type"))


def _custom_resource_definition(c: _Causes, obj: Obj, old: Obj | None) -> None:
    spec = _dict(obj.get("spec"))
    expected = f"{_dict(spec.get('names')).get('plural', '')}.{spec.get('group', '')}"
    name = _dict(obj.get("metadata")).get("name")
    if name and name != expected:
        c.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group')


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


def _quota_quantities(c: _Causes, values: Any, path: str) -> None:
    for name, value in _dict(values).items():
        try:
            amount = quantity.parse(value)
        except quantity.QuantityError as exc:
            c.invalid(f"{path}[{name}]", value, str(exc))
            continue
        if amount.sign() < 0:
            c.invalid(f"{path}[{name}]", str(amount), "must be greater than or equal to 0")
        if name in _INTEGER_QUOTA_RESOURCES and amount.milli_value() % 1000:
            c.invalid(f"{path}[{name}]", str(amount), "must be an integer")


def _resource_quota(c: _Causes, obj: Obj, old: Obj | None) -> None:
    """Upstream ValidateResourceQuota(Update): quantities, and which scopes go with which resources."""
    spec = _dict(obj.get("spec"))
    _quota_quantities(c, spec.get("hard"), "spec.hard")
    status = _dict(obj.get("status"))
    _quota_quantities(c, status.get("hard"), "status.hard")
    _quota_quantities(c, status.get("used"), "status.used")
    hard = sorted(_dict(spec.get("hard")))
    scopes = [s for s in _list(spec.get("scopes")) if isinstance(s, str)]
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
        for raw in _list(selector.get("matchExpressions")):
            req = _dict(raw)
            name_of_scope, operator, values = (
                req.get("scopeName"),
                req.get("operator"),
                _list(req.get("values")),
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
        old_scopes = set(_list(_dict(old.get("spec")).get("scopes")))
        if old_scopes != set(scopes):
            c.invalid("spec.scopes", scopes, IMMUTABLE)


# --- discovery.k8s.io (pkg/apis/discovery/validation) ---------------------------------------------

_ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
_SLICE_MAX_ENDPOINTS = 1000
_SLICE_MAX_ADDRESSES = 100
_SLICE_MAX_PORTS = 20000
_SLICE_MAX_ZONE_HINTS = 8
_SLICE_MAX_TOPOLOGY_LABELS = 16


def _fqdn(c: _Causes, value: str, path: str) -> None:
    """upstream IsFullyQualifiedDomainName (an FQDN EndpointSlice's addresses)."""
    if not value:
        c.required(path, "")
        return
    name = value.removesuffix(".")
    errs = is_dns1123_subdomain(name)
    if errs:
        c.invalid(path, name, ",".join(errs))
        return
    labels = name.split(".")
    if len(labels) < 2:
        c.invalid(path, name, "should be a domain with at least two segments separated by dots")
        return
    for label in labels:
        errs = is_dns1123_label(label)
        if errs:
            c.invalid(path, label, ",".join(errs))
            return


def _slice_address(c: _Causes, address: str, address_type: str, path: str) -> None:
    if address_type in ("IPv4", "IPv6"):
        ip = endpointutil.parse_ip(address)
        if ip is None or (ip.version == 4) != (address_type == "IPv4"):
            c.invalid(path, address, f"must be a valid {address_type} address")
        else:
            validate_non_special_ip(c, address, path)
    elif address_type == "FQDN":
        _fqdn(c, address, path)
    # Other (deprecated or unknown) types' addresses are not checked, as upstream.


def _slice_endpoint(c: _Causes, ep: Obj, address_type: str, path: str) -> None:
    addresses = _list(ep.get("addresses"))
    if not addresses:
        c.required(f"{path}.addresses", "must contain at least 1 address")
    elif len(addresses) > _SLICE_MAX_ADDRESSES:
        c.too_many(f"{path}.addresses", len(addresses), _SLICE_MAX_ADDRESSES)
    for i, address in enumerate(addresses):
        _slice_address(c, str(address), address_type, f"{path}.addresses[{i}]")
    node_name = ep.get("nodeName")
    if node_name is not None:
        for msg in is_dns1123_subdomain(str(node_name)):
            c.invalid(f"{path}.nodeName", node_name, msg)
    topology = _dict(ep.get("deprecatedTopology"))
    if len(topology) > _SLICE_MAX_TOPOLOGY_LABELS:
        c.too_many(f"{path}.deprecatedTopology", len(topology), _SLICE_MAX_TOPOLOGY_LABELS)
    _labels(c, topology, f"{path}.deprecatedTopology")
    hostname = ep.get("hostname")
    if hostname is not None:
        for msg in is_dns1123_label(str(hostname)):
            c.invalid(f"{path}.hostname", hostname, msg)
    hints = ep.get("hints")
    if hints is not None:
        zones = _list(_dict(hints).get("forZones"))
        if len(zones) > _SLICE_MAX_ZONE_HINTS:
            c.too_many(f"{path}.hints.forZones", len(zones), _SLICE_MAX_ZONE_HINTS)
            return
        seen: set[str] = set()
        for i, zone in enumerate(zones):
            name = str(_dict(zone).get("name") or "")
            at = f"{path}.hints.forZones[{i}].name"
            if name in seen:
                c.duplicate(at, name)
            seen.add(name)
            for msg in is_label_value(name):
                c.invalid(at, name, msg)


def _slice_port(c: _Causes, port: Obj, names: set[str], path: str) -> None:
    name = str(port.get("name") or "")
    if name:
        for msg in is_dns1123_label(name):
            c.invalid(f"{path}.name", name, msg)
    if name in names:
        c.duplicate(f"{path}.name", name)
    names.add(name)
    protocol = port.get("protocol")
    if protocol is None:
        c.required(f"{path}.protocol", "")
    elif protocol not in _PROTOCOLS:
        c.not_supported(f"{path}.protocol", protocol, _PROTOCOLS)
    app_protocol = port.get("appProtocol")
    if app_protocol is not None:
        for msg in is_qualified_name(str(app_protocol)):
            c.invalid(f"{path}.appProtocol", app_protocol, msg)


def _endpoint_slice(c: _Causes, obj: Obj, old: Obj | None) -> None:
    """upstream ValidateEndpointSlice(Create/Update): addressType required, supported and
    immutable; 1..100 addresses per endpoint, valid for the address type; at most 1,000
    endpoints and 20,000 ports; ports, hostnames, node names and zone hints well-formed."""
    address_type = str(obj.get("addressType") or "")
    if not address_type:
        c.required("addressType", "")
    elif address_type not in _ADDRESS_TYPES:
        c.not_supported("addressType", address_type, _ADDRESS_TYPES)
    endpoints = _list(obj.get("endpoints"))
    if len(endpoints) > _SLICE_MAX_ENDPOINTS:
        c.too_many("endpoints", len(endpoints), _SLICE_MAX_ENDPOINTS)
    else:
        for i, ep in enumerate(endpoints):
            _slice_endpoint(c, _dict(ep), address_type, f"endpoints[{i}]")
    ports = _list(obj.get("ports"))
    if len(ports) > _SLICE_MAX_PORTS:
        c.too_many("ports", len(ports), _SLICE_MAX_PORTS)
    else:
        names: set[str] = set()
        for i, port in enumerate(ports):
            _slice_port(c, _dict(port), names, f"ports[{i}]")
    if old is not None:
        c.immutable("addressType", address_type, old.get("addressType"))


_Validator = Callable[[_Causes, Obj, Obj | None], None]
_VALIDATORS: dict[tuple[str, str], _Validator] = {
    ("", "Pod"): _pod,
    ("", "PodTemplate"): _pod_template_object,
    ("", "ReplicationController"): _replication_controller,
    ("", "Service"): _service,
    ("", "Node"): _node,
    ("", "Endpoints"): _endpoints,
    ("", "ConfigMap"): _config_map,
    ("", "Secret"): _secret,
    ("", "ResourceQuota"): _resource_quota,
    ("apps", "Deployment"): _deployment,
    ("apps", "ReplicaSet"): _replica_set,
    ("apps", "StatefulSet"): _stateful_set,
    ("apps", "DaemonSet"): _daemon_set,
    ("batch", "Job"): _job,
    ("batch", "CronJob"): _cron_job,
    ("policy", "PodDisruptionBudget"): _pod_disruption_budget,
    ("autoscaling", "HorizontalPodAutoscaler"): _horizontal_pod_autoscaler,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _custom_resource_definition,
    ("discovery.k8s.io", "EndpointSlice"): _endpoint_slice,
}


# Kinds whose /status writes have rules of their own; their spec (copied from the stored
# object) is then not validated again, as upstream's status strategies do.
_STATUS_VALIDATORS: dict[tuple[str, str], Callable[[_Causes, Obj, Obj], None]] = {
    ("batch", "Job"): _job_status,
}


def validate(
    group: str, kind: str, obj: dict[str, Any], old: dict[str, Any] | None, subresource: str = ""
) -> list[Cause]:
    """Every reason `obj` (stored version, defaulted) may not be written; [] when it may.

    `old` is the stored object on update and None on create; `subresource` is "status" for a
    write through /status.
    """
    c = _Causes()
    meta = _dict(obj.get("metadata"))
    _metadata(c, group, kind, meta)
    if old is not None:
        _metadata_update(c, meta, _dict(old.get("metadata")))
    status_validator = _STATUS_VALIDATORS.get((group, kind)) if subresource == "status" else None
    if status_validator is not None and old is not None:
        status_validator(c, obj, old)
        return list(c)
    validator = _VALIDATORS.get((group, kind))
    if validator is not None:
        validator(c, obj, old)
    return list(c)


# --- request options (apimachinery pkg/apis/meta/v1/validation) ---------------------------------

FIELD_MANAGER_MAX_LENGTH = 128
FIELD_VALIDATION_VALUES = ("", "Ignore", "Strict", "Warn")


def _dry_run(c: _Causes, dry_run: list[str]) -> None:
    if any(v != "All" for v in dry_run):
        c.not_supported("dryRun", GoText("[]string{" + ", ".join(map(go_quote, dry_run)) + "}"), ["All"])


def write_options(dry_run: list[str], field_manager: str, field_validation: str) -> list[Cause]:
    """ValidateCreateOptions and ValidateUpdateOptions: the query of a create or an update."""
    c = _Causes()
    if len(field_manager) > FIELD_MANAGER_MAX_LENGTH:
        c.too_long("fieldManager", FIELD_MANAGER_MAX_LENGTH)
    position = 0
    for ch in field_manager:
        if not ch.isprintable():
            c.invalid(
                "fieldManager", field_manager, f"invalid character U+{ord(ch):04X} (at position {position})"
            )
        position += len(ch.encode("utf-8", "surrogatepass"))  # Go counts bytes
    _dry_run(c, dry_run)
    if field_validation not in FIELD_VALIDATION_VALUES:
        c.not_supported("fieldValidation", field_validation, FIELD_VALIDATION_VALUES)
    return c


def patch_options(
    dry_run: list[str], field_manager: str, field_validation: str, *, apply: bool, force: bool
) -> list[Cause]:
    """ValidatePatchOptions: `force` belongs to apply patches, which must name their field manager."""
    c = _Causes()
    if not apply and force:
        c.forbidden("force", "may not be specified for non-apply patch")
    if apply and not field_manager:
        c.required("fieldManager", "is required for apply patch")
    return c + write_options(dry_run, field_manager, field_validation)


def delete_options(dry_run: list[str]) -> list[Cause]:
    """The dryRun part of ValidateDeleteOptions (`operations.delete` checks the propagation policy)."""
    c = _Causes()
    _dry_run(c, dry_run)
    return c
