"""When `issue-sorter run` may say the service is ready: the web server answers /healthz and every labelling
worker has loaded and warmed up its model (core.engines.record_warmed), so the first issue pays for neither.

`Readiness.tick` runs in the supervisor's loop (issue_sorter.supervisor), so a child that crashes while the
service starts is restarted as ever, and SIGTERM stops everything. Ready, it says so once, with how long it
took, then announces the service; past its timeout it says once what it is still waiting for, and keeps
waiting (deliveries are taken and queued meanwhile).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from redis.exceptions import RedisError

from core import engines
from issue_sorter.healthcheck import web_answers
from issue_sorter.supervisor import Child

READY_SECONDS = 300.0  # say what is missing after this long: a cold start loads torch and a model (seconds)
CHECK_SECONDS = 0.2  # between two looks at Redis and /healthz


def warmed_processes(redis) -> set[str] | None:
    """host:pid of every worker that recorded its warm-up (core.engines.WARMED_KEY); None if Redis fails."""
    try:
        return {process.decode() for process in redis.hkeys(engines.WARMED_KEY)}
    except RedisError:
        return None


@dataclass
class Readiness:
    """Waits, tick by tick, for `health_url` to answer and for each of `labelling` to have warmed up."""

    labelling: Sequence[Child]  # the labelling workers: their current pids must be in `warmed()`
    warmed: Callable[[], set[str] | None]  # host:pid of the workers warmed up (None: Redis does not answer)
    web_ready: Callable[[], bool]
    announce: Callable[[], None]  # prints "Issue Sorter is up" and how to reach it
    say: Callable[[str], None]
    started: float  # the supervisor clock's reading when the children were launched
    timeout: float = READY_SECONDS
    ready_at: float | None = None
    _warned: bool = field(default=False, repr=False)
    _next_check: float = field(default=0.0, repr=False)

    def missing(self) -> list[str]:
        """What the service still waits for, one phrase each (empty: ready)."""
        waiting = [] if self.web_ready() else ["the web server to answer /healthz"]
        warmed = self.warmed()
        if warmed is None:
            return [*waiting, "Redis to answer (the workers record their warm-up there)"]
        for child in self.labelling:
            pid = child.process.pid if child.process is not None else None
            if pid is None or engines.process_name(pid) not in warmed:
                waiting.append(f"{child.name} (pid {pid}) to load and warm up its model")
        return waiting

    def tick(self, now: float) -> None:
        """Look again (at most every CHECK_SECONDS); announce once ready; warn once past the timeout."""
        if self.ready_at is not None or now < self._next_check:
            return
        self._next_check = now + CHECK_SECONDS
        waiting = self.missing()
        if not waiting:
            self.ready_at = now
            self.say(f"ready in {now - self.started:.1f} s: the web server answers and the labelling workers' "
                     f"models are loaded and warmed up ({len(self.labelling)} of {len(self.labelling)})")
            self.announce()
        elif not self._warned and now - self.started >= self.timeout:
            self._warned = True
            self.say(f"not ready after {self.timeout:.0f} s, still waiting for: {'; '.join(waiting)}. The service "
                     "keeps running and queues deliveries; the workers' lines above say what holds them")


def make_readiness(labelling: Sequence[Child], redis, port: int, announce: Callable[[], None],
                   say: Callable[[str], None], *, started: float | None = None,
                   timeout: float = READY_SECONDS) -> Readiness:
    """The readiness of a `run` whose labelling workers are `labelling`, web server on `port`."""
    url = f"http://127.0.0.1:{port}/healthz"
    return Readiness(labelling, lambda: warmed_processes(redis), lambda: web_answers(url, 1.0), announce, say,
                     time.monotonic() if started is None else started, timeout)
