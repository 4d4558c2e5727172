"""A REST mapper from API discovery: kind <-> resource, scope, and verbs of every served resource.

Upstream controllers map an owner reference's `apiVersion`+`kind` to a resource through a
RESTMapper filled from discovery, and the garbage collector picks the resources it follows
from `discovery.ServerPreferredResources` filtered by verbs. `discover(client)` reads
`/api/v1` and every version of every group under `/apis` (an owner reference may name any
served version) and returns a `Mapper`; callers re-discover periodically so that resources
added later (a new CRD) appear. A group whose documents cannot be read is skipped and
reported in `failed_groups` (with each failing group version's error in `failures`), like
upstream's partial-discovery error (ErrGroupDiscoveryFailed).

Used by the garbage collector (`kcm_controllers.garbagecollector`), the namespace controller
(`server_preferred`, what it deletes in a namespace) and by the watcher (preferred versions
only); any controller resolving owner references to resources can use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from kcm_shared.apimachinery import gvr
from kcm_shared.client import kubeclient


class MappingError(LookupError):
    """No served resource has this apiVersion and kind (upstream's NoKindMatchError)."""


@dataclass(frozen=True, slots=True)
class ApiResource:
    resource: gvr.Resource
    kind: str
    namespaced: bool
    verbs: frozenset[str]
    preferred: bool  # served at its group's preferred version


@dataclass(frozen=True)
class Mapper:
    resources: tuple[ApiResource, ...]
    failed_groups: frozenset[str] = frozenset()
    # group version ("apps/v1", "v1") -> why its document could not be read
    failures: dict[str, str] = field(default_factory=dict, compare=False)
    _by_kind: dict[tuple[str, str, str], ApiResource] = field(default_factory=dict, repr=False, compare=False)
    _by_resource: dict[gvr.Resource, ApiResource] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for res in self.resources:
            self._by_kind.setdefault((res.resource.group, res.resource.version, res.kind), res)
            self._by_resource[res.resource] = res

    def for_kind(self, api_version: str, kind: str) -> ApiResource:
        """The resource serving `kind` at `apiVersion` (`v1`, `apps/v1`); raises MappingError."""
        group, _, version = api_version.rpartition("/")
        found = self._by_kind.get((group, version, kind))
        if found is None:
            raise MappingError(f"no resource for kind {kind!r} in {api_version!r}")
        return found

    def get(self, res: gvr.Resource) -> ApiResource | None:
        return self._by_resource.get(res)

    def preferred_with(self, verbs: Iterable[str]) -> list[ApiResource]:
        """Preferred-version resources that support every verb in `verbs` (no subresources)."""
        need = frozenset(verbs)
        return [r for r in self.resources if r.preferred and need <= r.verbs]

    def server_preferred(self) -> list[ApiResource]:
        """As client-go's ServerPreferredResources: per group, every resource at its preferred
        version, and a resource served only at other versions at the first of them listed."""
        seen: set[tuple[str, str]] = set()
        out = []
        # A stable sort: preferred versions first, the others in discovery's order.
        for r in sorted(self.resources, key=lambda r: not r.preferred):
            if (r.resource.group, r.resource.resource) not in seen:
                seen.add((r.resource.group, r.resource.resource))
                out.append(r)
        return out


def api_version(res: gvr.Resource) -> str:
    """`v1` or `group/version`, as objects' `apiVersion` spells it."""
    return f"{res.group}/{res.version}" if res.group else res.version


def parse_resource_list(
    group: str, version: str, doc: dict[str, Any], *, preferred: bool
) -> list[ApiResource]:
    """The resources of one APIResourceList document, subresources left out."""
    out = []
    for entry in doc.get("resources") or []:
        name = entry.get("name", "")
        if not name or "/" in name:
            continue
        out.append(
            ApiResource(
                gvr.Resource(group, version, name),
                entry.get("kind", ""),
                bool(entry.get("namespaced")),
                frozenset(entry.get("verbs") or ()),
                preferred,
            )
        )
    return out


async def discover(
    client: kubeclient.KubeClient, *, all_versions: bool = True, skip_groups: Iterable[str] = ()
) -> Mapper:
    """Read discovery; raises when the root documents fail, skips groups that fail.

    `all_versions=False` reads only each group's preferred version (what a caller choosing
    resources to watch needs); `skip_groups` are not read at all.
    """
    skipped = frozenset(skip_groups)
    core = await client.get("/api")
    documents: list[tuple[str, str, bool]] = []
    for i, version in enumerate(core.get("versions") or []):
        documents.append(("", version, i == 0))
    groups = await client.get("/apis")
    for group in groups.get("groups") or []:
        if group["name"] in skipped:
            continue
        preferred = (group.get("preferredVersion") or {}).get("version")
        for entry in group.get("versions") or []:
            version = entry.get("version")
            if version:
                documents.append((group["name"], version, version == preferred))
    if not all_versions:
        documents = [d for d in documents if d[2]]
    # Read at once, as upstream does: one slow aggregated API costs one timeout, not one each.
    docs = await asyncio.gather(
        *(client.get(kubeclient.group_version_path(g, v)) for g, v, _ in documents), return_exceptions=True
    )
    resources: list[ApiResource] = []
    failed: set[str] = set()
    failures: dict[str, str] = {}
    for (group_name, version, preferred), doc in zip(documents, docs, strict=True):
        if isinstance(doc, BaseException):
            # One broken or unreachable aggregated API must not hide the others.
            if not isinstance(doc, kubeclient.ApiError | aiohttp.ClientError | OSError | TimeoutError):
                raise doc
            failed.add(group_name)
            failures[api_version(gvr.Resource(group_name, version, ""))] = error_text(doc)
            continue
        resources.extend(parse_resource_list(group_name, version, doc, preferred=preferred))
    return Mapper(tuple(resources), frozenset(failed), failures)


def error_text(exc: BaseException) -> str:
    """What Go's `err.Error()` says for this failure: an API error's Status message."""
    if isinstance(exc, kubeclient.ApiError) and exc.message:
        return exc.message
    return str(exc) or type(exc).__name__
