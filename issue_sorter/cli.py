"""`issue-sorter`: the one command for users and operators (service, workers, migrations, models)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from bot.config import ConfigError, Settings


def load_settings(*, require_webhook_secret: bool = False) -> Settings:
    try:
        return Settings.from_env(os.environ, require_webhook_secret=require_webhook_secret)
    except ConfigError as error:
        raise SystemExit(f"issue-sorter: {error}") from None


def cmd_run(args: argparse.Namespace) -> int:
    from issue_sorter.run import run_service

    return run_service(os.environ.copy(), bootstrap=not args.no_bootstrap)


def cmd_web(args: argparse.Namespace) -> int:
    settings = load_settings(require_webhook_secret=True)  # fail here, not inside a gunicorn worker
    bind = f"{args.host}:{settings.port}"
    os.execvp(sys.executable, [sys.executable, "-m", "gunicorn", "--bind", bind, "--workers", str(args.workers),
                               "--access-logfile", "-", "bot.app:create_app_from_env()"])


def cmd_worker(args: argparse.Namespace) -> int:
    from bot.worker import run_worker

    settings = load_settings()
    if not settings.redis_url:
        raise SystemExit("issue-sorter worker: REDIS_URL is not set")
    run_worker(settings, queues=tuple(args.queues.split(",")), burst=args.burst)
    return 0


def cmd_cron(args: argparse.Namespace) -> int:
    settings = load_settings()
    if not settings.redis_url:
        raise SystemExit("issue-sorter cron: REDIS_URL is not set")
    os.execvp(sys.executable, [sys.executable, "-m", "rq.cli", "cron", "issue_sorter.cron_config",
                               "--url", settings.redis_url])


def cmd_migrate(args: argparse.Namespace) -> int:
    from bot.migrate import upgrade

    settings = load_settings()
    upgrade(settings.database_url, args.revision)
    print(f"database at revision {args.revision}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="issue-sorter", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="the whole service on embedded defaults (SQLite, local Redis)")
    run.add_argument("--no-bootstrap", action="store_true", help="do not train a model when none is promoted")
    run.set_defaults(func=cmd_run)
    web = commands.add_parser("web", help="the webhook receiver under gunicorn")
    web.add_argument("--host", default="0.0.0.0")
    web.add_argument("--workers", type=int, default=2)
    web.set_defaults(func=cmd_web)
    worker = commands.add_parser("worker", help="an RQ worker; run as many as you like, on any machine")
    worker.add_argument("--queues", default="labeling,feedback,training")
    worker.add_argument("--burst", action="store_true", help="exit when the queues are empty")
    worker.set_defaults(func=cmd_worker)
    commands.add_parser("cron", help="RQ's cron scheduler (periodic retraining)").set_defaults(func=cmd_cron)
    migrate = commands.add_parser("migrate", help="apply database migrations")
    migrate.add_argument("revision", nargs="?", default="head")
    migrate.set_defaults(func=cmd_migrate)
    from issue_sorter import operations
    from trainer.cli import add_commands

    add_commands(commands, load_settings)
    operations.add_commands(commands, load_settings)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())
