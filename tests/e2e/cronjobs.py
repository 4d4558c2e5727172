"""CronJob times and status as the cronjob tests write them (tests/e2e/test_cronjob.py, and
test_job.py for the one test of both controllers together).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import kubernetes


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def stamp(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def minutes(t: dt.datetime) -> int:
    return int(t.timestamp()) // 60


def daily_due(hours_ago: float = 1.0, zone: dt.tzinfo = dt.UTC) -> tuple[str, dt.datetime]:
    """A daily schedule (in `zone`) whose last time was `hours_ago`, and that time."""
    due = (now() - dt.timedelta(hours=hours_ago)).astimezone(zone).replace(second=0, microsecond=0)
    return f"{due.minute} {due.hour} * * *", due


def set_status(batch: kubernetes.client.BatchV1Api, ns: str, name: str, **status: Any) -> None:
    """Write the CronJob's status through the status subresource, as a controller would."""
    batch.patch_namespaced_cron_job_status(name, ns, {"status": status})
