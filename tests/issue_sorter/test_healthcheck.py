"""The containers' health checks: a worker or the cron scheduler is healthy while it is registered in Redis
from this host, and not once it is gone or when Redis is unreachable; the web check is in tests/install."""

import pytest
from rq import SimpleWorker
from rq.cron import CronScheduler

from core.queues import SERIALIZER
from core.settings import Settings
from issue_sorter.healthcheck import check, main

pytestmark = pytest.mark.redis
HOST = "container-1"


def settings_for(redis_url: str) -> Settings:
    return Settings(webhook_secret="", redis_url=redis_url, port=1)


def test_a_worker_is_healthy_while_it_is_registered_from_this_host(redis, redis_url):
    settings = settings_for(redis_url)
    assert check("worker", settings, HOST) == f"no RQ worker of host {HOST} is registered in Redis"
    worker = SimpleWorker(["labeling"], connection=redis, serializer=SERIALIZER)
    worker.hostname = HOST
    worker.register_birth()
    assert check("worker", settings, HOST) is None
    assert check("worker", settings, "another-container") is not None  # its neighbour's worker is not its own
    assert check("cron", settings, HOST) is not None  # a worker is no cron scheduler
    worker.register_death()
    assert check("worker", settings, HOST) is not None


def test_the_cron_scheduler_is_healthy_while_it_is_registered_from_this_host(redis, redis_url):
    settings = settings_for(redis_url)
    scheduler = CronScheduler(connection=redis)
    scheduler.hostname = HOST
    scheduler.register_birth()
    assert check("cron", settings, HOST) is None
    scheduler.register_death()
    redis.delete(scheduler.key)
    assert check("cron", settings, HOST) is not None


def test_unreachable_redis_or_no_web_is_unhealthy_with_the_reason(monkeypatch, capsys):
    unreachable = Settings(webhook_secret="", redis_url="redis://127.0.0.1:1/0", port=1)
    assert check("worker", unreachable, HOST).startswith("Redis is unreachable")
    assert check("web", unreachable) == "no 200 from http://127.0.0.1:1/healthz"
    monkeypatch.setenv("PORT", "1")
    assert main(["web"]) == 1
    assert "unhealthy: no 200" in capsys.readouterr().err
    assert main(["scheduler"]) == 2  # a role it does not know
