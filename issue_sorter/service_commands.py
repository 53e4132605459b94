"""The service's processes: run (all of them, on embedded defaults), web, worker, training-worker, cron, migrate."""

from __future__ import annotations

import argparse
import os
import sys

from core.queues import BOT_QUEUES
from core.settings import Settings
from issue_sorter.command import NO_SETTINGS, WEBHOOK, add


def add_commands(commands) -> None:
    """Add the service's commands to the `issue-sorter` tree."""
    run = add(commands, "run", cmd_run, "the whole service on embedded defaults (SQLite, local Redis)",
              settings=NO_SETTINGS, database=False)
    run.add_argument("--no-bootstrap", action="store_true", help="do not train a model when none is promoted")
    web = add(commands, "web", cmd_web, "the webhook receiver under gunicorn", settings=WEBHOOK, database=False)
    web.add_argument("--host", default="0.0.0.0")
    web.add_argument("--workers", type=int, default=2)
    worker = add(commands, "worker", cmd_worker,
                 "an RQ worker labelling issues and recording decisions; run as many as you like, anywhere",
                 database=False)
    worker.add_argument("--queues", default=",".join(BOT_QUEUES))
    worker.add_argument("--burst", action="store_true", help="exit when the queues are empty")
    training = add(commands, "training-worker", cmd_training_worker,
                   "an RQ worker for retraining runs (loads no serving model)", database=False)
    training.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    add(commands, "cron", cmd_cron, "RQ's cron scheduler (periodic retraining); run exactly one", database=False)
    migrate = add(commands, "migrate", cmd_migrate, "apply database migrations", database=False)
    migrate.add_argument("revision", nargs="?", default="head")


def cmd_run(args: argparse.Namespace, _settings: None) -> int:
    from issue_sorter.run import run_service

    return run_service(os.environ.copy(), bootstrap=not args.no_bootstrap)


def cmd_web(args: argparse.Namespace, settings: Settings) -> int:
    # settings were checked by the boundary: a problem stops here, not inside a gunicorn worker
    bind = f"{args.host}:{settings.port}"
    os.execvp(sys.executable, [sys.executable, "-m", "gunicorn", "--bind", bind, "--workers", str(args.workers),
                               "--access-logfile", "-", "bot.app:create_app_from_env()"])


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from bot.worker import run_worker

    _require_redis(settings, "worker")
    run_worker(settings, queues=tuple(args.queues.split(",")), burst=args.burst)
    return 0


def cmd_training_worker(args: argparse.Namespace, settings: Settings) -> int:
    from trainer.worker import run_worker

    _require_redis(settings, "training-worker")
    run_worker(settings, burst=args.burst)
    return 0


def cmd_cron(_args: argparse.Namespace, settings: Settings) -> int:
    _require_redis(settings, "cron")
    os.execvp(sys.executable, [sys.executable, "-m", "rq.cli", "cron", "issue_sorter.cron", "--url", settings.redis_url])


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from core.migrate import upgrade

    upgrade(settings.database_url, args.revision)
    print(f"database at revision {args.revision}")
    return 0


def _require_redis(settings: Settings, command: str) -> None:
    if not settings.redis_url:
        raise SystemExit(f"issue-sorter {command}: REDIS_URL is not set")
