"""`issue-sorter worker`: build the WorkerContext once, load the serving model once, run an RQ worker."""

from __future__ import annotations

import functools
import importlib
import logging
import time
from collections.abc import Callable

from redis import Redis
from rq import SimpleWorker
from sqlalchemy.orm import Session

from bot import context
from bot.decisions import memory_fill
from bot.github_api import write_spacing
from bot.intake.queueing import DELIVERY_KEY
from bot.labeling.serving import NO_MODEL, Served, ServingModels
from core import engines, inference_slots, store
from core.abandoned import MAINTENANCE_INTERVAL, WORKER_TTL, requeue_abandoned
from core.classifier import load_classifier
from core.db import make_sessionmaker, session_scope
from core.inference_slots import InferenceSlots
from core.pickled_jobs import Upgrade, convert_pickled_jobs
from core.queues import BOT_QUEUES, SERIALIZER, ContractJob
from core.quotas import Quotas
from core.settings import Settings

log = logging.getLogger(__name__)
# RQ sends the worker's own heartbeat after every job and twice more around the next dequeue, each time as
# three separate Redis commands: 9 round trips a job on a busy queue. One pipelined heartbeat stands for the
# others sent within this many seconds: the worker's key lives WORKER_TTL + 60 s from the last one sent.
HEARTBEAT_GAP_SECONDS = 1.0


def build_context(settings: Settings, *, redis: Redis | None = None, github_for=None,
                  github_app=None) -> context.WorkerContext:
    sessions = make_sessionmaker(settings.database_url)

    def resolve(repo: str | None, session: Session | None = None) -> Served | None:
        if session is None:  # a caller without a transaction of its own
            with session_scope(sessions) as own:
                return resolve(repo, own)
        promotion = store.serving_promotion_for(session, repo)
        if promotion is None:
            return None
        return Served(promotion.scope, promotion.model_version.version, promotion.model_version.path)

    if github_for is None and not settings.dry_run:
        from bot.github_api.client import GitHubApp

        app = GitHubApp.from_settings(settings, write_interval=0.0)  # spaced in Redis, below, not by sleeping
        github_for, github_app = app.writer_for, app
    # One issue per job gains little from more threads, and loses much when other processes (the web
    # workers, the training worker) want the same cores: OpenMP threads then wait for each other.
    redis = redis or Redis.from_url(settings.redis_url)
    if github_for is not None:  # one write a second per installation, across every worker process
        github_for = write_spacing.spaced_writers(github_for, redis, settings.github_write_interval)
    # a version serving a repository for the first time here: its memory is filled on the feedback queue
    quotas = Quotas.from_settings(settings)
    on_serve = (functools.partial(memory_fill.queue_fill_on_first_serving, redis, limit=quotas.queued_memory_fills)
                if settings.memory else None)
    loader = functools.partial(load_classifier, threads=settings.worker_threads, engine=settings.engine,
                               hardware=engines.this_machine())
    models = ServingModels(resolve, loader, on_serve=on_serve, on_load=functools.partial(record_engine, redis),
                           max_loaded=quotas.loaded_models)
    slots = settings.inference_slots
    slots = InferenceSlots(inference_slots.default_slots(settings.worker_threads) if slots is None else slots)
    return context.WorkerContext(settings=settings, sessionmaker=sessions, models=models,
                                 github_for=github_for, redis=redis, github_app=github_app, inference_slots=slots)


def record_engine(redis: Redis, served: Served, classifier) -> None:
    """The engine this process serves a scope's model with, for GET /metrics (none: a TF-IDF model); with
    ISSUE_SORTER_ENGINE=measure, once the warm-up has measured it (core.engines.MeasuredChoice)."""
    engines.when_served(classifier, functools.partial(engines.record_engine, redis, served.scope, served.version))


class ServingWorker(SimpleWorker):
    """RQ's SimpleWorker (every job runs in this process: the model loaded at start serves them all) that
    warms the model up once RQ has forked its scheduler process, before the first job.

    The scheduler is RQ's only fork here; a torch op in the parent before a fork is the trap of STACK-NOTES
    section 4, so nothing but loading (no inference) happens before it.
    """

    def __init__(self, *args, warm_up: Callable[[], None], **kwargs):
        super().__init__(*args, **kwargs)
        self._warm_up = warm_up
        self._state_sent: tuple[str, float] | None = None  # the state this worker last wrote itself, and when
        self._heartbeat_sent: float | None = None  # time.monotonic() of the last heartbeat sent

    def set_state(self, state: str, pipeline=None) -> None:
        """RQ's set_state, without the round trip when this worker wrote that same state less than
        HEARTBEAT_GAP_SECONDS ago (idle after a job, then idle again before the next dequeue). A state set in
        RQ's pipelines is always sent, and not taken as written: a pipeline can be discarded (WATCH)."""
        if pipeline is None and self._state_sent is not None and self._state_sent[0] == state \
                and time.monotonic() - self._state_sent[1] < HEARTBEAT_GAP_SECONDS:
            self._state = state
            return
        super().set_state(state, pipeline=pipeline)
        self._state_sent = (state, time.monotonic()) if pipeline is None else None

    def heartbeat(self, timeout: int | None = None, pipeline=None) -> None:
        """RQ's heartbeat in one round trip, and none when one was sent less than HEARTBEAT_GAP_SECONDS ago.

        A heartbeat with a job's own TTL, or inside one of RQ's pipelines (each job's start), goes as RQ
        sends it."""
        if timeout is not None or pipeline is not None:
            super().heartbeat(timeout, pipeline=pipeline)
        elif self._heartbeat_sent is None or time.monotonic() - self._heartbeat_sent >= HEARTBEAT_GAP_SECONDS:
            with self.connection.pipeline(transaction=False) as batch:
                super().heartbeat(pipeline=batch)
                batch.execute()
        else:
            return
        self._heartbeat_sent = time.monotonic()

    def _start_scheduler(self, *args, **kwargs):
        super()._start_scheduler(*args, **kwargs)
        started = time.perf_counter()
        self._warm_up()
        milliseconds = (time.perf_counter() - started) * 1000
        log.info("model warmed up in %.0f ms: ready for the first job", milliseconds)
        engines.record_warmed(self.connection, milliseconds)


def upgrade_queued_jobs(redis: Redis, queues: tuple[str, ...]) -> Upgrade:
    """An older version's pickled jobs, rewritten as JSON (core.pickled_jobs). A refused one's delivery
    marker goes, so that GitHub's redelivery of it is queued anew instead of taken for a duplicate."""
    upgrade = convert_pickled_jobs(redis, queues)
    for job_id in upgrade.refused:
        redis.delete(DELIVERY_KEY.format(job_id.split("--", 1)[-1]))
    return upgrade


def run_worker(settings: Settings, *, queues: tuple[str, ...] = BOT_QUEUES, burst: bool = False) -> bool:
    """Serve jobs until stopped: the serving model is loaded here, before the first job, and warmed up
    as soon as the worker has started (ServingWorker)."""
    ctx = build_context(settings)
    engines.forget_warmed(ctx.redis)  # before loading: this process is not warmed up yet, whatever Redis held
    if ctx.models.for_repository(None) is None:
        raise SystemExit(f"issue-sorter worker: {NO_MODEL}")
    if ctx.github_for is None:
        log.warning("dry-run: no GitHub App credentials; issues are classified and stored, nothing is written")
    context.configure(ctx)
    importlib.import_module("bot.jobs")  # RQ would import it for the first job
    upgrade_queued_jobs(ctx.redis, queues)  # an older version's pickled jobs run too, as JSON
    requeue_abandoned(ctx.redis, queues)  # a job the previous worker died in runs again now
    worker = ServingWorker(list(queues), connection=ctx.redis, warm_up=ctx.models.warm_up,
                           maintenance_interval=MAINTENANCE_INTERVAL, worker_ttl=WORKER_TTL,
                           serializer=SERIALIZER, job_class=ContractJob)
    return worker.work(burst=burst, with_scheduler=True, logging_level="INFO")
