"""GitHub's write spacing per installation, across every worker process: a write takes its turn once
(bot.github_api.write_turns); a write whose turn is later raises WriteDeferred, and its job is scheduled at
that turn (bot.intake.queueing.reschedule) holding it, so the worker takes another job instead of sleeping.

GitHub asks for writes (POST, PATCH, PUT, DELETE) at least a second apart per installation. PyGithub's own
throttle sleeps in the thread and counts one client's writes, so several workers on one installation
wrote more often than that. Turns space the jobs; a job that starts late may still come close to the
write before it, so the write also claims the installation's slot (its last write) and, when that write
is less than an interval old, sleeps the rest of it: at most one interval, since the turns are an
interval apart.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from redis import Redis
from redis.commands.core import Script
from rq import get_current_job

from bot.github_api.client import TransientGitHubError
from bot.github_api.write_turns import TURN_META, inline_wait_ms, reserve_turn

SLOT_KEY = "issue-sorter:write-slot:{}"  # installation id → the time (ms, Redis's clock) of its last write
# the IssueWriter calls that change something on GitHub (bot.github_api.client); every other call is a read
WRITES = frozenset({"add_labels", "remove_label", "create_label", "create_comment", "set_issue_type",
                    "react_to_comment"})

# Redis's clock, not the workers': every process compares against the same one. The key lives one interval,
# the only time it can refuse a write.
_CLAIM_LUA = r"""
local interval = tonumber(ARGV[1])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local last = tonumber(redis.call('GET', KEYS[1]))
if last and now - last < interval then return interval - (now - last) end
redis.call('SET', KEYS[1], now, 'PX', interval)
return 0
"""

# The write has returned (or failed): the interval runs from now, not from the claim. The request reached
# GitHub somewhere between the two, later by however long a loaded machine delayed it, so counting from
# the claim let two writes arrive closer than the interval.
_DONE_LUA = r"""
local clock = redis.call('TIME')
redis.call('SET', KEYS[1], tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000), 'PX', ARGV[1])
return 0
"""


class WriteDeferred(TransientGitHubError):
    """GitHub was not asked: the installation's next turn is `retry_after` seconds away. With `turn_held`,
    that turn is booked for this job: its rescheduled run writes without booking another."""

    deferral = True  # bot.intake.queueing reschedules it without counting an attempt; nothing reached GitHub

    def __init__(self, message: str, *, retry_after: float, turn_held: bool = True):
        super().__init__(message, retry_after=retry_after)
        self.turn_held = turn_held


class WriteSpacing:
    """The turns and slots of every installation, in one Redis shared by all workers."""

    def __init__(self, redis: Redis, interval: float, *, sleep: Callable[[float], None] = time.sleep):
        self._redis, self._interval = redis, interval
        self._interval_ms = max(1, round(interval * 1000))
        self._sleep = sleep
        self._script: Script = redis.register_script(_CLAIM_LUA)
        self._done: Script = redis.register_script(_DONE_LUA)

    def reserve(self, installation_id: int) -> float:
        """Book the installation's next turn: the seconds until it (0.0: now)."""
        return reserve_turn(self._redis, installation_id, self._interval)

    def claim(self, installation_id: int) -> float:
        """0.0 when the installation's last write is an interval old (the slot is taken), else the seconds left."""
        return int(self._script(keys=[SLOT_KEY.format(int(installation_id))], args=[self._interval_ms])) / 1000

    def done(self, installation_id: int) -> None:
        """The installation's write has returned: its next may come an interval from now."""
        self._done(keys=[SLOT_KEY.format(int(installation_id))], args=[self._interval_ms])

    def wait_for(self, installation_id: int, call: str, *, holds_turn: bool = False) -> None:
        """Take the installation's slot for `call`: at once with a turn booked before (`holds_turn`), free
        now or less than a second away (write_turns.INLINE_WAIT), after the rest of the last write's interval
        at most; else raise WriteDeferred with the turn booked for the job's next run."""
        if not holds_turn:
            wait = self.reserve(installation_id)
            if 0 < wait < inline_wait_ms(self._interval) / 1000:  # nearer than the scheduler's second
                self._sleep(wait)
            elif wait > 0:
                raise WriteDeferred(f"installation {installation_id}'s next write turn is {wait:.1f} s away; "
                                    f"{call} waits for it", retry_after=wait)
        left = self.claim(installation_id)
        if left > 0:  # the write before came late to its turn: the rest of its interval, never more
            self._sleep(left)
            left = self.claim(installation_id)
        if left > 0:  # a write outside the turns took the slot meanwhile: book a turn and come back
            raise WriteDeferred(f"installation {installation_id} wrote to GitHub less than "
                                f"{self._interval_ms / 1000:g} s ago; {call} waits", retry_after=left,
                                turn_held=False)


def holds_turn() -> bool:
    """True once per job run scheduled at a turn booked for it (job.meta, set where the turn was booked:
    bot.intake.queueing): its first write takes that turn."""
    job = get_current_job()
    return bool(job is not None and job.meta.pop(TURN_META, None))


class SpacedGitHub:
    """An IssueWriter whose writes take the installation's turn first; reads go straight through."""

    def __init__(self, github, spacing: WriteSpacing, installation_id: int,
                 turn: Callable[[], bool] = holds_turn):
        self._github, self._spacing, self._installation_id = github, spacing, installation_id
        self._turn = turn  # whether this write was booked before (the running job's turn)

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._github, name)
        if name not in WRITES:
            return call

        def spaced(*args, **kwargs):
            self._spacing.wait_for(self._installation_id, name, holds_turn=self._turn())
            try:
                return call(*args, **kwargs)
            finally:  # answered or not, the request may have reached GitHub
                self._spacing.done(self._installation_id)

        return spaced


def spaced_writers(github_for: Callable[[int], Any], redis: Redis, interval: float) -> Callable[[int], Any]:
    """`github_for` (installation id → IssueWriter) with every installation's writes spaced `interval` s apart
    across the processes that share `redis`; unchanged when the interval is 0."""
    if not interval:
        return github_for
    spacing = WriteSpacing(redis, interval)
    return lambda installation_id: SpacedGitHub(github_for(installation_id), spacing, installation_id)
