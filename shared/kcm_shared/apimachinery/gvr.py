"""The group/version/resource type every layer names resources with (upstream
k8s.io/apimachinery/pkg/runtime/schema.GroupVersionResource).

Controllers declare their resources with it, the API client builds paths from it, and the bus
turns it into subject tokens (`kcm_shared.bus.subjects`).
"""

from __future__ import annotations

from dataclasses import dataclass

CORE = "core"  # how the legacy core group "" is spelled where a group must be non-empty


@dataclass(frozen=True, slots=True)
class Resource:
    """A group/version/resource, the unit the watcher lists and watches."""

    group: str
    version: str
    resource: str

    def __str__(self) -> str:
        return f"{self.group or CORE}/{self.version}/{self.resource}"

    @classmethod
    def parse(cls, text: str) -> Resource:
        """`apps/v1/deployments` or `v1/pods` (core group)."""
        parts = text.split("/")
        if len(parts) == 2:
            return cls("", parts[0], parts[1])
        if len(parts) == 3:
            return cls("" if parts[0] == CORE else parts[0], parts[1], parts[2])
        raise ValueError(f"not a group/version/resource: {text!r}")
