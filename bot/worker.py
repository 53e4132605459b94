"""`issue-sorter worker`: build the WorkerContext once, load the serving model once, run an RQ worker."""

from __future__ import annotations

import logging

from redis import Redis
from rq import SimpleWorker

from bot import context
from bot.serving import NO_MODEL, Served, ServingModels
from core import store
from core.abandoned import MAINTENANCE_INTERVAL, requeue_abandoned
from core.db import make_sessionmaker, session_scope
from core.queues import BOT_QUEUES
from core.settings import Settings

log = logging.getLogger(__name__)


def build_context(settings: Settings, *, redis: Redis | None = None, github_for=None,
                  github_app=None) -> context.WorkerContext:
    sessions = make_sessionmaker(settings.database_url)

    def resolve(repo: str | None) -> Served | None:
        with session_scope(sessions) as session:
            promotion = store.serving_promotion_for(session, repo)
            if promotion is None:
                return None
            return Served(promotion.scope, promotion.model_version.version, promotion.model_version.path)

    if github_for is None and not settings.dry_run:
        from bot.github_client import GitHubApp

        app = GitHubApp(settings.app_id, settings.private_key, settings.api_url,
                        request_interval=settings.github_request_interval)
        github_for, github_app = app.writer_for, app
    return context.WorkerContext(settings=settings, sessionmaker=sessions, models=ServingModels(resolve),
                                 github_for=github_for, redis=redis or Redis.from_url(settings.redis_url),
                                 github_app=github_app)


def run_worker(settings: Settings, *, queues: tuple[str, ...] = BOT_QUEUES, burst: bool = False) -> bool:
    """Serve jobs until stopped. SimpleWorker: no fork, so the model loaded here is reused by every
    job (a forked horse after torch ran in the parent hangs; STACK-NOTES section 4)."""
    ctx = build_context(settings)
    if ctx.models.for_repository(None) is None:
        raise SystemExit(f"issue-sorter worker: {NO_MODEL}")
    if ctx.github_for is None:
        log.warning("dry-run: no GitHub App credentials; issues are classified and stored, nothing is written")
    context.configure(ctx)
    requeue_abandoned(ctx.redis, queues)  # a job the previous worker died in runs again now
    worker = SimpleWorker(list(queues), connection=ctx.redis, maintenance_interval=MAINTENANCE_INTERVAL)
    return worker.work(burst=burst, with_scheduler=True, logging_level="INFO")
