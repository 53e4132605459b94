"""GET /healthz: what a load balancer needs, the database and Redis answering; with the metrics token
(bot.metrics), also which queues have a live worker, which have a live worker whose model is loaded and
warmed up (its first job pays for neither: `issue-sorter run` waits for it), dry-run mode and what failed."""

from __future__ import annotations

from flask import Blueprint, current_app
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from bot.metrics import has_metrics_token, live_processes_by_queue
from core.engines import WARMED_KEY

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz():
    services = current_app.extensions["bot"]
    database, redis = _failure(lambda: _select_one(services["engine"])), _failure(services["redis"].ping)
    healthy = database is None and redis is None
    report = {"database": "ok" if database is None else "unavailable",
              "redis": "ok" if redis is None else "unavailable"}
    if has_metrics_token(services["settings"].metrics_token):  # the operator's monitoring, not a stranger
        report |= {"dry_run": services["settings"].dry_run,
                   **({"database_error": database} if database else {}),
                   **({"redis_error": redis} if redis else {})}
        if redis is None:  # informative: the receiver still takes deliveries while workers restart
            report |= _check_workers(services["redis"])
    return report, 200 if healthy else 503


def _failure(check) -> str | None:
    """None when `check()` answers, else its error's class name."""
    try:
        check()
    except (SQLAlchemyError, RedisError) as error:
        return type(error).__name__
    return None


def _select_one(engine) -> None:
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))


def _check_workers(redis) -> dict[str, dict[str, bool]]:
    """For each queue, whether a worker with a recent heartbeat serves it ("workers"), and one with its model
    warmed up ("warmed_up")."""
    try:
        warmed = {process.decode() for process in redis.hkeys(WARMED_KEY)}
        live = live_processes_by_queue(redis)
    except RedisError:
        return {"workers": {}, "warmed_up": {}}
    return {"workers": {queue: bool(processes) for queue, processes in live.items()},
            "warmed_up": {queue: any(process in warmed for process in processes) for queue, processes in live.items()}}
