"""Enqueueing a delivery once, and rescheduling a job GitHub asked us to retry later.

The web process's only contact with Redis is `enqueue_once`; jobs are named by the contract in
core.queues, so enqueueing never imports the worker's code (nor torch).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
import re
import time
from typing import Any

from redis import Redis
from redis.commands.core import Script
from rq import get_current_job
from rq.registry import ScheduledJobRegistry

from bot.github_api.write_turns import RESERVE_FUNCTION, TURN_KEY, TURN_META, inline_wait_ms, interval_ms
from core import metrics
from core.queues import (
    CRASH_RETRY,
    LABELING_QUEUE,
    SERIALIZER,
    JobSpec,
    enqueue,
    job_options,
    make_queue,
    split_text,
)

log = logging.getLogger(__name__)

DELIVERY_KEY = "issue-sorter:delivery:{}"  # the marker: a redelivered delivery makes no second job
DELIVERY_TTL_SECONDS = 7 * 24 * 3600  # GitHub lets you redeliver for a few days; the DB remembers forever
# The signature covers the body, not the X-GitHub-Delivery header: a captured body resent under a new id
# passes it. GitHub's redeliveries resend the same body under the same id (the id names the event), so a
# body seen under another id is a replay. GitHub redelivers for 3 days; the hour is for clocks and queues.
BODY_KEY = "issue-sorter:body:{}"  # SHA-256 of a signed body → the delivery id it came with
REPLAY_WINDOW_SECONDS = 3 * 24 * 3600 + 3600


def job_id(kind: str, delivery_id: str) -> str:
    """`label_issue--<delivery>`; RQ allows only letters, digits, `_` and `-` in job ids."""
    safe = delivery_id if re.fullmatch(r"[A-Za-z0-9_-]{1,100}", delivery_id) else (
        hashlib.sha256(delivery_id.encode()).hexdigest()[:40])
    return f"{kind}--{safe}"


class ReplayedBody(ValueError):
    """A signed body already delivered under another delivery id: a replay, not GitHub's redelivery."""


def body_digest(body: bytes) -> str:
    """The key a signed body is remembered by."""
    return hashlib.sha256(body).hexdigest()


# One round trip for a delivery (the receiver's cost is mostly Redis round trips: bench/load.py): the body's
# replay check, the delivery's marker, the deliveries counter and the job's own writes, as RQ made them,
# run in one script. A script runs whole or not at all: Redis dying mid-request leaves the marker and its
# job both or neither, never a marker without its job (which would make the redelivery sweep, and the
# redelivery, skip it). Our writes cannot fail half-way (SET, HSET, SADD, RPUSH, EXPIRE on our own keys).
_ENQUEUE_ONCE_LUA = RESERVE_FUNCTION + r"""
-- KEYS[1] the delivery's marker, KEYS[2] the body's key ('' for none), KEYS[3] the counter hash ('' for none)
-- ARGV[1] delivery id, ARGV[2] marker value, ARGV[3] marker TTL, ARGV[4] body TTL, ARGV[5] counter field
-- prefix, ARGV[6] the job's commands in one string (_pack: one argument packs in a fraction of the time of
-- eighty): for each command its number of words and a newline, then each word as its length, a newline
-- and its bytes.
-- KEYS[4] the installation's write turn ('' for none), ARGV[7] the turns' interval (ms), ARGV[8] the job's
-- commands when its turn is later (scheduled, packed as ARGV[6]), ARGV[9] the scheduled registry: its
-- score, the turn's second rounded up (RQ moves a job once its second has begun), is set here; ARGV[10] the
-- nearest wait (ms) scheduled: a nearer turn is queued now and its write waits the rest in the worker
if KEYS[2] ~= '' then
  local seen = redis.call('GET', KEYS[2])
  if seen and seen ~= ARGV[1] then return {'replayed', seen} end
end
local outcome = 'duplicate'
if redis.call('EXISTS', KEYS[1]) == 0 then
  outcome = 'queued'
  if KEYS[2] ~= '' then redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[4]) end
  redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
  local commands, at, second = ARGV[6], 1, nil
  if KEYS[4] ~= '' then
    local wait, turn = reserve_turn(KEYS[4], tonumber(ARGV[7]))
    if wait >= tonumber(ARGV[10]) then commands, second = ARGV[8], tostring(math.ceil(turn / 1000)) end
  end
  while at <= #commands do
    local newline = string.find(commands, '\n', at, true)
    local words = {}
    for word = 1, tonumber(string.sub(commands, at, newline - 1)) do
      at = newline + 1
      newline = string.find(commands, '\n', at, true)
      local size = tonumber(string.sub(commands, at, newline - 1))
      words[word] = string.sub(commands, newline + 1, newline + size)
      newline = newline + size
    end
    at = newline + 1
    if second and words[1] == 'ZADD' and words[2] == ARGV[9] then words[3] = second end
    redis.call(unpack(words))
  end
end
if KEYS[3] ~= '' then redis.call('HINCRBY', KEYS[3], ARGV[5] .. outcome, 1) end
return {outcome}
"""


def enqueue_once(redis: Redis, spec: JobSpec, delivery_id: str, kwargs: dict[str, Any], *,
                 body_sha256: str | None = None, count_event: str | None = None,
                 write_interval: float = 0.0) -> bool:
    """Enqueue `spec(**kwargs)` unless this delivery was already enqueued; True when a job was made.

    With `body_sha256`, a body already seen under another delivery id raises ReplayedBody. With
    `count_event`, the delivery is counted for GET /metrics (core.metrics) as queued or duplicate. All of it
    is one script run in Redis (_ENQUEUE_ONCE_LUA). A job whose spec writes at a turn (`spec.write_turn`,
    with a `write_interval`) books its installation's next one there and is queued now when it is free or
    less than a second away (its write waits the rest in the worker), else scheduled at it: a flood of one
    installation waits in RQ's scheduled registry, not in the queue before everyone else's jobs, and each of
    its jobs runs once (bot.github_api.write_turns). Raises redis.exceptions.RedisError when Redis is
    unreachable; the caller answers 503 so GitHub marks the delivery failed and it can be redelivered (a
    script that did run before the connection broke leaves its marker: the redelivery is a duplicate).
    """
    options = {"job_id": job_id(spec.short_name, delivery_id), "retry": CRASH_RETRY}
    turn = bool(spec.write_turn and write_interval and kwargs.get("installation_id"))
    if turn:
        options["meta"] = {TURN_META: 1}
    commands = _recorded(redis, spec, kwargs, options)
    keys = [DELIVERY_KEY.format(delivery_id), BODY_KEY.format(body_sha256) if body_sha256 else "",
            metrics.DELIVERIES_KEY if count_event else "",
            TURN_KEY.format(int(kwargs["installation_id"])) if turn else ""]
    arguments = [delivery_id, spec.queue, DELIVERY_TTL_SECONDS, REPLAY_WINDOW_SECONDS,
                 f"{count_event}|" if count_event else "", commands]
    if turn:
        arguments += [interval_ms(write_interval), _recorded(redis, spec, kwargs, options, at=_PLACEHOLDER),
                      ScheduledJobRegistry(spec.queue, connection=redis, serializer=SERIALIZER).key,
                      inline_wait_ms(write_interval)]
    outcome, *seen = _script(redis)(keys=keys, args=arguments)
    outcome = _text(outcome)
    if outcome == "replayed":
        raise ReplayedBody(f"body already delivered as {_text(seen[0])}")
    if outcome == "duplicate":
        log.info("delivery %s already enqueued; ignoring the redelivery", delivery_id)
    return outcome == "queued"


_PLACEHOLDER = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)  # a scheduled job's time, set by the script


def _recorded(redis: Redis, spec: JobSpec, kwargs: dict[str, Any], options: dict[str, Any], *,
              at: dt.datetime | None = None) -> bytes:
    """The job's writes, exactly as RQ makes them (enqueued, or scheduled `at`), recorded and packed."""
    recorder = redis.pipeline()
    recorder.multi()  # RQ wants its pipeline in MULTI mode: the calls queue in it, and we never send them
    try:
        enqueue(redis, spec, kwargs, at=at, pipeline=recorder, **options)
        return _pack(redis, [args for args, _options in recorder.command_stack])
    finally:
        recorder.reset()


def _pack(redis: Redis, commands: list[tuple[Any, ...]]) -> bytes:
    """Commands as _ENQUEUE_ONCE_LUA reads them, each word encoded as redis-py would send it."""
    encode, parts = redis.get_encoder().encode, []
    for words in commands:
        parts.append(b"%d\n" % len(words))
        for word in map(encode, words):
            parts += [b"%d\n" % len(word), word]
    return b"".join(parts)


def _script(redis: Redis) -> Script:
    """The registered script, per client: it runs by its SHA, and is loaded again after Redis restarts."""
    script = getattr(redis, "_issue_sorter_enqueue_once", None)
    if script is None:
        script = redis.register_script(_ENQUEUE_ONCE_LUA)
        redis._issue_sorter_enqueue_once = script
    return script


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def reschedule(redis: Redis, spec: JobSpec, kwargs: dict[str, Any], *, delay: float | None,
               base_seconds: float, max_attempts: int, why: Exception) -> str:
    """Run the current job again later without blocking the worker: after `delay` seconds (GitHub's
    reset time) or, when GitHub named none, with doubling back-off from `base_seconds`.

    A write deferred for the installation's spacing (`why.deferral`, bot.github_api.write_spacing) asked GitHub
    nothing: it runs again when its slot may be free, and counts no attempt. The new job carries no issue
    text (core.queues.split_text): its copy would be old by then, so it reads the issue from GitHub."""
    job = get_current_job()
    meta = job.meta if job else {}
    attempt, deferrals = int(meta.get("attempt", 1)), int(meta.get("deferrals", 0))
    deferral = bool(getattr(why, "deferral", False))
    if not deferral and attempt >= max_attempts:
        log.error("giving up on %s after %d attempts: %s", kwargs.get("delivery_id"), attempt, why)
        return f"failed: GitHub kept failing ({why})"
    delay = delay if delay is not None else base_seconds * 2 ** (attempt - 1)
    base_id = re.sub(r"(--(retry|defer)\d+)+$", "", job.id) if job else spec.short_name
    new_id = f"{base_id}--defer{deferrals + 1}" if deferral else f"{base_id}--retry{attempt}"
    meta = {"attempt": attempt if deferral else attempt + 1, "deferrals": deferrals + deferral}
    if getattr(why, "turn_held", False):  # its write turn is booked: the next run writes without booking again
        meta[TURN_META] = 1
    # RQ's scheduled registry counts whole seconds and moves a job once its second has begun: rounded up,
    # a job never runs before its turn
    at = dt.datetime.fromtimestamp(math.ceil(time.time() + max(0.0, delay)), dt.UTC)
    make_queue(redis, job.origin if job else LABELING_QUEUE).enqueue_at(
        at, spec.name, kwargs=split_text(spec, kwargs)[0],
        **job_options(job_id=new_id, retry=CRASH_RETRY, meta=meta))
    if deferral:
        waits_for = getattr(why, "waits_for", "its installation's write slot")  # or a review's turn
        log.info("%s waits for %s; again in %.1f s", kwargs.get("delivery_id"), waits_for, delay)
        return f"deferred {delay:.1f} s: waiting for {waits_for}"
    log.warning("GitHub error on %s; retry %d in %.0f s: %s", kwargs.get("delivery_id"), attempt, delay, why)
    return f"rescheduled in {delay:.0f} s"
