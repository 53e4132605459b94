"""`issue-sorter training-worker`: an RQ worker for the training queue, with a context of its own.

It loads no serving model: each retraining job loads the models it compares, and exits with them.
"""

from __future__ import annotations

from redis import Redis
from rq import SimpleWorker

from core.abandoned import MAINTENANCE_INTERVAL, WORKER_TTL, requeue_abandoned
from core.db import make_sessionmaker
from core.queues import SERIALIZER, TRAINING_QUEUE, ContractJob
from core.settings import Settings
from trainer import context


def build_context(settings: Settings, *, redis: Redis | None = None) -> context.TrainingContext:
    return context.TrainingContext(settings=settings, sessionmaker=make_sessionmaker(settings.database_url),
                                   redis=redis or Redis.from_url(settings.redis_url))


def run_worker(settings: Settings, *, burst: bool = False) -> bool:
    """Serve training jobs until stopped (SimpleWorker: torch never runs in a forking parent)."""
    ctx = build_context(settings)
    context.configure(ctx)
    requeue_abandoned(ctx.redis, [TRAINING_QUEUE])  # a run the previous worker died in runs again now
    worker = SimpleWorker([TRAINING_QUEUE], connection=ctx.redis, maintenance_interval=MAINTENANCE_INTERVAL,
                          worker_ttl=WORKER_TTL, serializer=SERIALIZER, job_class=ContractJob)
    return worker.work(burst=burst, with_scheduler=True, logging_level="INFO")
