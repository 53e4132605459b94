"""/metrics and /healthz on the internet-facing port: /metrics ran a GROUP BY over every prediction and
listed the workers for anyone who asked, and /healthz named error classes and dry-run mode. Now /metrics
needs the operator's bearer token, its slow figures are reused between scrapes, and /healthz tells a
stranger only whether the database and Redis answer."""

from __future__ import annotations

import dataclasses

import pytest
from rq import SimpleWorker

from bot.app import create_app
from bot.metrics import FigureCache
from core.queues import SERIALIZER
from core.settings import ConfigError, Settings
from tests.bot.test_metrics import BEARER, TOKEN, scrape
from tests.conftest import dead_redis

pytestmark = [pytest.mark.redis]


def _app(app_settings, redis, token: str | None = TOKEN):
    return create_app(dataclasses.replace(app_settings, metrics_token=token), redis=redis)


def test_metrics_answer_only_the_bearer_of_the_token(app_settings, redis):
    client = _app(app_settings, redis).test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics").headers["WWW-Authenticate"] == "Bearer"
    assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer é"}).status_code == 401
    assert client.get("/metrics", headers=BEARER).status_code == 200


def test_without_a_token_metrics_are_off(app_settings, redis):
    client = _app(app_settings, redis, token=None).test_client()
    assert client.get("/metrics").status_code == 404
    assert client.get("/metrics", headers={"Authorization": "Bearer "}).status_code == 404


def test_healthz_tells_a_stranger_only_whether_the_database_and_redis_answer(app_settings, redis):
    assert _app(app_settings, redis).test_client().get("/healthz").json == {"database": "ok", "redis": "ok"}
    dead = _app(app_settings, dead_redis()).test_client()
    assert dead.get("/healthz").status_code == 503
    assert dead.get("/healthz").json == {"database": "ok", "redis": "unavailable"}
    full = dead.get("/healthz", headers=BEARER).json
    assert full["dry_run"] is False and full["redis_error"] in ("ConnectionError", "TimeoutError")


def test_slow_figures_are_reused_until_the_cache_expires(app_settings, redis):
    app, now = _app(app_settings, redis), [0.0]
    app.extensions["bot"]["metrics_cache"] = FigureCache(30, clock=lambda: now[0])
    client = app.test_client()
    alive = ("issue_sorter_workers_alive", (("queue", "training"),))
    assert scrape(client)[alive] == 0
    worker = SimpleWorker(["training"], connection=redis, serializer=SERIALIZER)
    worker.register_birth()
    worker.heartbeat()
    try:
        now[0] = 29.0
        assert scrape(client)[alive] == 0  # the worker list of the last scrape
        now[0] = 30.0
        assert scrape(client)[alive] == 1
    finally:
        worker.register_death()


def test_the_token_comes_from_the_environment_or_a_file_and_is_never_shown(tmp_path):
    (tmp_path / "token").write_text("a-token-from-a-mounted-file\n")
    settings = Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "ISSUE_SORTER_METRICS_TOKEN_PATH":
                                  str(tmp_path / "token")})
    assert settings.metrics_token == "a-token-from-a-mounted-file" and "a-token" not in repr(settings)
    with pytest.raises(ConfigError, match="ISSUE_SORTER_METRICS_TOKEN must be at least 16 characters"):
        Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s", "ISSUE_SORTER_METRICS_TOKEN": "short"})
