"""benchlib.apimetrics: the write requests of a kube-apiserver /metrics scrape, per resource."""

from __future__ import annotations

from benchlib import apimetrics


def sample(resource: str, verb: str, code: str, value: int, name: str = apimetrics.COUNTER) -> str:
    """One line as kube-apiserver v1.32 writes it (labels sorted)."""
    group = "discovery.k8s.io" if resource == "endpointslices" else ""
    labels = f'code="{code}",component="apiserver",dry_run="",group="{group}",resource="{resource}",'
    labels += f'scope="resource",subresource="",verb="{verb}",version="v1"'
    return f"{name}{{{labels}}} {value}"


# With neighbours that share the counter's prefix, and a histogram.
SCRAPE = "\n".join(
    [
        "# HELP apiserver_request_total [STABLE] Counter of apiserver requests broken out for each verb, ...",
        "# TYPE apiserver_request_total counter",
        sample("endpointslices", "POST", "201", 7),
        sample("endpointslices", "PUT", "200", 40),
        sample("endpointslices", "PUT", "409", 3),
        sample("endpointslices", "DELETE", "200", 1),
        sample("endpointslices", "LIST", "200", 12),
        sample("endpointslices", "WATCH", "0", 4),
        sample("endpoints", "PUT", "200", 9),
        sample("pods", "PATCH", "200", 100),
        sample("configmaps", "APPLY", "200", 2),
        "# TYPE apiserver_request_terminations_total counter",
        sample("endpoints", "PUT", "429", 5, name="apiserver_request_terminations_total"),
        sample("endpoints", "PUT", "200", 9, name="apiserver_request_duration_seconds_bucket"),
    ]
)


def test_only_write_requests_count_per_resource_and_code() -> None:
    writes = apimetrics.write_counts(SCRAPE)
    assert writes.of("endpointslices") == 7 + 40 + 3 + 1
    assert writes.of("endpointslices", code_prefix="409") == 3
    assert writes.of("endpointslices", code_prefix="2") == 48
    # Other counters with the same prefix, and histograms, are not requests.
    assert writes.of("endpoints") == 9
    assert writes.of("pods") == 100
    assert writes.of("configmaps") == 2
    assert writes.of("services") == 0


def test_a_phase_counts_what_it_added() -> None:
    before = apimetrics.write_counts(SCRAPE)
    after = apimetrics.write_counts(
        SCRAPE.replace(
            sample("endpointslices", "PUT", "200", 40), sample("endpointslices", "PUT", "200", 55)
        ).replace(sample("endpoints", "PUT", "200", 9), sample("endpoints", "PUT", "200", 10))
    )
    added = after.since(before)
    assert (added.of("endpointslices"), added.of("endpoints"), added.of("pods")) == (15, 1, 0)
    assert apimetrics.write_counts("").of("endpointslices") == 0
