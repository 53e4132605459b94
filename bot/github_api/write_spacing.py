"""GitHub's write spacing per installation, across every worker process: a write claims the installation's
slot in Redis first; a write that must wait raises WriteDeferred, and its job is rescheduled
(bot.intake.queueing.reschedule), so the worker takes another job instead of sleeping.

GitHub asks for writes (POST, PATCH, PUT, DELETE) at least a second apart per installation. PyGithub's own
throttle sleeps in the thread and counts one client's writes, so several workers on one installation
wrote more often than that.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from redis import Redis
from redis.commands.core import Script

from bot.github_api.client import TransientGitHubError

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
    """GitHub was not asked: the installation wrote less than the interval ago. `retry_after` says when."""

    deferral = True  # bot.intake.queueing reschedules it without counting an attempt; nothing reached GitHub


class WriteSpacing:
    """The slots of every installation, in one Redis shared by all workers."""

    def __init__(self, redis: Redis, interval: float, *, jitter: Callable[[], float] = random.random):
        self._redis, self._interval_ms = redis, max(1, round(interval * 1000))
        self._jitter = jitter  # a share of an interval added to a wait, so waiting jobs do not all return at once
        self._script: Script = redis.register_script(_CLAIM_LUA)
        self._done: Script = redis.register_script(_DONE_LUA)

    def claim(self, installation_id: int) -> float:
        """0.0 when the installation may write now (the slot is taken), else the seconds until it may."""
        return int(self._script(keys=[SLOT_KEY.format(int(installation_id))], args=[self._interval_ms])) / 1000

    def done(self, installation_id: int) -> None:
        """The installation's write has returned: its next may come an interval from now."""
        self._done(keys=[SLOT_KEY.format(int(installation_id))], args=[self._interval_ms])

    def wait_for(self, installation_id: int, call: str) -> None:
        """Claim the slot for `call`, or raise WriteDeferred with when to try again."""
        wait = self.claim(installation_id)
        if wait > 0:
            retry = wait + self._jitter() * self._interval_ms / 1000
            raise WriteDeferred(f"installation {installation_id} wrote to GitHub less than "
                                f"{self._interval_ms / 1000:g} s ago; {call} waits {retry:.1f} s", retry_after=retry)


class SpacedGitHub:
    """An IssueWriter whose writes claim the installation's slot first; reads go straight through."""

    def __init__(self, github, spacing: WriteSpacing, installation_id: int):
        self._github, self._spacing, self._installation_id = github, spacing, installation_id

    def __getattr__(self, name: str) -> Any:
        call = getattr(self._github, name)
        if name not in WRITES:
            return call

        def spaced(*args, **kwargs):
            self._spacing.wait_for(self._installation_id, name)
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
