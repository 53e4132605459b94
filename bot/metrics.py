"""GET /metrics in Prometheus's text format (the maintained prometheus-client): deliveries by event and
outcome, queue depths, failed jobs, live workers, the engine each live bot worker serves with, job durations,
labels applied and abstained, GitHub API errors. Read at scrape time from Redis (core.metrics) and the database,
so it counts every process.

The web process faces the internet: /metrics answers only a request bearing ISSUE_SORTER_METRICS_TOKEN
(404 when none is set), and the slow figures (a GROUP BY over every prediction, the list of workers) are
reused for ISSUE_SORTER_METRICS_CACHE_SECONDS, so scrapes cannot load the database."""

from __future__ import annotations

import datetime as dt
import hmac
import threading
import time
from collections.abc import Callable

from flask import Blueprint, Response, current_app, g, request
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from redis.exceptions import RedisError
from rq import Queue, Worker
from rq.registry import FailedJobRegistry
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from bot.intake.events import event_label
from core import engines, metrics
from core.queues import QUEUES, SERIALIZER
from core.tables import Prediction

blueprint = Blueprint("metrics", __name__)
WORKER_ALIVE_SECONDS = 120  # a worker whose last heartbeat is older is counted dead (RQ beats every ~10 s)
STATUS_OUTCOMES = {200: "ping", 204: "ignored", 400: "malformed", 401: "rejected", 409: "replayed",
                   413: "too_large", 415: "unsupported", 500: "error", 503: "unavailable"}


UNSIGNED = "unsigned"  # the event of every answer given before the signature held: its header is anyone's


def count_delivery(response):
    """After each /webhook answer: one delivery of this event, by outcome (an app.after_request hook). A
    delivery queued (or found a duplicate) was counted by the script that queued it (bot.intake.queueing).

    Only signed deliveries are counted by their event; the rest (401, 413: answered before the signature
    was checked or held) all under UNSIGNED, with one field per outcome."""
    if request.endpoint == "webhooks.receive" and not g.get("delivery_counted"):
        event = event_label(request.headers.get("X-GitHub-Event")) if g.get("signed") else UNSIGNED
        outcome = g.get("outcome") or STATUS_OUTCOMES.get(response.status_code, "other")
        metrics.count_delivery(current_app.extensions["bot"]["redis"], event, outcome)
    return response


@blueprint.get("/metrics")
def exposition():
    services = current_app.extensions["bot"]
    if not services["settings"].metrics_token:
        return {"error": "metrics are off: set ISSUE_SORTER_METRICS_TOKEN and scrape with it"}, 404
    if not has_metrics_token(services["settings"].metrics_token):
        return {"error": "metrics need the bearer token"}, 401, {"WWW-Authenticate": "Bearer"}
    cache = services.setdefault("metrics_cache", FigureCache(services["settings"].metrics_cache_seconds))
    registry = CollectorRegistry()
    registry.register(Collector(services["redis"], lambda: Session(services["engine"]), cache))
    return Response(generate_latest(registry), mimetype=CONTENT_TYPE_LATEST)


def has_metrics_token(token: str | None) -> bool:
    """True when this request carries `Authorization: Bearer <token>` (compared as bytes, in constant time)."""
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("utf-8", "replace"), token.encode("utf-8", "replace"))


class FigureCache:
    """Figures computed at most once per `seconds` in this process; errors are not kept."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds, self.clock = seconds, clock
        self._figures: dict[str, tuple[float, object]] = {}
        self._lock = threading.Lock()  # gunicorn's threads share the process

    def get(self, name: str, compute: Callable[[], object]):
        with self._lock:
            kept = self._figures.get(name)
            if kept is not None and self.clock() - kept[0] < self.seconds:
                return kept[1]
        value = compute()
        with self._lock:
            self._figures[name] = (self.clock(), value)
        return value


def live_workers(redis, now: dt.datetime | None = None) -> dict[str, int]:
    """Workers with a recent heartbeat, per queue they serve."""
    return {queue: len(processes) for queue, processes in live_processes_by_queue(redis, now).items()}


def live_processes_by_queue(redis, now: dt.datetime | None = None) -> dict[str, list[str]]:
    """host:pid of each worker with a recent heartbeat, per queue it serves (core.engines.process_name's form)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    alive: dict[str, list[str]] = {queue: [] for queue in QUEUES}
    for worker in Worker.all(connection=redis):
        beat = worker.last_heartbeat
        if beat is None or (now - beat.replace(tzinfo=beat.tzinfo or dt.timezone.utc)).total_seconds() > \
                WORKER_ALIVE_SECONDS:
            continue
        for queue in worker.queue_names():
            alive.setdefault(queue, []).append(f"{worker.hostname}:{worker.pid}")
    return alive


def serving_engines(redis) -> list[tuple[str, str, str, str]]:
    """(worker, scope, version, engine) of each live worker's loaded models (core.engines.ENGINES_KEY)."""
    live = {process for processes in live_processes_by_queue(redis).values() for process in processes}
    rows = []
    for field, value in redis.hgetall(engines.ENGINES_KEY).items():
        process, _, scope = field.decode().partition("|")
        version, _, engine = value.decode().partition("|")
        if process in live:
            rows.append((process, scope, version, engine))
    return sorted(rows)


def _family(kind, name: str, documentation: str, labels: list[str], rows):
    """A metric family of `kind` holding each (label values, value) of `rows`."""
    family = kind(name, documentation, labels=labels)
    for values, value in rows:
        family.add_metric(list(values), value)
    return family


class Collector:
    """Yields every metric afresh at each scrape; a service that cannot be read yields nothing of its own."""

    def __init__(self, redis, session_factory, cache: FigureCache | None = None):
        self.redis, self.session_factory = redis, session_factory
        self.cache = cache or FigureCache(0)

    def collect(self):
        try:
            yield from self._from_redis()
        except RedisError:
            pass  # /healthz says Redis is down; the database's metrics still come
        try:
            yield from self._from_database()
        except SQLAlchemyError:
            pass

    def _from_redis(self):
        deliveries = self.redis.hgetall(metrics.DELIVERIES_KEY).items()
        yield _family(CounterMetricFamily, "issue_sorter_deliveries", "Webhook deliveries answered, by event and "
                      "outcome", ["event", "outcome"],
                      ((field.decode().partition("|")[::2], int(count)) for field, count in deliveries))
        yield _family(GaugeMetricFamily, "issue_sorter_queue_depth", "Jobs waiting, by queue", ["queue"],
                      (([name], Queue(name, connection=self.redis, serializer=SERIALIZER).count) for name in QUEUES))
        yield _family(GaugeMetricFamily, "issue_sorter_failed_jobs", "Jobs in RQ's failed registry", ["queue"],
                      (([name], FailedJobRegistry(name, connection=self.redis, serializer=SERIALIZER).count)
                       for name in QUEUES))
        alive = self.cache.get("workers", lambda: live_workers(self.redis))
        yield _family(GaugeMetricFamily, "issue_sorter_workers_alive", "Workers with a recent heartbeat, by queue",
                      ["queue"], (([queue], count) for queue, count in alive.items()))
        yield _family(GaugeMetricFamily, "issue_sorter_serving_engine", "1 for each engine a live bot worker serves "
                      "a model with (chosen on its machine: core.engines)", ["worker", "scope", "version", "engine"],
                      ((row, 1) for row in self.cache.get("engines", lambda: serving_engines(self.redis))))
        yield self._job_durations()
        errors = self.redis.hgetall(metrics.GITHUB_ERRORS_KEY).items()
        yield _family(CounterMetricFamily, "issue_sorter_github_errors", "GitHub API errors met by jobs, by status",
                      ["status"], (([status.decode()], int(count)) for status, count in errors))

    def _job_durations(self):
        family = HistogramMetricFamily("issue_sorter_job_duration_seconds", "How long jobs ran, by job",
                                       labels=["job"])
        for job in sorted(name.decode() for name in self.redis.smembers(metrics.JOBS_KEY)):
            data = {key.decode(): float(value) for key, value in
                    self.redis.hgetall(metrics.JOB_KEY.format(job)).items()}
            buckets = [(repr(bound), data.get(repr(bound), 0.0)) for bound in metrics.DURATION_BUCKETS]
            family.add_metric([job], buckets + [("+Inf", data.get("count", 0.0))], data.get("sum", 0.0))
        return family

    def _from_database(self):
        yield _family(CounterMetricFamily, "issue_sorter_predictions", "Issues classified, by what the bot did "
                      "(applied, abstained, suggested, shadow, held, ...)", ["outcome"],
                      (([outcome], count) for outcome, count in self.cache.get("predictions",
                                                                              self._predictions_by_outcome)))

    def _predictions_by_outcome(self) -> list[tuple[str, int]]:
        with self.session_factory() as session:
            return list(session.execute(select(Prediction.outcome, func.count()).group_by(Prediction.outcome)))
