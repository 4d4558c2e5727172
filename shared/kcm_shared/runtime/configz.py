"""`/configz` of the secure port: the running configuration in upstream's shape,
`{"componentconfig": {...}}` (component-base configz under the name `componentconfig`).

- Each upstream flag of the component configuration lands where KubeControllerManagerConfiguration
  keeps it: a controller's flags under its section (`--concurrent-deployment-syncs` as
  `DeploymentController.ConcurrentDeploymentSyncs`), the Generic ones under `Generic`, with
  `ClientConnection` and `LeaderElection` nested as upstream's; names are the flags' in Go's
  CamelCase. Durations are written as Go writes them (`5m0s`).
- Not reproduced: upstream's KubeCloudShared/ServiceController split of the cloud flags (they are
  under `Generic` here) and fields that have no flag.
- Called by `kcm_shared.runtime.manager`, which serves it.
"""

from __future__ import annotations

import argparse
from typing import Any

from kcm_shared.runtime import upstreamflags

# Sections of --help that are not component configuration (serving, logs, metrics, the binary's own).
_NOT_CONFIG = frozenset(
    {
        "Secure serving",
        "Authentication",
        "Authorization",
        "Logs",
        "Metrics",
        "Global",
        "Misc",
        "Leader-migration",
    }
)
_CLIENT = {"kube-api-qps": "QPS", "kube-api-burst": "Burst", "kube-api-content-type": "ContentType"}
_ACRONYMS = {
    "cidr": "CIDR",
    "cidrs": "CIDRs",
    "ip": "IP",
    "qps": "QPS",
    "ttl": "TTL",
    "api": "API",
    "hpa": "HPA",
}


def camel(words: str) -> str:
    return "".join(_ACRONYMS.get(w, w[:1].upper() + w[1:]) for w in words.replace("_", "-").split("-") if w)


def go_duration(seconds: float) -> str:
    """Go's time.Duration.String of a whole number of nanoseconds."""
    ns = round(seconds * 1e9)
    if ns == 0:
        return "0s"
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if ns >= size:
                return sign + _trim(ns / size) + unit
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    out = f"{hours}h" if hours else ""
    out += f"{minutes}m" if hours or minutes else ""
    return sign + out + _trim(rest / 1e9) + "s"


def _trim(value: float) -> str:
    return f"{value:.9f}".rstrip("0").rstrip(".")


def componentconfig(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    generic: dict[str, Any] = config.setdefault("Generic", {})
    for flag in upstreamflags.FLAGS.values():
        if flag.section in _NOT_CONFIG or not hasattr(args, flag.name.replace("-", "_")):
            continue
        value = getattr(args, flag.name.replace("-", "_"))
        if flag.type == "duration" and isinstance(value, (int, float)):
            value = go_duration(float(value))
        if flag.name in _CLIENT:
            generic.setdefault("ClientConnection", {})[_CLIENT[flag.name]] = value
        elif flag.name.startswith("leader-elect"):
            field = camel(flag.name.removeprefix("leader-elect").removeprefix("-")) or "LeaderElect"
            generic.setdefault("LeaderElection", {})[field] = value
        elif flag.section == "Debugging":
            generic.setdefault("Debugging", {})["Enable" + camel(flag.name)] = value
        elif flag.section == "Generic":
            generic[camel(flag.name)] = value
        else:
            config.setdefault(camel(flag.section), {})[camel(flag.name)] = value
    return {"componentconfig": config}
