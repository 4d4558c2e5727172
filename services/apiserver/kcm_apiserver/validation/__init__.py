"""Transitional: the former validation.py, moved whole into `batch` so that git follows it.

The next commit cuts `batch` into one module per API group and puts the dispatch here.
"""

from .batch import (
    Cause,
    cron_schedule_error,
    delete_options,
    go_quote,
    indexes_format,
    is_dns1035_label,
    is_dns1123_label,
    is_dns1123_subdomain,
    patch_options,
    validate,
    write_options,
)

__all__ = [
    "Cause",
    "cron_schedule_error",
    "delete_options",
    "go_quote",
    "indexes_format",
    "is_dns1035_label",
    "is_dns1123_label",
    "is_dns1123_subdomain",
    "patch_options",
    "validate",
    "write_options",
]
