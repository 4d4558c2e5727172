"""Validation of batch/v1 kinds, after upstream 1.32's pkg/apis/batch/validation.

- Jobs on create and update (`validate_job`): the job spec a CronJob's job template shares
  (counts, Indexed limits, podFailurePolicy, successPolicy, managedBy, the restart policy),
  the selector the server generated, and what may change afterwards.
- Job /status writes (`validate_job_status`), with the rules 1.32.10's status strategy applies.
- CronJobs (`validate_cron_job`): name length, the schedule (`cron_schedule_error`, with
  robfig/cron's messages), the time zone, the concurrency policy and the job template.

`indexes_format` reads "1,3-5,7" index lists (completedIndexes, failedIndexes,
succeededIndexes) as upstream does. Callers: the dispatch in `validation/__init__.py`.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import re
from collections.abc import Iterable
from typing import Any

from kcm_shared.apimachinery.selectors import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    label_selector_from_dict,
    regex_error,
)
from kcm_shared.apis import cron

from .core import POD_RESTART_POLICIES, validate_pod_template_spec
from .fielderrors import (
    IMMUTABLE,
    Causes,
    GoText,
    Obj,
    as_dict,
    as_list,
    go_label_selector,
    go_quote,
    go_string_map,
    is_int,
    semantic,
    validate_nonnegative,
    validate_one_of,
)
from .metav1 import validate_labels, validate_selector_matches_template

_JOB_RESTART_POLICIES = ("OnFailure", "Never")
_JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
_JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
_PREFIXED_LABELS = (_JOB_UID_LABELS[0], _JOB_NAME_LABELS[0])
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
    for rule in map(as_dict, as_list(policy.get("rules"))):
        indexes = rule.get("succeededIndexes")
        count = rule.get("succeededCount")
        rules.append(
            "batch.SuccessPolicyRule{"
            f"SucceededIndexes:{'(*string)(nil)' if indexes is None else go_quote(str(indexes))}, "
            f"SucceededCount:{'(*int32)(nil)' if count is None else count}}}"
        )
    return GoText("batch.SuccessPolicy{Rules:[]batch.SuccessPolicyRule{" + ", ".join(rules) + "}}")


def is_domain_prefixed_path(c: Causes, path: str, value: str) -> None:
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


def _job_spec(c: Causes, spec: Obj, path: str) -> None:
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
        validate_nonnegative(c, spec, key, path)
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
        elif is_int(completions):
            _success_policy(c, success_policy, completions, f"{path}.successPolicy")
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None:
        allowed = ("Failed",) if spec.get("podFailurePolicy") is not None else _POD_REPLACEMENT_POLICIES
        if replacement not in allowed:
            c.not_supported(f"{path}.podReplacementPolicy", replacement, allowed)
    # The pod-level rule accepts Always; a Job's pods must end, so it is refused here.
    validate_pod_template_spec(c, spec.get("template"), f"{path}.template", POD_RESTART_POLICIES)
    restart = as_dict(as_dict(spec.get("template")).get("spec")).get("restartPolicy")
    restart_path = f"{path}.template.spec.restartPolicy"
    if restart in ("Always", "", None):
        c.required(restart_path, 'valid values: "OnFailure", "Never"')
    elif restart not in _JOB_RESTART_POLICIES:
        c.not_supported(restart_path, restart, _JOB_RESTART_POLICIES)
    elif spec.get("podFailurePolicy") is not None and restart != "Never":
        c.invalid(restart_path, restart, 'only "Never" is supported when podFailurePolicy is specified')


def _indexed_limits(c: Causes, spec: Obj, path: str) -> None:
    completions, parallelism = spec.get("completions"), spec.get("parallelism")
    per_index, max_failed = spec.get("backoffLimitPerIndex"), spec.get("maxFailedIndexes")
    if completions is None:
        c.required(f"{path}.completions", "when completion mode is Indexed")
    if is_int(parallelism) and parallelism > _MAX_INDEXED_PARALLELISM:
        c.invalid(
            f"{path}.parallelism",
            parallelism,
            f"must be less than or equal to {_MAX_INDEXED_PARALLELISM} when completion mode is Indexed",
        )
    if is_int(completions) and is_int(max_failed) and max_failed > completions:
        c.invalid(f"{path}.maxFailedIndexes", max_failed, "must be less than or equal to completions")
    if is_int(max_failed) and max_failed > _MAX_FAILED_INDEXES:
        c.invalid(
            f"{path}.maxFailedIndexes", max_failed, f"must be less than or equal to {_MAX_FAILED_INDEXES}"
        )
    if is_int(completions) and completions > _COMPLETIONS_SOFT_LIMIT and per_index is not None:
        high = f"when completions are above {_COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
        if max_failed is None:
            c.required(
                f"{path}.maxFailedIndexes",
                f"must be specified when completions is above {_COMPLETIONS_SOFT_LIMIT}",
            )
        if is_int(parallelism) and parallelism > _PARALLELISM_LIMIT_HIGH_COMPLETIONS:
            c.invalid(
                f"{path}.parallelism",
                parallelism,
                f"must be less than or equal to {_PARALLELISM_LIMIT_HIGH_COMPLETIONS} {high}",
            )
        if is_int(max_failed) and max_failed > _MAX_FAILED_INDEXES_HIGH_COMPLETIONS:
            c.invalid(
                f"{path}.maxFailedIndexes",
                max_failed,
                f"must be less than or equal to {_MAX_FAILED_INDEXES_HIGH_COMPLETIONS} {high}",
            )


def _pod_failure_policy(c: Causes, spec: Obj, path: str) -> None:
    rules = as_list(spec["podFailurePolicy"].get("rules"))
    if len(rules) > _MAX_POD_FAILURE_POLICY_RULES:
        c.too_many(f"{path}.rules", len(rules), _MAX_POD_FAILURE_POLICY_RULES)
    pod_spec = as_dict(as_dict(spec.get("template")).get("spec"))
    containers = {
        str(as_dict(x).get("name"))
        for key in ("containers", "initContainers")
        for x in as_list(pod_spec.get(key))
    }
    for i, rule in enumerate(map(as_dict, rules)):
        at = f"{path}.rules[{i}]"
        action = rule.get("action")
        if not action:
            c.required(f"{at}.action", f"valid values: {_go_list(_POD_FAILURE_POLICY_ACTIONS)}")
        elif action == "FailIndex":
            if spec.get("backoffLimitPerIndex") is None:
                c.invalid(f"{at}.action", action, "requires the backoffLimitPerIndex to be set")
        elif action not in _POD_FAILURE_POLICY_ACTIONS:
            c.not_supported(f"{at}.action", action, _POD_FAILURE_POLICY_ACTIONS)
        on_exit_codes, on_conditions = rule.get("onExitCodes"), as_list(rule.get("onPodConditions"))
        if on_exit_codes is not None:
            _on_exit_codes(c, as_dict(on_exit_codes), f"{at}.onExitCodes", containers)
        if on_conditions:
            _on_pod_conditions(c, on_conditions, f"{at}.onPodConditions")
        if on_exit_codes is not None and on_conditions:
            c.invalid_omitted(at, "specifying both OnExitCodes and OnPodConditions is not supported")
        if on_exit_codes is None and not on_conditions:
            c.invalid_omitted(at, "specifying one of OnExitCodes and OnPodConditions is required")


def _on_pod_conditions(c: Causes, patterns: list[Any], path: str) -> None:
    if len(patterns) > _MAX_ON_POD_CONDITIONS_PATTERNS:
        c.too_many(path, len(patterns), _MAX_ON_POD_CONDITIONS_PATTERNS)
    for j, pattern in enumerate(map(as_dict, patterns)):
        type_ = str(pattern.get("type") or "")
        for msg in is_qualified_name(type_):
            c.invalid(f"{path}[{j}].type", type_, msg)
        status = pattern.get("status")
        if not status:
            c.required(f"{path}[{j}].status", f"valid values: {_go_list(_CONDITION_STATUSES)}")
        elif status not in _CONDITION_STATUSES:
            c.not_supported(f"{path}[{j}].status", status, _CONDITION_STATUSES)


def _on_exit_codes(c: Causes, req: Obj, path: str, containers: set[str]) -> None:
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
    values = as_list(req.get("values"))
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
    if any(is_int(a) and is_int(b) and a > b for a, b in itertools.pairwise(values)):
        c.invalid(f"{path}.values", _go_int32s(values), "must be ordered")


def _success_policy(c: Causes, policy: Obj, completions: int, path: str) -> None:
    rules = as_list(policy.get("rules"))
    if not rules:
        c.required(
            f"{path}.rules", "at least one rules must be specified when the successPolicy is specified"
        )
    if len(rules) > _MAX_SUCCESS_POLICY_RULES:
        c.too_many(f"{path}.rules", len(rules), _MAX_SUCCESS_POLICY_RULES)
    for i, rule in enumerate(map(as_dict, rules)):
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
            validate_nonnegative(c, rule, "succeededCount", at)
            if is_int(count) and count > completions:
                c.invalid(
                    f"{at}.succeededCount",
                    count,
                    f"must be less than or equal to {completions} (the number of specified completions)",
                )
            if is_int(count) and indexes is not None and count > total:
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


def _generated_selector(c: Causes, obj: Obj, prefixed: bool) -> None:
    """A Job without a manual selector carries the labels the server generated, on create
    and on every update (upstream validateGeneratedSelector): a template that lost them
    would make pods its selector never finds. `prefixed`: the batch.kubernetes.io/ labels
    are required too (always on create; on update only if the old template had both)."""
    spec, meta = as_dict(obj.get("spec")), as_dict(obj.get("metadata"))
    if spec.get("manualSelector") is True or spec.get("selector") is None:
        return
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    if not uid:
        c.required("metadata.uid", "")
    labels = as_dict(as_dict(as_dict(spec.get("template")).get("metadata")).get("labels"))
    (prefixed_uid, legacy_uid), (prefixed_name, legacy_name) = _JOB_UID_LABELS, _JOB_NAME_LABELS
    expected = {legacy_uid: uid, legacy_name: name}
    if prefixed:
        expected |= {prefixed_uid: uid, prefixed_name: name}
    for key, value in expected.items():
        at = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            c.required(at, f"must be '{value}'")
        elif labels[key] != value:
            c.invalid(at, go_string_map(labels), f"must be '{value}'")
    selector = spec["selector"]
    try:
        matches = label_selector_from_dict(as_dict(selector)).matches(expected)
    except ValueError:
        return  # already reported by the selector's own validation
    if not matches:
        c.invalid("spec.selector", go_label_selector(as_dict(selector)), "`selector` not auto-generated")


def validate_job(c: Causes, obj: Obj, old: Obj | None) -> None:
    spec = as_dict(obj.get("spec"))
    old_spec = as_dict(as_dict(old).get("spec"))
    # Updates of Jobs made before the prefixed labels existed need not gain them.
    old_labels = as_dict(as_dict(as_dict(old_spec.get("template")).get("metadata")).get("labels"))
    _generated_selector(c, obj, old is None or all(key in old_labels for key in _PREFIXED_LABELS))
    _job_spec(c, spec, "spec")
    # Manual or generated, the selector must select the Job's own pods (an empty one selects all).
    validate_selector_matches_template(c, spec, "spec", "job", allow_empty=True)
    completions = spec.get("completions")
    if spec.get("completionMode") == "Indexed" and is_int(completions) and completions > 0:
        # The controller names each pod's hostname "<job>-<index>": the last must be a DNS label.
        name = str(as_dict(obj.get("metadata")).get("name") or "")
        hostname = f"{name}-{completions - 1}"
        if is_dns1123_label(hostname):
            c.invalid(
                "metadata.name", name, f"will not able to create pod with invalid DNS label: {hostname}"
            )
    if old is None:
        return
    if spec.get("completionMode") == "Indexed" and completions is not None:
        # Elastic Indexed Jobs: completions may change, but only together with parallelism.
        if semantic(completions) != semantic(old_spec.get("completions")) and completions != spec.get(
            "parallelism"
        ):
            c.invalid("spec.completions", completions, "can only be modified in tandem with spec.parallelism")
    elif spec.get("completionMode") != "Indexed":
        c.immutable("spec.completions", completions, old_spec.get("completions"))
    if semantic(spec.get("selector")) != semantic(old_spec.get("selector")):
        c.invalid("spec.selector", go_label_selector(as_dict(spec.get("selector"))), IMMUTABLE)
    for key in ("completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"):
        c.immutable(f"spec.{key}", spec.get(key), old_spec.get(key))
    template, old_template = as_dict(spec.get("template")), copy.deepcopy(as_dict(old_spec.get("template")))
    never_started = old_spec.get("suspend") is True and not as_dict(old.get("status")).get("startTime")
    if never_started:
        old_template["metadata"] = template.get("metadata")
        old_pod_spec = as_dict(old_template.setdefault("spec", {}))
        for key in _JOB_SCHEDULING_FIELDS:
            old_pod_spec[key] = as_dict(template.get("spec")).get(key)
    c.immutable("spec.template", template, old_template)


# --- Job status (the /status subresource) ---------------------------------------------------


def _condition_true(status: Obj, type_: str) -> bool:
    return any(
        as_dict(cond).get("type") == type_ and as_dict(cond).get("status") == "True"
        for cond in as_list(status.get("conditions"))
    )


def _condition_status(status: Obj, type_: str) -> str | None:
    for cond in as_list(status.get("conditions")):
        if as_dict(cond).get("type") == type_:
            status_: str | None = as_dict(cond).get("status")
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
        return "[]types.UID{" + ", ".join(go_quote(str(v)) for v in as_list(values)) + "}"

    return GoText(f"batch.UncountedTerminatedPods{{Succeeded:{uids('succeeded')}, Failed:{uids('failed')}}}")


def validate_job_status(c: Causes, obj: Obj, old: Obj) -> None:
    """A /status write: ValidateJobUpdateStatus with the options 1.32's status strategy picks
    (JobManagedBy on): most rules apply only when the fields they look at changed, so a status
    that was already wrong does not block unrelated updates."""
    spec, status, old_status = (
        as_dict(obj.get("spec")),
        as_dict(obj.get("status")),
        as_dict(old.get("status")),
    )
    for key in ("active", "succeeded", "failed", "ready", "terminating"):
        validate_nonnegative(c, status, key, "status")
    uncounted = status.get("uncountedTerminatedPods")
    seen: set[str] = set()
    for key in ("succeeded", "failed"):
        for i, uid in enumerate(as_list(as_dict(uncounted).get(key))):
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
    uncounted_changed = semantic(uncounted) != semantic(old_status.get("uncountedTerminatedPods"))
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
    if (finished_changed or active_changed) and is_int(active) and active > 0 and finished:
        c.invalid("status.active", active, "active>0 is invalid for finished job")
    if (finished_changed or start_changed) and start is None and finished:
        c.required("status.startTime", "startTime is required for finished job")
    pending = as_list(as_dict(uncounted).get("succeeded")) + as_list(as_dict(uncounted).get("failed"))
    if (finished_changed or uncounted_changed) and finished and pending:
        c.invalid(
            "status.uncountedTerminatedPods",
            _go_uncounted(as_dict(uncounted)),
            "uncountedTerminatedPods needs to be empty for finished job",
        )
    completions = spec.get("completions")
    if completed_changed and is_int(completions):
        _, error = indexes_format(completed_text, completions)
        if error:
            c.invalid("status.completedIndexes", completed_text, f"error parsing completedIndexes: {error}")
    if (
        failed_indexes_changed
        and is_int(completions)
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
        and is_int(completions)
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
        if is_int(new_count) and is_int(old_count) and new_count < old_count and not may_decrease:
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


def _time_zone(c: Causes, zone: object) -> None:
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


def _cron_schedule(c: Causes, schedule: str, time_zone: object, old_schedule: str | None) -> None:
    """spec.schedule (upstream validateScheduleFormat). A TZ or CRON_TZ prefix is refused on
    create; an update may keep one the old schedule had, unless timeZone is set too."""
    if err := cron_schedule_error(schedule):
        c.invalid("spec.schedule", schedule, err)
    if "TZ" not in schedule:
        return
    if old_schedule is None or "TZ" not in old_schedule:
        c.invalid(
            "spec.schedule", schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
        )
    elif time_zone is not None:
        c.invalid("spec.schedule", schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule")


def validate_cron_job(c: Causes, obj: Obj, old: Obj | None) -> None:
    """Upstream ValidateCronJobCreate / ValidateCronJobUpdate, in their order."""
    spec = as_dict(obj.get("spec"))
    old_spec = as_dict(old.get("spec")) if old is not None else None
    schedule = spec.get("schedule")
    if not schedule:
        c.required("spec.schedule", "")
    else:
        old_schedule = str(old_spec.get("schedule") or "") if old_spec is not None else None
        _cron_schedule(c, str(schedule), spec.get("timeZone"), old_schedule)
    validate_nonnegative(c, spec, "startingDeadlineSeconds", "spec")
    # An update re-checks the zone only when it changes: one the tz database later dropped
    # does not make the CronJob unchangeable.
    if old_spec is None or old_spec.get("timeZone") != spec.get("timeZone"):
        _time_zone(c, spec.get("timeZone"))
    validate_one_of(c, spec, "concurrencyPolicy", "spec", ("Allow", "Forbid", "Replace"))
    job_template = as_dict(spec.get("jobTemplate"))
    validate_labels(
        c, as_dict(job_template.get("metadata")).get("labels"), "spec.jobTemplate.metadata.labels"
    )
    template_spec = as_dict(job_template.get("spec"))
    _job_spec(c, template_spec, "spec.jobTemplate.spec")
    # The controller makes each Job's selector: the template may not bring its own.
    if template_spec.get("selector") is not None:
        c.invalid(
            "spec.jobTemplate.spec.selector",
            go_label_selector(as_dict(template_spec["selector"])),
            "`selector` will be auto-generated",
        )
    if template_spec.get("manualSelector") is True:
        c.not_supported("spec.jobTemplate.spec.manualSelector", True, ("nil", "false"))
    for key in ("successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        validate_nonnegative(c, spec, key, "spec")
    name = str(as_dict(obj.get("metadata")).get("name") or "")
    # The controller appends an 11-character suffix and job names end up as 63-character labels;
    # an update may keep an older, longer name.
    if old is None and len(name) > 52:
        c.invalid("metadata.name", name, "must be no more than 52 characters")
