"""Flask factory: settings and services in, an app with /webhook, /healthz, /metrics and /review out."""

from __future__ import annotations

import logging
import os

from flask import Flask
from redis import Redis
from sqlalchemy.engine import Engine
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from bot import health, metrics
from bot.intake import webhooks
from bot.review import web as review
from core.db import make_engine
from core.settings import Settings

MAX_DELIVERY_BYTES = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB


def create_app(settings: Settings, *, redis: Redis | None = None, engine: Engine | None = None) -> Flask:
    app = Flask(__name__)
    app.config["MAX_CONTENT_LENGTH"] = MAX_DELIVERY_BYTES
    if redis is None:
        if not settings.redis_url:
            raise ValueError("REDIS_URL is not set; `issue-sorter run` starts a local Redis and sets it")
        # short timeouts: a dead Redis must turn into a quick 503, not a hung request
        redis = Redis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
    app.extensions["bot"] = {"settings": settings, "redis": redis,
                             "engine": engine or make_engine(settings.database_url)}
    app.register_blueprint(webhooks.blueprint)
    app.register_blueprint(health.blueprint)
    app.register_blueprint(metrics.blueprint)
    app.after_request(metrics.count_delivery)
    app.register_error_handler(RequestEntityTooLarge, _too_large)
    app.register_error_handler(HTTPException, _http_error)
    review.install(app, settings)
    return app


def _too_large(_error: RequestEntityTooLarge):
    return {"error": f"delivery larger than GitHub's limit of {MAX_DELIVERY_BYTES} bytes"}, 413


def _http_error(error: HTTPException):
    # GitHub shows the answer in the delivery log: JSON like every other answer, not Flask's HTML page
    return {"error": f"{error.name}: {error.description}"}, error.code


def create_app_from_env() -> Flask:
    """gunicorn entry point: `gunicorn 'bot.app:create_app_from_env()'`."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return create_app(Settings.from_env(os.environ))
