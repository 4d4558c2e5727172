"""Writes kube-apiserver served, by resource, from its `apiserver_request_total` counter.

- `write_counts(text)`: the write requests (create, update, patch, apply, delete) in one scrape of
  kube-apiserver's /metrics, per (resource, HTTP status code), over every writer.
- `Writes.since(before)`: what a phase added between two scrapes.
Called by bench/side_by_side.py, which counts the EndpointSlice and Endpoints writes of the two
controller managers with it: the server's count includes writes it refused (409 conflicts) and
writes that changed nothing, which a watch never sees.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

COUNTER = "apiserver_request_total"
# kube-apiserver's `verb` label: the HTTP method, APPLY for a server-side apply patch.
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})


@dataclass(frozen=True)
class Writes:
    """Write requests per (resource, code)."""

    counts: Counter[tuple[str, str]] = field(default_factory=Counter)

    def of(self, resource: str, *, code_prefix: str = "") -> int:
        """Writes of `resource` whose status code starts with `code_prefix` ("" for all)."""
        return sum(
            n for (res, code), n in self.counts.items() if res == resource and code.startswith(code_prefix)
        )

    def since(self, before: Writes) -> Writes:
        after = Counter(self.counts)
        after.subtract(before.counts)
        return Writes(+after)


def write_counts(text: str) -> Writes:
    """The write requests of a /metrics scrape. Only the counter's own lines are parsed: the whole
    scrape is megabytes of histograms."""
    wanted = "\n".join(line for line in text.splitlines() if line.startswith(COUNTER + "{"))
    counts: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(wanted):
        for sample in family.samples:
            labels = sample.labels
            if sample.name == COUNTER and labels.get("verb") in WRITE_VERBS:
                counts[labels.get("resource", ""), labels.get("code", "")] += int(sample.value)
    return Writes(counts)
