"""GET /healthz: is the database reachable, is Redis reachable, which queues have a live worker."""

from __future__ import annotations

from flask import Blueprint, current_app
from redis.exceptions import RedisError
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from bot.metrics import live_workers

blueprint = Blueprint("health", __name__)


@blueprint.get("/healthz")
def healthz():
    services = current_app.extensions["bot"]
    report = {"database": _check_database(services["engine"]), "redis": _check_redis(services["redis"]),
              "dry_run": services["settings"].dry_run}
    healthy = report["database"] == "ok" and report["redis"] == "ok"
    if report["redis"] == "ok":  # informative: the receiver still takes deliveries while workers restart
        report["workers"] = _check_workers(services["redis"])
    return report, 200 if healthy else 503


def _check_database(engine) -> str:
    try:
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        return "ok"
    except SQLAlchemyError as error:
        return f"unavailable: {type(error).__name__}"


def _check_workers(redis) -> dict[str, bool]:
    """For each queue, whether any worker with a recent heartbeat serves it."""
    try:
        return {queue: count > 0 for queue, count in live_workers(redis).items()}
    except RedisError:
        return {}


def _check_redis(redis) -> str:
    try:
        redis.ping()
        return "ok"
    except RedisError as error:
        return f"unavailable: {type(error).__name__}"
