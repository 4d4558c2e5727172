"""Which resources the watcher watches: `--resources` and API discovery.

`supervisor` calls `discover` at start and every `--discovery-interval`, so resources that
appear later (a new CRD) are picked up. `*` means every resource discovery lists with the
list and watch verbs, at its group's preferred version, without subresources, without
Events (a firehose controllers do not need; name them to get them) and without
metrics.k8s.io (computed on demand, not watchable). Explicit `group/version/resource`
entries add to that, `-group/version/resource` entries remove.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kcm_shared import kubeclient, subjects

_SKIPPED_GROUPS = frozenset({"metrics.k8s.io"})
_NEEDED_VERBS = frozenset({"list", "watch"})


@dataclass(frozen=True, slots=True)
class Selection:
    everything: bool
    include: frozenset[subjects.Resource]
    exclude: frozenset[subjects.Resource]

    @classmethod
    def parse(cls, text: str) -> Selection:
        """`*`, `apps/v1/deployments`, `v1/pods`, `-v1/secrets`, comma-separated."""
        everything = False
        include: set[subjects.Resource] = set()
        exclude: set[subjects.Resource] = set()
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            if item == "*":
                everything = True
            elif item.startswith("-"):
                exclude.add(subjects.Resource.parse(item[1:]))
            else:
                include.add(subjects.Resource.parse(item))
        return cls(everything, frozenset(include), frozenset(exclude))

    def choose(self, discovered: Iterable[subjects.Resource]) -> set[subjects.Resource]:
        chosen = set(discovered) if self.everything else set()
        return (chosen | self.include) - self.exclude


def _is_events(group: str, resource: str) -> bool:
    return resource == "events" and group in ("", "events.k8s.io")


def watchable(group: str, version: str, resource_list: dict[str, Any]) -> list[subjects.Resource]:
    """The resources of one APIResourceList that `*` selects."""
    if group in _SKIPPED_GROUPS:
        return []
    out = []
    for entry in resource_list.get("resources") or []:
        name = entry.get("name", "")
        if "/" in name or _is_events(group, name) or not set(entry.get("verbs") or ()) >= _NEEDED_VERBS:
            continue
        out.append(subjects.Resource(group, version, name))
    return out


@dataclass(frozen=True, slots=True)
class Discovered:
    resources: list[subjects.Resource]
    failed_groups: frozenset[str]  # groups whose documents could not be read this time


async def discover(client: kubeclient.KubeClient) -> Discovered:
    """Every watchable resource the server offers; raises when the group list itself fails."""
    core = await client.get("/api")
    lists: list[tuple[str, str]] = [("", v) for v in core.get("versions") or []][:1]
    groups = await client.get("/apis")
    for group in groups.get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("version")
        if preferred:
            lists.append((group["name"], preferred))
    resources: list[subjects.Resource] = []
    failed: set[str] = set()
    for group_name, version in lists:
        if group_name in _SKIPPED_GROUPS:
            continue
        path = f"/apis/{group_name}/{version}" if group_name else f"/api/{version}"
        try:
            doc = await client.get(path)
        except kubeclient.ApiError:
            # One broken group (an aggregated API that is down) must not hide the others.
            failed.add(group_name)
            continue
        resources.extend(watchable(group_name, version, doc))
    return Discovered(resources, frozenset(failed))
