"""`python -m issue_sorter.healthcheck [ROLE]`: exit 0 while this container's process does its job.

Without ROLE the role is the container's own command (its process 1, `issue-sorter web|worker|...`), so the
image's one HEALTHCHECK checks whichever role a container runs; a one-shot command (migrate, bootstrap-model)
has nothing to check."""

from __future__ import annotations

import os
import socket
import sys
import urllib.request
from http.client import HTTPException
from pathlib import Path

from redis import Redis
from redis.exceptions import RedisError

from core.settings import ConfigError, Settings

ROLES = ("web", "worker", "cron")  # worker: `worker` and `training-worker` alike
COMMAND_ROLES = {"web": "web", "worker": "worker", "training-worker": "worker", "cron": "cron"}
CONTAINER_COMMAND = Path("/proc/1/cmdline")  # the container's process 1: the image's entry point and its command


def role_of_command(argv: list[str]) -> str | None:
    """The health check's role for an `issue-sorter` command line (the entry point and its arguments); None
    for a one-shot command."""
    for index, arg in enumerate(argv):
        if Path(arg).name == "issue-sorter" or arg == "issue_sorter.cli":
            rest = [word for word in argv[index + 1:] if not word.startswith("-")]
            return COMMAND_ROLES.get(rest[0]) if rest else None
    return None


def container_role(command_line: Path = CONTAINER_COMMAND) -> str | None:
    """The role of the command this container runs, read from its process 1."""
    try:
        argv = command_line.read_bytes().split(b"\0")
    except OSError:
        return None
    return role_of_command([word.decode(errors="replace") for word in argv if word])


def web_answers(url: str, timeout: float = 5.0) -> bool:
    """GET `url` (the web process's /healthz on loopback: its database and Redis are reachable) answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:  # noqa: S310 - our own loopback URL
            return answer.status == 200
    except (OSError, HTTPException):  # refused, timed out, a 503 (an HTTPError is an OSError), garbled while starting
        return False


def check(role: str, settings: Settings, hostname: str | None = None) -> str | None:
    """None when `role` is healthy here, else what is wrong."""
    if role == "web":
        url = f"http://127.0.0.1:{settings.port}/healthz"
        return None if web_answers(url) else f"no 200 from {url}"
    if not settings.redis_url:
        return "REDIS_URL is not set"
    hostname = hostname or socket.gethostname()
    from rq import Worker
    from rq.cron import CronScheduler

    redis = Redis.from_url(settings.redis_url, socket_connect_timeout=3, socket_timeout=5)
    try:  # a worker's key lives only while it sends heartbeats; the cron scheduler's expires 2 minutes after
        registered = Worker.all(connection=redis) if role == "worker" else CronScheduler.all(redis, cleanup=False)
        if any(process.hostname == hostname for process in registered):
            return None
        return f"no RQ {role} of host {hostname} is registered in Redis"
    except RedisError as error:
        return f"Redis is unreachable: {error}"
    finally:
        redis.close()


def main(argv: list[str] | None = None) -> int:
    """Exit 0 when healthy, 1 with the reason on stderr otherwise."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0] not in ROLES):
        print(f"usage: python -m issue_sorter.healthcheck [{'|'.join(ROLES)}]", file=sys.stderr)
        return 2
    role = args[0] if args else container_role()
    if role is None:
        return 0  # a one-shot command: it is healthy while it runs
    try:
        problem = check(role, Settings.from_env(os.environ, require_webhook_secret=False))
    except ConfigError as error:
        problem = str(error)
    if problem:
        print(f"unhealthy: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
