"""A command left running in a test (a `kubectl rollout status`, a watch, a drain), its output
collected line by line by a reader thread while the test goes on.

- `wait_for_text(text, timeout)` / `wait_for_match(pattern, timeout)` wait until the output
  shows it or the command ends, and fail with the output if it never did;
- `exit_code(timeout)` waits for the end and for the reader to have every line;
- `stop()` kills it if it still runs (tests call it in their teardown).
"""

from __future__ import annotations

import re
import subprocess
import threading
from collections.abc import Sequence

from tests.conftest import wait_for


class Background:
    def __init__(self, argv: Sequence[str]) -> None:
        self.proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for_text(self, text: str, timeout: float) -> None:
        wait_for(lambda: text in self.output() or self.proc.poll() is not None, timeout, what=text)
        assert text in self.output(), self.output()

    def wait_for_match(self, pattern: str, timeout: float) -> re.Match[str]:
        found: re.Match[str] = wait_for(
            lambda: re.search(pattern, self.output()) or self.proc.poll() is not None, timeout, what=pattern
        )
        assert isinstance(found, re.Match), self.output()
        return found

    def exit_code(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
