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

from kcm_shared.apimachinery import gvr
from kcm_shared.client import discovery, kubeclient

_SKIPPED_GROUPS = frozenset({"metrics.k8s.io"})
_NEEDED_VERBS = frozenset({"list", "watch"})


@dataclass(frozen=True, slots=True)
class Selection:
    everything: bool
    include: frozenset[gvr.Resource]
    exclude: frozenset[gvr.Resource]

    @classmethod
    def parse(cls, text: str) -> Selection:
        """`*`, `apps/v1/deployments`, `v1/pods`, `-v1/secrets`, comma-separated."""
        everything = False
        include: set[gvr.Resource] = set()
        exclude: set[gvr.Resource] = set()
        for item in (part.strip() for part in text.split(",")):
            if not item:
                continue
            if item == "*":
                everything = True
            elif item.startswith("-"):
                exclude.add(gvr.Resource.parse(item[1:]))
            else:
                include.add(gvr.Resource.parse(item))
        return cls(everything, frozenset(include), frozenset(exclude))

    def choose(self, discovered: Iterable[gvr.Resource]) -> set[gvr.Resource]:
        chosen = set(discovered) if self.everything else set()
        return (chosen | self.include) - self.exclude


def _is_events(group: str, resource: str) -> bool:
    return resource == "events" and group in ("", "events.k8s.io")


def watchable(apis: Iterable[discovery.ApiResource]) -> list[gvr.Resource]:
    """The resources among `apis` (one group version's, or all preferred ones) that `*` selects."""
    return [
        api.resource
        for api in apis
        if api.resource.group not in _SKIPPED_GROUPS
        and not _is_events(api.resource.group, api.resource.resource)
        and api.verbs >= _NEEDED_VERBS
    ]


@dataclass(frozen=True, slots=True)
class Discovered:
    resources: list[gvr.Resource]
    failed_groups: frozenset[str]  # groups whose documents could not be read this time


async def discover(client: kubeclient.KubeClient) -> Discovered:
    """Every watchable resource the server offers; raises when the group list itself fails."""
    found = await discovery.discover(client, all_versions=False, skip_groups=_SKIPPED_GROUPS)
    return Discovered(watchable(found.resources), found.failed_groups)
