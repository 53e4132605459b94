"""`python -m issue_sorter.healthcheck ROLE`: exit 0 while this container's process does its job."""

from __future__ import annotations

import os
import socket
import sys
import urllib.request

from redis import Redis
from redis.exceptions import RedisError

from core.settings import ConfigError, Settings

ROLES = ("web", "worker", "cron")  # worker: `worker` and `training-worker` alike


def web_healthy(port: int, timeout: float = 5.0) -> bool:
    """The web process on this host answers 200 on /healthz (its database and Redis are reachable)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=timeout) as response:
            return response.status == 200
    except OSError:  # refused, timed out, or a 503 (HTTPError is an OSError too)
        return False


def worker_registered(redis: Redis, hostname: str) -> bool:
    """An RQ worker of this host is registered: its key lives only while it sends heartbeats."""
    from rq import Worker

    return any(worker.hostname == hostname for worker in Worker.all(connection=redis))


def cron_registered(redis: Redis, hostname: str) -> bool:
    """RQ's cron scheduler of this host is registered: its hash expires 2 minutes after its last heartbeat."""
    from rq.cron import CronScheduler

    return any(scheduler.hostname == hostname for scheduler in CronScheduler.all(redis, cleanup=False))


def check(role: str, settings: Settings, hostname: str | None = None) -> str | None:
    """None when `role` is healthy here, else what is wrong."""
    if role == "web":
        return None if web_healthy(settings.port) else f"no 200 from http://127.0.0.1:{settings.port}/healthz"
    if not settings.redis_url:
        return "REDIS_URL is not set"
    hostname = hostname or socket.gethostname()
    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=3, socket_timeout=5)
    try:
        registered = worker_registered if role == "worker" else cron_registered
        if registered(redis, hostname):
            return None
        return f"no RQ {role} of host {hostname} is registered in Redis"
    except RedisError as error:
        return f"Redis is unreachable: {error}"
    finally:
        redis.close()


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when healthy, 1 with the reason on stderr otherwise."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in ROLES:
        print(f"usage: python -m issue_sorter.healthcheck {{{','.join(ROLES)}}}", file=sys.stderr)
        return 2
    try:
        problem = check(args[0], Settings.from_env(os.environ, require_webhook_secret=False))
    except ConfigError as error:
        problem = str(error)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
