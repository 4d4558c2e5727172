"""What one scenario left behind, made comparable across two runs, and the differences of two runs.

- `compare(reference, kcm)` takes two `Run`s of one scenario (each the final state of its namespace
  and its named captures, as `kubectl get -o json` printed them) and returns the `Difference`s:
  objects, conditions and Events, in order where order matters.
- Before comparing, each run is normalized (`Masks.of(run)`): uids, timestamps, resourceVersions
  (a PersistentVolume's claimRef's too), managedFields, the namespace's name, generated name
  suffixes, CronJob schedule suffixes, pod and cluster IPs, the simulator's node choices and
  scheduling messages are masked, Secret data is decoded (a token masked), and the hash values in
  names and labels (`pod-template-hash`, `controller-revision-hash`) too, since kcm's hashes are a
  different function (docs/controllers.md). Those hashes are compared on their own instead, one difference per
  ReplicaSet or ControllerRevision, matched by owner and revision number.
- Events are grouped by the object they are about: one object's Events are compared as a sequence
  of distinct Events in the order each first appeared (repeats interleave as concurrent requests
  were answered, e.g. the creates and quota refusals of one burst of pod creates, on both
  sides); the Events of objects whose names differ only in a masked suffix (a ReplicaSet's pods)
  as a set, since their interleaving is the scheduler's.

tools/differential/__main__.py calls `compare`; tests/unit/tools/test_differential.py tests it.
"""

from __future__ import annotations

import base64
import difflib
import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
ADMISSION_VOLUME = re.compile(r"\bkube-api-access-[a-z0-9]{5}\b")  # ServiceAccount admission's name
TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})")
HASH_LABELS = ("pod-template-hash", "controller-revision-hash", "controller.kubernetes.io/hash")
# What is left once the objects' own names are masked: names of objects already gone (a deleted
# pod in an Event's message) and names the API server made up for a create it refused. Both use
# the apimachinery rand alphabet (no vowels, no 0, 1, 3): 5 characters for generateName,
# 6 to 10 for kube-controller-manager's hashes (kcm's are 8).
RAND = "[bcdfghjklmnpqrstvwxz2456789]"
RANDOM_SUFFIX = re.compile(f"{RAND}{{5}}")
LEFT_GENERATED = re.compile(rf"(?<=-){RAND}{{5}}\b")
LEFT_HASH = re.compile(rf"(?<=-){RAND}{{6,10}}\b")
# Pod IPs, from the pod network (kcm_cli.upstream.POD_CIDR); not a node's pod CIDR ("/24" after).
POD_IP = re.compile(r"\b10\.244\.\d+\.\d+\b(?!/)")
# Written by someone else than the controllers, or different on every run by design.
DROPPED_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink")
DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)
MASKED_TOKEN = "<token>"


@dataclass
class Run:
    """One scenario's outcome under one controller manager."""

    namespace: str
    objects: list[dict[str, Any]]  # the namespace's final state, Events included
    captures: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    error: str = ""  # the script's failure, if it failed


@dataclass(frozen=True)
class Difference:
    where: str  # e.g. "Deployment/web: status.conditions[Progressing].reason"
    reference: str
    kcm: str

    def line(self) -> str:
        return f"{self.where}: reference {self.reference}, kcm {self.kcm}"


def items(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The objects of a `kubectl get -o json` answer (a List or one object)."""
    found: list[dict[str, Any]] = doc.get("items", [doc]) if doc.get("kind", "").endswith("List") else [doc]
    return found


class Masks:
    """The run-specific strings of one run and what each is replaced with."""

    def __init__(self, replacements: dict[str, str]) -> None:
        self.replacements = replacements
        keys = sorted(replacements, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(k) for k in keys)) if keys else None

    @classmethod
    def of(cls, run: Run) -> Masks:
        every = [*run.objects, *(o for objs in run.captures.values() for o in objs)]
        out: dict[str, str] = {}
        revisions = {value: revision for revision, value in _revisions(every).items()}
        for obj in every:
            for key in HASH_LABELS:
                value = obj.get("metadata", {}).get("labels", {}).get(key)
                if value:
                    # Named by revision, so that each ReplicaSet and ControllerRevision keeps a
                    # name of its own.
                    out[value] = f"<hash@{revisions[value][1]}>" if value in revisions else "<hash>"
            if obj.get("kind") == "Service":
                ips = [obj["spec"].get("clusterIP"), *obj["spec"].get("clusterIPs", [])]
                out.update({ip: "<cluster-ip>" for ip in ips if ip and ip != "None"})
        base = cls({**out, run.namespace: "<ns>"})
        for obj in every:
            meta = obj.get("metadata", {})
            owners = {o.get("kind") for o in meta.get("ownerReferences", [])}
            if obj.get("kind") == "Job" and "CronJob" in owners:
                # <cronjob>-<minutes since the epoch of its schedule time>
                out[meta["name"]] = re.sub(r"-\d+$", "-<scheduled>", base.text(meta["name"]))
        base = cls({**out, run.namespace: "<ns>"})
        for obj in every:
            meta = obj.get("metadata", {})
            prefix, name = meta.get("generateName", ""), meta.get("name", "")
            # Only a suffix the API server made up: a StatefulSet's pod keeps generateName but
            # names itself (web-0).
            if prefix and name.startswith(prefix) and RANDOM_SUFFIX.fullmatch(name[len(prefix) :]):
                out[meta["name"]] = base.text(meta["generateName"]) + "<gen>"
        return cls({**out, run.namespace: "<ns>"})

    def text(self, value: str) -> str:
        if self._pattern is not None:
            value = self._pattern.sub(lambda m: self.replacements[m.group(0)], value)
        value = POD_IP.sub("<pod-ip>", TIME.sub("<time>", UUID.sub("<uid>", value)))
        value = ADMISSION_VOLUME.sub("kube-api-access-<gen>", value)
        return LEFT_HASH.sub("<hash>", LEFT_GENERATED.sub("<gen>", value))

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value


def _scrub(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without what no controller decides (a copy)."""
    obj = json.loads(json.dumps(obj))
    meta = obj.get("metadata", {})
    for key in DROPPED_METADATA:
        meta.pop(key, None)
    for key in DROPPED_ANNOTATIONS:
        meta.get("annotations", {}).pop(key, None)
    if meta.get("annotations") == {}:
        del meta["annotations"]
    kind = obj.get("kind")
    if kind == "Pod":
        owners = {o.get("kind") for o in meta.get("ownerReferences", [])}
        spec, status = obj.get("spec", {}), obj.get("status", {})
        if "DaemonSet" not in owners and "nodeName" in spec:
            spec["nodeName"] = "<node>"  # the simulator's scheduler chose it
        for key in ("hostIP", "hostIPs"):
            status.pop(key, None)
        for condition in status.get("conditions", []):
            if condition.get("type") == "PodScheduled":
                condition.pop("message", None)  # the scheduler's count of the cluster's nodes
    if kind == "PersistentVolume" and "resourceVersion" in (ref := obj.get("spec", {}).get("claimRef") or {}):
        ref["resourceVersion"] = "<resource-version>"  # the claim's at binding: the store's counter
    if kind in ("Endpoints", "EndpointSlice"):
        # The pods' nodes and zones are the scheduler's choice, not the controller's.
        for address in _addresses(obj):
            if "nodeName" in address:
                address["nodeName"] = "<node>"
            address.pop("zone", None)
            address.get("hints", {}).pop("forZones", None)
    if kind == "Secret":
        data = obj.get("data", {})
        for key, value in data.items():
            # Decoded, so that the namespace's name in it is masked; a token is signed anew each run.
            data[key] = MASKED_TOKEN if key == "token" else _decoded(value)
    return obj


def _decoded(value: str) -> str:
    try:
        return "base64:" + base64.b64decode(value).decode()
    except (ValueError, UnicodeDecodeError):
        return value


def _addresses(obj: dict[str, Any]) -> Iterable[dict[str, Any]]:
    if obj.get("kind") == "EndpointSlice":
        yield from obj.get("endpoints") or []
    for subset in obj.get("subsets") or []:
        yield from subset.get("addresses", [])
        yield from subset.get("notReadyAddresses", [])


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Leaf path -> value. Lists of conditions (by `type`) and of named things (by `name`) are
    keyed, with their order as a leaf of its own (`path#order`); other lists of objects (addresses,
    endpoints, Endpoints subsets) are sorted by their own flattened form, their order being the
    IP's, the scheduler's or a hash of masked values (subsets); lists of scalars are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k in sorted(value):
            out.update(flatten(value[k], f"{path}.{k}" if path else k))
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        for key in ("type", "name"):
            names = [v.get(key) for v in value]
            if all(isinstance(n, str) for n in names) and len(set(names)) == len(names):
                out = {f"{path}#order": names} if len(names) > 1 else {}
                for name, v in zip(names, value, strict=True):
                    out.update(flatten(v, f"{path}[{name}]"))
                return out
        # Flattened first, so that lists inside (a subset's addresses) are in the same order too.
        ordered = sorted(value, key=lambda v: json.dumps(flatten(v), sort_keys=True))
        out = {}
        for i, v in enumerate(ordered):
            out.update(flatten(v, f"{path}[{i}]"))
        return out
    return {path: value}


def _show(value: Any) -> str:
    return "(absent)" if value is _ABSENT else json.dumps(value, sort_keys=True)


_ABSENT = object()


def _diff_fields(where: str, ref: dict[str, Any], kcm: dict[str, Any]) -> list[Difference]:
    a, b = flatten(ref), flatten(kcm)
    return [
        Difference(f"{where}: {path}", _show(a.get(path, _ABSENT)), _show(b.get(path, _ABSENT)))
        for path in sorted(a.keys() | b.keys())
        if a.get(path, _ABSENT) != b.get(path, _ABSENT)
    ]


def _key(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def _diff_objects(
    label: str, ref: list[dict[str, Any]], kcm: list[dict[str, Any]], ref_masks: Masks, kcm_masks: Masks
) -> list[Difference]:
    """Objects matched by kind and masked name; several under one key (a ReplicaSet's pods) are
    compared as a multiset: equal ones cancel out, the rest are paired in a stable order."""
    groups: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = defaultdict(lambda: ([], []))
    for side, objs, masks in ((0, ref, ref_masks), (1, kcm, kcm_masks)):
        for obj in objs:
            clean = masks.value(_scrub(obj))
            groups[_key(clean)][side].append(clean)
    out: list[Difference] = []
    for key in sorted(groups):
        a, b = (sorted(g, key=lambda o: json.dumps(o, sort_keys=True)) for g in groups[key])
        where = f"{label}{key}"
        if len(a) != len(b):
            out.append(Difference(f"{where}: count", str(len(a)), str(len(b))))
        for obj in list(a):
            if obj in b:
                a.remove(obj)
                b.remove(obj)
        for x, y in zip(a, b, strict=False):
            out += _diff_fields(where, x, y)
    return out


@dataclass(frozen=True)
class _Event:
    type: str
    reason: str
    message: str
    component: str

    def __str__(self) -> str:
        return f"{self.type} {self.reason} ({self.component}): {self.message}"


# The simulator's kubelets and scheduler record these on both sides alike; which node, and when
# relative to the controllers' Events, is the simulator's timing, not the controller manager's.
SIMULATED_COMPONENTS = frozenset({"kubelet", "default-scheduler"})


def _events(objs: list[dict[str, Any]], masks: Masks) -> dict[str, tuple[bool, list[_Event]]]:
    """Masked object key -> (several objects share the key, their Events in time order); the
    simulator's own Events (`SIMULATED_COMPONENTS`) left out."""
    about: dict[str, list[tuple[str, str, _Event]]] = defaultdict(list)
    names: dict[str, set[str]] = defaultdict(set)
    for e in objs:
        if ((e.get("source") or {}).get("component") or e.get("reportingComponent")) in SIMULATED_COMPONENTS:
            continue
        involved = e.get("involvedObject") or e.get("regarding") or {}
        key = masks.text(f"{involved.get('kind')}/{involved.get('name')}")
        names[key].add(involved.get("name", ""))
        when = e.get("eventTime") or e.get("firstTimestamp") or e["metadata"].get("creationTimestamp") or ""
        component = (e.get("source") or {}).get("component") or e.get("reportingComponent") or ""
        event = _Event(e.get("type", ""), e.get("reason", ""), masks.text(e.get("message", "")), component)
        # The name's suffix is the recorder's clock: the order within a second.
        about[key].append((when, e["metadata"]["name"], event))
    out = {}
    for key, rows in about.items():
        sequence = [event for _, _, event in sorted(rows, key=lambda r: (r[0], r[1]))]
        out[key] = (len(names[key]) > 1, list(dict.fromkeys(sequence)))
    return out


def _diff_events(
    ref: list[dict[str, Any]], kcm: list[dict[str, Any]], rm: Masks, km: Masks
) -> list[Difference]:
    a, b = _events(ref, rm), _events(kcm, km)
    out = []
    for key in sorted(a.keys() | b.keys()):
        many_a, seq_a = a.get(key, (False, []))
        many_b, seq_b = b.get(key, (False, []))
        if many_a or many_b:  # a set: the order is the interleaving of several objects
            seq_a, seq_b = sorted(set(seq_a), key=str), sorted(set(seq_b), key=str)
        for line in difflib.ndiff([str(e) for e in seq_a], [str(e) for e in seq_b]):
            if line.startswith("- "):
                out.append(Difference(f"Events of {key}", line[2:], "(none)"))
            elif line.startswith("+ "):
                out.append(Difference(f"Events of {key}", "(none)", line[2:]))
    return out


def _revisions(objs: Iterable[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(what, revision) -> hash value: a Deployment's ReplicaSets by their revision annotation,
    ControllerRevisions by their revision number."""
    out = {}
    for obj in objs:
        meta = obj.get("metadata", {})
        labels = meta.get("labels", {})
        owner = next((f"{o['kind']}/{o['name']}" for o in meta.get("ownerReferences", [])), "")
        if obj.get("kind") == "ReplicaSet" and "pod-template-hash" in labels:
            revision = meta.get("annotations", {}).get("deployment.kubernetes.io/revision", "?")
            out[(f"ReplicaSet of {owner}: pod-template-hash", f"rev{revision}")] = labels["pod-template-hash"]
        for key in HASH_LABELS[1:]:
            if obj.get("kind") == "ControllerRevision" and key in labels:
                out[(f"ControllerRevision of {owner}: {key}", f"rev{obj.get('revision')}")] = labels[key]
    return out


def _diff_hashes(ref: Run, kcm: Run, rm: Masks, km: Masks) -> list[Difference]:
    a = {rm.text(f"{what} at {rev}"): v for (what, rev), v in _revisions(ref.objects).items()}
    b = {km.text(f"{what} at {rev}"): v for (what, rev), v in _revisions(kcm.objects).items()}
    return [Difference(k, a[k], b[k]) for k in sorted(a.keys() & b.keys()) if a[k] != b[k]]


def _outcome(error: str) -> str:
    return json.dumps(error.strip().splitlines()[-1] if error.strip() else "ok")


def _split_events(objs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    events = [o for o in objs if o.get("kind") == "Event"]
    return events, [o for o in objs if o.get("kind") != "Event"]


def compare(ref: Run, kcm: Run) -> list[Difference]:
    """The differences between the reference's run of a scenario and kcm's."""
    rm, km = Masks.of(ref), Masks.of(kcm)
    out = []
    if ref.error or kcm.error:
        out.append(Difference("the scenario", _outcome(ref.error), _outcome(kcm.error)))
    ref_events, ref_objects = _split_events(ref.objects)
    kcm_events, kcm_objects = _split_events(kcm.objects)
    out += _diff_objects("", ref_objects, kcm_objects, rm, km)
    out += _diff_events(ref_events, kcm_events, rm, km)
    for name in sorted(ref.captures.keys() | kcm.captures.keys()):
        a, b = ref.captures.get(name), kcm.captures.get(name)
        if a is None or b is None:
            out.append(
                Difference(f"capture {name}", "taken" if a else "missing", "taken" if b else "missing")
            )
            continue
        out += _diff_objects(f"capture {name}: ", a, b, rm, km)
    out += _diff_hashes(ref, kcm, rm, km)
    return out
