"""The service's processes: run (all of them, on embedded defaults), web, worker, training-worker, cron, migrate."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from core.queues import BOT_QUEUES, LABELING_QUEUE
from core.settings import Settings
from issue_sorter.command import NO_SETTINGS, WEBHOOK, add
from issue_sorter.web_server import WebLimits

CHECKOUT = Path(__file__).resolve().parents[1]


def add_commands(commands) -> None:
    """Add the service's commands to the `issue-sorter` tree."""
    run = add(commands, "run", cmd_run, "the whole service on embedded defaults (SQLite, local Redis)",
              settings=NO_SETTINGS, database=False)
    run.add_argument("--no-bootstrap", action="store_true", help="do not train a model when none is promoted")
    run.add_argument("--forward", metavar="CHANNEL_URL",
                     help="also relay deliveries from a webhook proxy channel (e.g. https://smee.io/...) to the web")
    forward = add(commands, "forward", cmd_forward, "relay deliveries from a webhook proxy channel to the receiver",
                  database=False)
    forward.add_argument("channel", help="the channel's URL, e.g. https://smee.io/abc123 (GitHub's webhook URL)")
    forward.add_argument("--to", help="the receiver (default: http://127.0.0.1:$PORT/webhook)")
    web = add(commands, "web", cmd_web, "the webhook receiver and the review page (waitress: threads, bounded waits)",
              settings=WEBHOOK, database=False)
    web.add_argument("--host", default="0.0.0.0")
    web.add_argument("--threads", type=int, default=WebLimits.threads,
                     help="threads answering /webhook, /healthz and /metrics (default: %(default)s)")
    web.add_argument("--review-threads", type=int, default=WebLimits.review_threads,
                     help="threads of the review page alone, whose calls to GitHub never take the receiver's "
                          "(default: %(default)s)")
    worker = add(commands, "worker", cmd_worker,
                 "an RQ worker labelling issues (--queues feedback: recording decisions); run as many as you "
                 "like, anywhere, one queue each", database=False)
    worker.add_argument("--queues", default=LABELING_QUEUE, help=f"one of {', '.join(BOT_QUEUES)} (default: "
                        f"%(default)s); several, comma-separated, can lose a job to a worker killed mid-dequeue")
    worker.add_argument("--burst", action="store_true", help="exit when the queues are empty")
    training = add(commands, "training-worker", cmd_training_worker,
                   "an RQ worker for retraining runs (loads no serving model)", database=False)
    training.add_argument("--burst", action="store_true", help="exit when the queue is empty")
    add(commands, "cron", cmd_cron, "RQ's cron scheduler (periodic retraining); run exactly one", database=False)
    setup = add(commands, "setup", cmd_setup, "register the GitHub App (manifest flow) and write .env",
                settings=NO_SETTINGS, database=False)
    setup.add_argument("--webhook-url", required=True,
                       help="the public URL GitHub posts deliveries to: https://HOST/webhook, or a webhook proxy "
                            "channel (https://smee.io/..., kept in .env for `run` to relay)")
    setup.add_argument("--channel", action="store_true",
                       help="the webhook URL is a webhook proxy channel on another host than smee.io")
    setup.add_argument("--public-url", help="this deployment's public https://HOST: the review page's sign-in "
                                            "(without it the App has no sign-in callback and the page is off)")
    setup.add_argument("--org", help="register the App for this organisation (default: your user account)")
    setup.add_argument("--name", help="the App's name (default: app.yml's; it must be unique on GitHub)")
    setup.add_argument("--port", type=int, default=3000, help="local port of the setup page and GitHub's redirect")
    setup.add_argument("--web-url", default="https://github.com", help="GitHub Enterprise Server: https://HOST")
    setup.add_argument("--api-url", default="https://api.github.com", help="GitHub Enterprise Server: https://HOST/api/v3")
    setup.add_argument("--manifest", type=Path, default=CHECKOUT / "app.yml", help="the manifest (default: app.yml)")
    setup.add_argument("--force", action="store_true", help="register another App although .env has one")
    setup.add_argument("--no-browser", action="store_true", help="print the page's address, open nothing")
    credentials = add(commands, "redis-credentials", cmd_redis_credentials,
                      "generate Redis passwords per service and the ACL file docker-compose.yml mounts",
                      settings=NO_SETTINGS, database=False)
    credentials.add_argument("directory", type=Path, nargs="?", default=Path("secrets"),
                             help="where to write them (default: ./secrets)")
    migrate = add(commands, "migrate", cmd_migrate, "apply database migrations", database=False)
    migrate.add_argument("revision", nargs="?", default="head")


def cmd_run(args: argparse.Namespace, _settings: None) -> int:
    from issue_sorter.run import run_service

    return run_service(os.environ.copy(), bootstrap=not args.no_bootstrap, forward=args.forward)


def cmd_web(args: argparse.Namespace, settings: Settings) -> int:
    import logging
    import signal

    from bot.app import create_app
    from issue_sorter.web_server import make_server

    if args.threads < 1 or args.review_threads < 1:
        raise SystemExit("issue-sorter web: --threads and --review-threads must be 1 or more")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    limits = WebLimits(threads=args.threads, review_threads=args.review_threads)
    server = make_server(create_app(settings), limits, host=args.host, port=settings.port)
    # SIGTERM (the supervisor's, docker stop) ends the loop as Ctrl-C does: waitress lets its threads finish
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"serving on http://{args.host}:{settings.port} ({limits.threads} receiver thread(s), "
          f"{limits.review_threads} for /review)", flush=True)
    server.run()
    return 0


def cmd_worker(args: argparse.Namespace, settings: Settings) -> int:
    from bot.worker import run_worker

    _require_redis(settings, "worker")
    queues = tuple(args.queues.split(","))
    unknown = sorted(set(queues) - set(BOT_QUEUES))
    if unknown:
        raise SystemExit(f"issue-sorter worker: no such queue: {', '.join(unknown)} "
                         f"(the bot's queues: {', '.join(BOT_QUEUES)})")
    if len(queues) > 1:
        # RQ pops a job atomically into its intermediate queue only when a worker serves one queue; with
        # several it uses BLPOP, and a worker killed between the pop and the job's start loses the job
        print(f"issue-sorter worker: serving {len(queues)} queues in one process: a job can be lost if this "
              "worker is killed as it takes one; run one worker per queue", file=sys.stderr)
    run_worker(settings, queues=queues, burst=args.burst)
    return 0


def cmd_training_worker(args: argparse.Namespace, settings: Settings) -> int:
    from trainer.worker import run_worker

    _require_redis(settings, "training-worker")
    run_worker(settings, burst=args.burst)
    return 0


def cmd_cron(_args: argparse.Namespace, settings: Settings) -> int:
    from issue_sorter.cron import run_cron

    _require_redis(settings, "cron")
    from issue_sorter.app_check import check_config_access

    check_config_access(settings)  # exactly one cron runs: its log says it once per deployment
    run_cron(settings)  # in this process: no Redis URL (it holds the password) on a command line
    return 0


def cmd_forward(args: argparse.Namespace, settings: Settings) -> int:
    from issue_sorter.forward import forward

    forward(args.channel, args.to or f"http://127.0.0.1:{settings.port}/webhook")
    return 0


def cmd_setup(args: argparse.Namespace, _settings: None) -> int:
    from issue_sorter.setup import SetupError, next_steps, run_setup, start_registration

    try:
        registration = start_registration(args.manifest, webhook_url=args.webhook_url, port=args.port,
                                          api_url=args.api_url, web_url=args.web_url, org=args.org,
                                          public_url=args.public_url, name=args.name, force=args.force,
                                          channel=args.channel)
        run_setup(registration, port=args.port, open_browser=not args.no_browser)
    except SetupError as error:
        raise SystemExit(f"issue-sorter setup: {error}") from None
    print(next_steps(registration, args.org))
    return 0


def cmd_redis_credentials(args: argparse.Namespace, _settings: None) -> int:
    from issue_sorter.redis_credentials import ACL_FILE, write_credentials

    users = write_credentials(args.directory)
    print(f"wrote {args.directory / ACL_FILE} and a password file for each of {', '.join(users)} (mode 600); "
          "existing passwords are kept")
    return 0


def cmd_migrate(args: argparse.Namespace, settings: Settings) -> int:
    from core.migrate import upgrade

    upgrade(settings.database_url, args.revision)
    print(f"database at revision {args.revision}")
    return 0


def _require_redis(settings: Settings, command: str) -> None:
    if not settings.redis_url:
        raise SystemExit(f"issue-sorter {command}: REDIS_URL is not set")
