"""Validation of apimachinery's meta/v1 parts: object names and metadata, label selectors, write options.

- `validate_metadata` and `validate_metadata_update` check every object's metadata (upstream's
  ValidateObjectMeta and ValidateObjectMetaUpdate) with its kind's name rule: Namespaces are
  DNS-1123 labels, Services DNS-1035 labels, RBAC objects and CSRs path segments, the rest
  DNS-1123 subdomains.
- `validate_labels`, `validate_annotations`, `validate_label_selector` and
  `validate_selector_matches_template` check labels, annotations, a LabelSelector, and a
  workload's selector against its pod template.
- `write_options`, `patch_options` and `delete_options` check the query of a write (upstream's
  Validate{Create,Update,Patch,Delete}Options).

Callers: the dispatch in `validation/__init__.py` (metadata), the group modules (labels and
selectors), `server` (options).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kcm_shared.apimachinery.selectors import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    label_selector_from_dict,
    max_len_error,
    regex_error,
)

from kcm_apiserver.registry import BUILTIN

from .fielderrors import (
    IMMUTABLE,
    Cause,
    Causes,
    GoText,
    Obj,
    as_dict,
    as_list,
    go_label_selector,
    go_quote,
    go_string_map,
    validate_nonnegative,
)

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


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
    # Only the path-segment rule here: the name must also be `<version>.<group>` of the spec
    # (validation/apiregistration).
    ("apiregistration.k8s.io", "APIService"): is_path_segment_name,
}
_NAMESPACED = {(rt.group, rt.kind): rt.namespaced for rt in BUILTIN}


def _as_prefix(name: str) -> str:
    # A generateName prefix may end in '-': upstream swaps the tail for a letter before checking.
    return name[:-2] + "a" if len(name) > 1 and name.endswith("-") else name


# --- metadata -----------------------------------------------------------------------------------


def validate_labels(c: Causes, labels: Any, path: str) -> None:
    """A label map: qualified-name keys, label-value values (upstream ValidateLabels)."""
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


def validate_annotations(c: Causes, annotations: Any, path: str) -> None:
    """An annotation map: qualified-name keys, at most 256 KiB in all (upstream ValidateAnnotations)."""
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


def _owner_references(c: Causes, refs: Any, path: str) -> None:
    first_controller = ""
    for ref in map(as_dict, as_list(refs)):
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


def validate_metadata(c: Causes, group: str, kind: str, meta: Obj) -> None:
    """Any object's metadata, its name checked by its kind's rule."""
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
    validate_nonnegative(c, meta, "generation", "metadata")
    validate_labels(c, meta.get("labels"), "metadata.labels")
    validate_annotations(c, meta.get("annotations"), "metadata.annotations")
    _owner_references(c, meta.get("ownerReferences"), "metadata.ownerReferences")


def validate_metadata_update(c: Causes, meta: Obj, old_meta: Obj) -> None:
    """Name, namespace and uid never change once set."""
    for key in ("name", "namespace", "uid"):
        if old_meta.get(key) and meta.get(key) != old_meta.get(key):
            c.invalid(f"metadata.{key}", meta.get(key, ""), IMMUTABLE)


# --- label selectors ----------------------------------------------------------------------------


def validate_label_selector(c: Causes, sel: Obj, path: str) -> None:
    """Structure of a metav1.LabelSelector (upstream ValidateLabelSelector)."""
    validate_labels(c, sel.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(map(as_dict, as_list(sel.get("matchExpressions")))):
        at = f"{path}.matchExpressions[{i}]"
        op, values = expr.get("operator"), as_list(expr.get("values"))
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


def validate_selector_matches_template(
    c: Causes, spec: Obj, base: str, what: str, *, required: bool = True, allow_empty: bool = False
) -> None:
    """A workload's selector: present, valid, non-empty (unless `allow_empty`: a Job's) and
    selecting its own pod template."""
    sel = spec.get("selector")
    if sel is None:
        if required:
            c.required(f"{base}.selector", "")
        return
    if not isinstance(sel, dict):
        c.invalid(f"{base}.selector", sel, "must be a label selector")
        return
    before = len(c)
    validate_label_selector(c, sel, f"{base}.selector")
    if not allow_empty and not sel.get("matchLabels") and not sel.get("matchExpressions"):
        c.invalid(f"{base}.selector", go_label_selector(sel), f"empty selector is invalid for {what}")
    elif len(c) == before:
        labels = as_dict(as_dict(spec.get("template")).get("metadata")).get("labels")
        if not label_selector_from_dict(sel).matches(as_dict(labels)):
            c.invalid(
                f"{base}.template.metadata.labels",
                go_string_map(labels),
                "`selector` does not match template `labels`",
            )


# --- request options (apimachinery pkg/apis/meta/v1/validation) ---------------------------------

FIELD_MANAGER_MAX_LENGTH = 128
FIELD_VALIDATION_VALUES = ("", "Ignore", "Strict", "Warn")


def _dry_run(c: Causes, dry_run: list[str]) -> None:
    if any(v != "All" for v in dry_run):
        c.not_supported("dryRun", GoText("[]string{" + ", ".join(map(go_quote, dry_run)) + "}"), ["All"])


def write_options(dry_run: list[str], field_manager: str, field_validation: str) -> list[Cause]:
    """ValidateCreateOptions and ValidateUpdateOptions: the query of a create or an update."""
    c = Causes()
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
    c = Causes()
    if not apply and force:
        c.forbidden("force", "may not be specified for non-apply patch")
    if apply and not field_manager:
        c.required("fieldManager", "is required for apply patch")
    return c + write_options(dry_run, field_manager, field_validation)


def delete_options(dry_run: list[str]) -> list[Cause]:
    """The dryRun part of ValidateDeleteOptions (`operations.delete` checks the propagation policy)."""
    c = Causes()
    _dry_run(c, dry_run)
    return c
