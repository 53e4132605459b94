"""The supervisor of `issue-sorter run`: restart a child that exits, with back-off; stop them in order.

A crashed child is started again after 1, 2, 4 ... 30 seconds (the delay starts over once a child has run
for a minute), and every exit and restart is said on stderr. On SIGTERM/SIGINT the children stop in the
order given (the web server and the workers first, Redis last), each group waited for before the next.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

BACKOFF_SECONDS = (1, 2, 4, 8, 16, 30)
STABLE_SECONDS = 60.0  # a child that ran this long before exiting crashed afresh: back-off starts over
STOP_SECONDS = 20.0  # SIGTERM, then SIGKILL after this long


def backoff(failures: int) -> float:
    """Seconds to wait before the restart after `failures` quick exits in a row (1 or more)."""
    return float(BACKOFF_SECONDS[min(failures, len(BACKOFF_SECONDS)) - 1])


@dataclass
class Child:
    """One supervised process: how to start it, and where it stands."""

    name: str
    start: Callable[[], subprocess.Popen]
    stop_group: int = 0  # lower groups stop first: 0 web and workers, 1 Redis
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    failures: int = 0  # quick exits in a row
    restart_at: float | None = None
    restarts: int = field(default=0)

    def launch(self, now: float) -> None:
        """Start (or start again) the process."""
        self.process, self.started_at, self.restart_at = self.start(), now, None

    def reap(self) -> None:
        """Kill what the exited process left in its session (an RQ worker's scheduler, gunicorn's workers)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def check(self, now: float, say: Callable[[str], None]) -> None:
        """Restart the process if it exited and its back-off has passed."""
        if self.restart_at is None and self.process is not None and self.process.poll() is not None:
            self.reap()
            self.failures = 1 if now - self.started_at >= STABLE_SECONDS else self.failures + 1
            delay = backoff(self.failures)
            self.restart_at = now + delay
            say(f"{self.name} (pid {self.process.pid}) exited with code {self.process.returncode}; "
                f"restarting it in {delay:.0f} s")
        if self.restart_at is not None and now >= self.restart_at:
            self.launch(now)
            self.restarts += 1
            say(f"{self.name} restarted (pid {self.process.pid}, restart {self.restarts})")


def say(message: str) -> None:
    print(f"issue-sorter run: {message}", file=sys.stderr, flush=True)


def supervise(children: Sequence[Child], *, poll: float = 0.2, clock: Callable[[], float] = time.monotonic,
              on_tick: Callable[[float], None] | None = None) -> int:
    """Keep `children` (already launched) running until SIGTERM or SIGINT, then stop them in order; 0.
    `on_tick(now)` runs after each look at the children (issue_sorter.readiness waits there)."""
    stopping: dict[str, int | None] = {"signal": None}

    def stop(signum, _frame):
        stopping["signal"] = signum

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        while stopping["signal"] is None:
            for child in children:
                child.check(clock(), say)
            if on_tick is not None:
                on_tick(clock())
            time.sleep(poll)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    say(f"stopping ({signal.Signals(stopping['signal']).name})")
    stop_in_order(children)
    return 0


def stop_in_order(children: Sequence[Child], timeout: float = STOP_SECONDS) -> None:
    """SIGTERM each stop group in turn and wait for it (SIGKILL after `timeout`), lowest group first."""
    for group in sorted({child.stop_group for child in children}):
        running = [c.process for c in children if c.stop_group == group and c.process and c.process.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + timeout
        for process in running:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
