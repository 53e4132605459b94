"""A repository's memory filled from its confirmed issues (core.memory.fill), off the labelling path: the feedback
queue's bot.jobs.fill_memory, queued after a backfill stored a repository's history and when the fleet first
serves a repository with a version (once, however many workers). At most one fill of a repository by a version
waits in the queue; a running one does not count, since it may already have passed the issues stored since.
After each decision the decided issue's row follows at once (bot.decisions.act).

An installation has at most its quota of fills in the queue at once (core.quotas.Quotas.queued_memory_fills):
one more waits in its installation's line in Redis, and each fill that starts lets the next one in, so fifty
repositories of one installation promoted at once cannot fill the one feedback worker's queue before others.
"""

from __future__ import annotations

import logging

from redis import Redis
from rq.job import Job
from sqlalchemy.orm import Session, sessionmaker

from core import memory, store
from core.db import session_scope
from core.queues import CRASH_RETRY, FILL_MEMORY, KEEP_SECONDS, enqueue
from core.quotas import Quotas, installation_of

log = logging.getLogger(__name__)
WAITING_KEY = "issue-sorter:memory-fill-waiting:{repo}:{version}"  # set while that fill waits in the queue
SERVED_KEY = "issue-sorter:memory-served:{repo}:{version}"  # set once a process of the fleet served it
QUEUED_KEY = "issue-sorter:memory-fills-queued:{installation}"  # set of "repo version" in the queue
LINE_KEY = "issue-sorter:memory-fills-line:{installation}"  # list of "repo version" waiting their turn
LIMIT = Quotas.queued_memory_fills
# in the queue if the installation has room, else in its line: 1 queued, 0 waiting
_ADMIT_LUA = """
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('SADD', KEYS[1], ARGV[1]); redis.call('EXPIRE', KEYS[1], ARGV[3]); return 1
end
redis.call('RPUSH', KEYS[2], ARGV[1]); redis.call('EXPIRE', KEYS[2], ARGV[3]); return 0
"""
# a fill started: it leaves the queue's set, and the first of the line takes its place (nil: none waits)
_NEXT_LUA = """
redis.call('SREM', KEYS[1], ARGV[1])
if redis.call('SCARD', KEYS[1]) >= tonumber(ARGV[2]) then return false end
local next = redis.call('LPOP', KEYS[2])
if next then redis.call('SADD', KEYS[1], next); redis.call('EXPIRE', KEYS[1], ARGV[3]) end
return next
"""


def queue_fill(redis: Redis, repo: str, version: str, *, limit: int = LIMIT) -> Job | None:
    """Queue the fill of `repo`'s memory by `version`, unless one is already waiting (None then); with
    `limit` of its installation's fills queued already, it waits its turn (None too) and is queued later."""
    if not redis.set(WAITING_KEY.format(repo=repo, version=version), 1, nx=True, ex=KEEP_SECONDS):
        return None
    installation = installation_of(repo)
    keys = (QUEUED_KEY.format(installation=installation), LINE_KEY.format(installation=installation))
    if not redis.eval(_ADMIT_LUA, 2, *keys, f"{repo} {version}", limit, KEEP_SECONDS):
        log.warning("memory of %s: fill by %s waits its turn: %s has %d fills queued, its quota "
                    "(ISSUE_SORTER_MAX_QUEUED_MEMORY_FILLS); it is queued when one of them starts",
                    repo, version, installation, limit)
        return None
    return _enqueue(redis, repo, version)


def _enqueue(redis: Redis, repo: str, version: str) -> Job:
    log.info("memory of %s: fill by %s queued", repo, version)
    return enqueue(redis, FILL_MEMORY, {"repo": repo, "version": version}, retry=CRASH_RETRY)


def queue_fill_on_first_serving(redis: Redis, repo: str, version: str, *, limit: int = LIMIT) -> Job | None:
    """A worker serves `repo` with `version` for the first time in its process (bot.labeling.serving's on_serve):
    the fill is queued by the first process of the whole fleet only. Each of N workers (and each restart)
    queued its own before, N fills of every repository per promotion; what is stored after the first fill
    reaches the memory by bot.decisions.act after each decision, or by the fill a backfill queues."""
    if not redis.set(SERVED_KEY.format(repo=repo, version=version), 1, nx=True, ex=KEEP_SECONDS):
        return None
    return queue_fill(redis, repo, version, limit=limit)


def queue_fill_by_serving(redis: Redis, sessions: sessionmaker[Session], repo: str, *, limit: int = LIMIT
                          ) -> Job | None:
    """queue_fill for the version serving `repo` now (after a backfill stored its history); None without one."""
    with session_scope(sessions) as session:
        serving = store.serving_model_for(session, repo)
    return queue_fill(redis, repo, serving.version, limit=limit) if serving is not None else None


def mark_started(redis: Redis, repo: str, version: str, *, limit: int = LIMIT) -> Job | None:
    """The fill is running: what is stored from now on needs a fill queued again, and the next fill of its
    installation waiting its turn is queued (that job, or None)."""
    redis.delete(WAITING_KEY.format(repo=repo, version=version))
    installation = installation_of(repo)
    keys = (QUEUED_KEY.format(installation=installation), LINE_KEY.format(installation=installation))
    following = redis.eval(_NEXT_LUA, 2, *keys, f"{repo} {version}", limit, KEEP_SECONDS)
    if following is None:
        return None
    following = following if isinstance(following, str) else following.decode()
    next_repo, _, next_version = following.partition(" ")
    return _enqueue(redis, next_repo, next_version)


def fill_repository(sessions: sessionmaker[Session], repo: str, embedder, *, batch: int = memory.FILL_BATCH
                    ) -> str:
    """Embed `repo`'s confirmed issues the embedder's version lacks, committing each batch; what was done."""
    if not memory.can_embed(embedder):
        return f"skipped: the model serving {repo} embeds nothing (TF-IDF alone)"
    with session_scope(sessions) as session:
        repository = store.find_repository(session, full_name=repo)
        if repository is None:
            return f"skipped: {repo} is not stored"
        progress = memory.fill(session, repository.id, embedder, batch=batch, checkpoint=session.commit)
    return f"memory of {repo}: {progress.describe()}"
