"""Write turns: each installation's writes to GitHub booked one interval apart, in Redis, without PyGithub.

A job that will write takes the installation's next free turn once, atomically (Redis's clock: every
process books against the same one), and is scheduled at it: it waits in RQ's scheduled registry, not in a
worker, and when it runs it writes without asking again. A turn less than INLINE_WAIT away is waited for in
the worker instead: RQ's scheduler releases a job on a whole second, so going through it cost the
nearest turns up to a second more than the turn itself. The receiver books a labelling job's turn in its
enqueueing script (bot.intake.queueing); a worker books one for any other write (bot.github_api.write_spacing).
"""

from __future__ import annotations

from redis import Redis
from redis.commands.core import Script

TURN_KEY = "issue-sorter:write-turn:{}"  # installation id → its next free turn (ms, Redis's clock)
TURN_META = "write_turn"  # job.meta of a job scheduled at a turn booked for it: its first write takes it
INLINE_WAIT = 1.0  # seconds: a turn nearer than this (and than one interval) is waited for in the worker

# Lua: book the next free turn of the installation whose key is `key`; returns the wait (ms, 0: now) and the
# turn (ms). The key lives until the turn after it is free: an idle installation keeps nothing.
RESERVE_FUNCTION = r"""
local function reserve_turn(key, interval)
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
  local turn = math.max(now, tonumber(redis.call('GET', key) or '0'))
  redis.call('SET', key, turn + interval, 'PX', turn + interval - now)
  return turn - now, turn
end
"""
_RESERVE_LUA = RESERVE_FUNCTION + "\nlocal wait = reserve_turn(KEYS[1], tonumber(ARGV[1]))\nreturn wait\n"


def interval_ms(interval: float) -> int:
    """The spacing in whole milliseconds, as the scripts take it."""
    return max(1, round(interval * 1000))


def inline_wait_ms(interval: float) -> int:
    """The longest wait for a turn spent in the worker rather than in RQ's scheduled registry (ms)."""
    return min(interval_ms(interval), round(INLINE_WAIT * 1000))


def reserve_turn(redis: Redis, installation_id: int, interval: float) -> float:
    """Book the installation's next free write turn: the seconds until it (0.0: now)."""
    script: Script | None = getattr(redis, "_issue_sorter_reserve_turn", None)
    if script is None:
        script = redis._issue_sorter_reserve_turn = redis.register_script(_RESERVE_LUA)
    return int(script(keys=[TURN_KEY.format(int(installation_id))], args=[interval_ms(interval)])) / 1000
