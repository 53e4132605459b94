"""Enqueueing a delivery once, and rescheduling a job GitHub asked us to retry later.

The web process's only contact with Redis is `enqueue_once`; jobs are named by the contract in
core.queues, so enqueueing never imports the worker's code (nor torch).
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import timedelta
from typing import Any

from redis import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError
from rq import get_current_job

from core.queues import CRASH_RETRY, LABELING_QUEUE, JobSpec, enqueue, job_options, make_queue, split_text

log = logging.getLogger(__name__)

DELIVERY_KEY = "issue-sorter:delivery:{}"  # SET NX marker: a redelivered delivery makes no second job
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


def enqueue_once(redis: Redis, spec: JobSpec, delivery_id: str, kwargs: dict[str, Any], *,
                 body_sha256: str | None = None) -> bool:
    """Enqueue `spec(**kwargs)` unless this delivery was already enqueued; True when a job was made.

    With `body_sha256`, a body already seen under another delivery id raises ReplayedBody. The marker and
    the job are one MULTI/EXEC: Redis dying mid-request leaves both or neither, never a marker without its
    job (which would make the redelivery sweep, and the redelivery, skip it). Raises
    redis.exceptions.RedisError when Redis is unreachable; the caller answers 503 so GitHub marks the
    delivery failed and it can be redelivered.
    """
    body_key = BODY_KEY.format(body_sha256) if body_sha256 else None
    first_sight = bool(body_key and redis.set(body_key, delivery_id, nx=True, ex=REPLAY_WINDOW_SECONDS))
    if body_key and not first_sight:
        seen = redis.get(body_key)
        if seen is not None and seen.decode() != delivery_id:
            raise ReplayedBody(f"body already delivered as {seen.decode()}")
    marker = DELIVERY_KEY.format(delivery_id)
    with redis.pipeline() as pipe:
        try:
            pipe.watch(marker)
            if pipe.exists(marker):
                log.info("delivery %s already enqueued; ignoring the redelivery", delivery_id)
                return False
            pipe.multi()
            pipe.set(marker, spec.queue, ex=DELIVERY_TTL_SECONDS)
            enqueue(redis, spec, kwargs, job_id=job_id(spec.short_name, delivery_id), retry=CRASH_RETRY,
                    pipeline=pipe)
            pipe.execute()
        except WatchError as error:
            # the same delivery twice at once, the other request having queued it; or (redis-py raises
            # WatchError for this too) the connection broke mid-transaction: Redis restarting. Only the
            # marker tells them apart: answering 202 for the second lost a delivery (chaos run 8).
            if _exists(redis, marker):
                log.info("delivery %s enqueued by a concurrent request; ignoring this one", delivery_id)
                return False
            if first_sight:
                _forget(redis, body_key)
            raise RedisConnectionError(f"the connection to Redis broke while queueing: {error}") from error
        except Exception:
            if first_sight:
                redis.delete(body_key)  # let GitHub's redelivery of this body try again
            raise
    return True


def _exists(redis: Redis, key: str) -> bool:
    """Whether `key` exists; a Redis that is still down says so by raising (the caller answers 503)."""
    return bool(redis.exists(key))


def _forget(redis: Redis, key: str) -> None:
    try:
        redis.delete(key)
    except RedisError:
        pass  # Redis is down: harmless, GitHub's redelivery carries the same delivery id as the body's key


def reschedule(redis: Redis, spec: JobSpec, kwargs: dict[str, Any], *, delay: float | None,
               base_seconds: float, max_attempts: int, why: Exception) -> str:
    """Run the current job again later without blocking the worker: after `delay` seconds (GitHub's
    reset time) or, when GitHub named none, with doubling back-off from `base_seconds`.

    The new job carries no issue text (core.queues.split_text): its copy would be old by then, so it reads
    the issue from GitHub."""
    job = get_current_job()
    attempt = int(job.meta.get("attempt", 1)) if job else 1
    if attempt >= max_attempts:
        log.error("giving up on %s after %d attempts: %s", kwargs.get("delivery_id"), attempt, why)
        return f"failed: GitHub kept failing ({why})"
    delay = delay if delay is not None else base_seconds * 2 ** (attempt - 1)
    base_id = (job.id if job else spec.short_name).split("--retry")[0]
    make_queue(redis, job.origin if job else LABELING_QUEUE).enqueue_in(
        timedelta(seconds=max(0.0, delay)), spec.name, kwargs=split_text(spec, kwargs)[0],
        **job_options(job_id=f"{base_id}--retry{attempt}", meta={"attempt": attempt + 1}, retry=CRASH_RETRY))
    log.warning("GitHub error on %s; retry %d in %.0f s: %s", kwargs.get("delivery_id"), attempt, delay, why)
    return f"rescheduled in {delay:.0f} s"
