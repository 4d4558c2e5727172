"""kcm_shared.base.gcpolicy: the collector settings every service process starts with."""

from __future__ import annotations

import subprocess
import sys

from kcm_shared.base import gcpolicy


def test_configure_sets_thresholds_and_freezes_the_start_up_heap() -> None:
    # In a child process: the settings are process-wide and pytest's own should stay as they are.
    code = (
        "import gc\n"
        "from kcm_shared import gcpolicy\n"
        "before = gc.get_freeze_count()\n"
        "gcpolicy.configure()\n"
        "print(gc.get_threshold(), before, gc.get_freeze_count())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    thresholds, before, after = out.rsplit(" ", 2)
    assert thresholds == str(gcpolicy.THRESHOLDS)
    assert int(before) == 0
    assert int(after) > 1_000  # the start-up heap, out of the collector's sight


def test_every_service_entry_point_configures_the_collector() -> None:
    code = (
        "import gc\n"
        "from kcm_cli import command\n"
        "async def idle():\n"
        "    print(gc.get_threshold())\n"
        "command.run(idle())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(gcpolicy.THRESHOLDS)
