"""The cyclic garbage collector's settings for every service process.

CPython's defaults (a young collection every 700 net allocations, a full one whenever the
long-lived objects grew by a quarter) suit small scripts. A service holds a large heap (the
API server's store, a controller's caches, the modules it imported) and allocates a lot per
request, so full collections come often and each walks the whole heap: measured with
bench/statefulset_pods.py, a controller paused 40 to 56 ms in the middle of a 300-pod burst,
a sixth of the whole burst, and the API server spent about 30 % of its write path in the
collector (bench/apiserver_writes.py with a resident population of pods).

What the services keep is almost never cyclic (decoded JSON, msgspec Structs), so a larger
young generation loses little memory, and what was loaded at start-up (modules, registries)
is moved out of the collector's sight for good.
"""

from __future__ import annotations

import gc

# Young collections every 50,000 net allocations; the older generations after 20 and 100 of
# the one below. With `gc.freeze()` of the start-up heap, full collections walk only what the
# service built since.
THRESHOLDS = (50_000, 20, 100)


def configure() -> None:
    """Apply the service settings; call once, after the imports and before the event loop."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
