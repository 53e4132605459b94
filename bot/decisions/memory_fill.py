"""A repository's memory filled from its confirmed issues, off the labelling path.

The fill (core.memory.fill) runs as bot.jobs.fill_memory on the feedback queue. It is queued after a
backfill has stored a repository's labelled history, and when the fleet first serves a repository with a
version (after a promotion; once, however many workers): at most one fill of a repository by a version
waits in the queue at a time. A running one does not count, since it may already have passed the issues stored since.
The confirmed issues are those of a kind and those that carry only the repository's own labels (the backfill
keeps them; core.memory stores them under NO_KIND, outside every kind's vote). After each decision, the
decided issue's row follows it at once (`follow_issue`).
"""

from __future__ import annotations

import logging

from redis import Redis
from rq.job import Job
from sqlalchemy.orm import Session, sessionmaker

from core import memory, store
from core.db import session_scope
from core.queues import CRASH_RETRY, FILL_MEMORY, KEEP_SECONDS, enqueue

log = logging.getLogger(__name__)
WAITING_KEY = "issue-sorter:memory-fill-waiting:{repo}:{version}"  # set while that fill waits in the queue
SERVED_KEY = "issue-sorter:memory-served:{repo}:{version}"  # set once a process of the fleet served it


def queue_fill(redis: Redis, repo: str, version: str) -> Job | None:
    """Queue the fill of `repo`'s memory by `version`, unless one is already waiting; None then."""
    if not redis.set(WAITING_KEY.format(repo=repo, version=version), 1, nx=True, ex=KEEP_SECONDS):
        return None
    log.info("memory of %s: fill by %s queued", repo, version)
    return enqueue(redis, FILL_MEMORY, {"repo": repo, "version": version}, retry=CRASH_RETRY)


def queue_fill_on_first_serving(redis: Redis, repo: str, version: str) -> Job | None:
    """A worker serves `repo` with `version` for the first time in its process (bot.labeling.serving's on_serve):
    the fill is queued by the first process of the whole fleet only. Each of N workers (and each restart)
    queued its own before, N fills of every repository per promotion; what is stored after the first fill
    reaches the memory by `follow_issue` after each decision, or by the fill a backfill queues."""
    if not redis.set(SERVED_KEY.format(repo=repo, version=version), 1, nx=True, ex=KEEP_SECONDS):
        return None
    return queue_fill(redis, repo, version)


def queue_fill_by_serving(redis: Redis, sessions: sessionmaker[Session], repo: str) -> Job | None:
    """queue_fill for the version serving `repo` now (after a backfill stored its history); None without one."""
    with session_scope(sessions) as session:
        serving = store.serving_model_for(session, repo)
    return queue_fill(redis, repo, serving.version) if serving is not None else None


def mark_started(redis: Redis, repo: str, version: str) -> None:
    """The fill is running: what is stored from now on needs a fill queued again."""
    redis.delete(WAITING_KEY.format(repo=repo, version=version))


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


def follow_issue(session: Session, repo: str, number: int, embedder) -> None:
    """After a decision on `repo`#`number`: its memory row follows what humans confirmed of it, the kind or
    only own labels (core.memory.follow_confirmation); nothing when the issue is not stored there (moved)."""
    repository = store.find_repository(session, full_name=repo)
    issue = store.find_issue(session, repository, number) if repository is not None else None
    if issue is not None:
        memory.follow_confirmation(session, issue, embedder)
