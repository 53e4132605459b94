"""Faults under traffic: `issue-sorter run` labels N real issues while its workers, Redis and PostgreSQL fail.

    .venv/bin/python -m bench.chaos --n 1000 --rate 5 --kills 3 --redis-restarts 2 --db-restarts 2
    DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/<db> REDIS_URL=redis://127.0.0.1:6379/9 \\
        .venv/bin/python -m bench.chaos --n 10000 --rate 10 --installations 20 --labelling-workers 3 \\
        --rolling-restart --flush-redis

The fleet (issue 31): the web server, ISSUE_SORTER_LABELLING_WORKERS labelling workers, the
feedback worker, GITHUB_WRITE_INTERVAL 1 s; issues spread over `--installations` installations (five
repositories each, one of them in `mode: comment`). `--rolling-restart` restarts every process one at a time
halfway through (the web server, each worker, cron: old and new workers serve side by side) and, at
its middle, promotes a new model version: "version" is the served model's, recorded on every prediction.
The fake GitHub records when each write of each installation arrived: the report's smallest gap between
two writes of one installation must not be under the interval.

It starts the service as a user does (`issue-sorter run` in a folder of its own: embedded Redis and
SQLite unless DATABASE_URL / REDIS_URL are set) against the fake GitHub on loopback, sends N signed
`issues.opened` deliveries of distinct NLBSE issues (GitHub's example payload as the shape) at a steady
rate, and meanwhile, at random moments: SIGKILLs the labelling worker while a job runs, restarts Redis
(embedded: SIGKILL of the server, which the supervisor restarts from its append-only file; a shared
Redis cannot be restarted here, so every connection to our database is killed instead) and "restarts"
PostgreSQL (the machine's server is shared: every backend of our database is terminated). Like GitHub,
the sender delivers once and records the answer in the fake's delivery log; our redelivery sweep (cron)
asks for the failed ones again. Then it checks GitHub and the database and prints one JSON report:
lost, duplicated, predictions missing, failed jobs, time to recover after each fault.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from bench.service import (
    LABEL_POST,
    LABELLING_WORKER,
    arguments,
    own_redis,
    prepared,
    print_report,
    real_issues,
    send_at_rate,
    served_model,
)
from simulation.fake_github import FakeGitHub
from tests.issue_sorter.running import Service
from tests.tiny_model import promote_model

COMMENT_MODE = "mode: comment\n"  # the config of one repository per installation: a label and a comment
# the rolling restart's order: what serves webhooks, what labels, what reads feedback, the rest
ROLES = [("web server", r"issue_sorter\.cli web"),  # one process: deliveries refused meanwhile are redelivered
         ("labelling worker", LABELLING_WORKER), ("feedback worker", r"issue_sorter\.cli worker --queues feedback"),
         ("training worker", r"issue_sorter\.cli training-worker"), ("cron", r"issue_sorter\.cli cron")]


class Faults:
    """The faults, each as the kind of deployment allows."""

    def __init__(self, service: Service, database_url: str, rng: random.Random, new_version):
        from redis import Redis

        self.service, self.database_url, self.rng, self.new_version = service, database_url, rng, new_version
        self.redis = Redis.from_url(service.redis_url(), socket_timeout=5)
        self.embedded_redis = not service.env.get("REDIS_URL")

    def kill_worker(self) -> str:
        from rq.registry import StartedJobRegistry

        deadline = time.monotonic() + 5  # mid-job: wait (a little) for one to be running
        while time.monotonic() < deadline and not _safe(lambda: StartedJobRegistry("labeling", connection=self.redis).count):
            time.sleep(0.02)
        pids = self.service.child_pids(LABELLING_WORKER)
        if not pids:
            return "worker: not running (being restarted)"
        pid = self.rng.choice(pids)
        os.kill(pid, signal.SIGKILL)
        return f"worker {pid} SIGKILLed"

    def restart_redis(self) -> str:
        if self.embedded_redis:
            pids = self.service.child_pids(r"valkey-server")
            if not pids:
                return "redis: not running (being restarted)"
            pid = pids[0]
            os.kill(pid, signal.SIGKILL)
            return f"embedded Redis {pid} SIGKILLed (restarted by the supervisor from its AOF)"
        db = self.redis.connection_pool.connection_kwargs.get("db", 0)
        killed = 0
        for client in self.redis.client_list():
            if int(client.get("db", -1)) == db and client.get("name") != "chaos":
                killed += _safe(lambda c=client: self.redis.client_kill_filter(_id=c["id"])) or 0
        return f"shared Redis: {killed} connections to db {db} killed (no restart of a shared server)"

    def restart_postgres(self) -> str:
        if not self.database_url.startswith("postgresql"):
            return "database: SQLite, nothing to restart"
        from sqlalchemy import create_engine, text

        engine = create_engine(self.database_url)
        with engine.connect() as connection:
            count = connection.execute(text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()")).scalar()
        engine.dispose()
        return f"PostgreSQL: {count} backends of our database terminated (shared server, not restarted)"

    def rolling_restart(self) -> str:
        """SIGTERM every process one at a time (RQ's warm shutdown, the web server's exit), each time
        waiting for its successor; halfway, promote a new model version. Old and new run side by side."""
        steps = [(role, pattern, pid) for role, pattern in ROLES for pid in self.service.child_pids(pattern)]
        done = []
        for index, (role, pattern, pid) in enumerate(steps):
            if index == len(steps) // 2:
                done.append(f"model {self.new_version()} promoted")
            before = set(self.service.child_pids(pattern))
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 90
            while time.monotonic() < deadline and not set(self.service.child_pids(pattern)) - before:
                time.sleep(0.2)
            done.append(f"{role} {pid} restarted")
            time.sleep(2)  # the successor starts while the others serve
        return "; ".join(done)


def _safe(call):
    try:
        return call()
    except Exception:  # noqa: BLE001 - a probe during a fault may fail; the fault is the point
        return None


def send_all(service: Service, fake: FakeGitHub, issues: list[dict], rate: float, repo_ids: dict) -> dict:
    """Deliver each issue once at `rate` per second, as GitHub does, recording the answer in its log."""
    answers: dict[str, int] = {}

    def answered(issue: dict, delivery: str, body: bytes, status: int) -> None:
        answers[delivery] = status
        fake.add_delivery("issues", "opened", guid=delivery, status_code=status, body=body,
                          installation_id=issue["installation"], repository_id=repo_ids[issue["repo"]])

    send_at_rate(service.base, issues, repo_ids, rate, threads=32, answered=answered)
    return answers


def fault_plan(args, duration: float, rng: random.Random) -> list[tuple[float, str]]:
    kinds = (["kill_worker"] * args.kills + ["restart_redis"] * args.redis_restarts
             + ["restart_postgres"] * args.db_restarts)
    plan = [(rng.uniform(0.1, 0.9) * duration, kind) for kind in kinds]
    if args.rolling_restart:  # it takes a while: started at 40 %, the other faults happen during it too
        plan.append((0.4 * duration, "rolling_restart"))
    return sorted(plan)


def inject(faults: Faults, plan: list[tuple[float, str]], fake: FakeGitHub, log: list[dict]) -> list[threading.Thread]:
    """Run the plan; after each fault, the seconds until GitHub sees the next label (time to recover)."""
    started, watchers = time.monotonic(), []
    for at, kind in plan:
        time.sleep(max(0.0, started + at - time.monotonic()))
        before, moment = len(fake.calls("POST", LABEL_POST)), time.monotonic()
        entry = {"at_s": round(moment - started, 1), "fault": kind}
        log.append(entry)
        if kind == "rolling_restart":  # a minute or more: in its own thread, the plan goes on
            watchers.append(threading.Thread(target=_timed, args=(faults, entry, moment), daemon=True,
                                             name="rolling_restart"))
        else:
            entry["what"] = getattr(faults, kind)()
            watchers.append(threading.Thread(target=_recovery, args=(fake, before, moment, entry),
                                             daemon=True))
        watchers[-1].start()
    return watchers


def _timed(faults: Faults, entry: dict, moment: float) -> None:
    try:
        entry["what"] = faults.rolling_restart()
    except Exception as exc:  # noqa: BLE001 - the report says the fault failed instead of losing the run
        entry["what"] = f"failed: {exc!r}"
    entry["took_s"] = round(time.monotonic() - moment, 1)


def _recovery(fake: FakeGitHub, before: int, moment: float, entry: dict) -> None:
    while len(fake.calls("POST", LABEL_POST)) == before and time.monotonic() - moment < 600:
        time.sleep(0.1)
    entry["recovered_after_s"] = round(time.monotonic() - moment, 1)


def settle(fake: FakeGitHub, issues: list[dict], seconds: float, commented: set[str]) -> float:
    """Wait until every issue carries a label (and its comment, in comment mode), or nothing changed for
    `seconds`; the wait."""
    started = last_change = time.monotonic()
    done = -1
    while time.monotonic() - last_change < seconds:
        now_done = sum(1 for i in issues if fake.issue_labels(i["repo"], i["number"])
                       and (i["repo"] not in commented or fake.comments(i["repo"], i["number"])))
        if now_done != done:
            done, last_change = now_done, time.monotonic()
        if done == len(issues):
            break
        time.sleep(0.5)
    return time.monotonic() - started


def write_gaps(fake: FakeGitHub, interval: float) -> dict:
    """The smallest gap between two writes of one installation, as they arrived at GitHub."""
    gaps = {installation: [b - a for a, b in itertools.pairwise(times)] for installation, times in
            fake.write_times().items()}
    every = [gap for per in gaps.values() for gap in per]
    return {"writes": sum(len(times) for times in fake.write_times().values()),
            "installations_written": len(gaps),
            "smallest_write_gap_s": round(min(every), 3) if every else None,
            "write_gaps_under_interval": sum(1 for gap in every if gap < interval)}


def check(fake: FakeGitHub, issues: list[dict], database_url: str, redis_url: str,
          commented: set[str] = frozenset()) -> dict:
    """What GitHub and the database hold, against what was sent."""
    from redis import Redis
    from rq.registry import FailedJobRegistry
    from sqlalchemy import create_engine, func, select
    from sqlalchemy.orm import Session

    from core.tables import IssueRecord, ModelVersion, Prediction, Repository, WebhookDelivery

    label_posts = Counter(call.path for call in fake.calls("POST", LABEL_POST))  # one path per issue
    labels = {(i["repo"], i["number"]): fake.issue_labels(i["repo"], i["number"]) for i in issues}
    engine = create_engine(database_url)
    with Session(engine) as session:
        rows = session.execute(select(Repository.full_name, IssueRecord.number, func.count(Prediction.id))
                               .join(IssueRecord, IssueRecord.repository_id == Repository.id)
                               .join(Prediction, Prediction.issue_id == IssueRecord.id)
                               .group_by(Repository.full_name, IssueRecord.number)).all()
        predictions = {(repo, number): count for repo, number, count in rows}
        outcomes = dict(session.execute(select(WebhookDelivery.outcome, func.count()).group_by(
            WebhookDelivery.outcome)).all())
        versions = dict(session.execute(select(ModelVersion.version, func.count(Prediction.id)).join(
            Prediction, Prediction.model_version_id == ModelVersion.id).group_by(ModelVersion.version)).all())
    engine.dispose()
    redis = Redis.from_url(redis_url)
    failed = {q: FailedJobRegistry(q, connection=redis).get_job_ids() for q in ("labeling", "feedback")}
    comments = {key: len(fake.comments(*key)) for key in labels}
    return {
        "lost": sum(1 for v in labels.values() if not v),
        "duplicated": (sum(1 for v in labels.values() if len(v) > 1)
                       + sum(max(0, c - 1) for c in comments.values())),
        "labelled_twice": sum(1 for v in labels.values() if len(v) > 1),
        "comments_posted": sum(comments.values()),
        "comments_posted_twice": sum(1 for c in comments.values() if c > 1),
        "comments_missing": sum(1 for key, c in comments.items() if key[0] in commented and c == 0),
        "predictions_by_model_version": versions,
        "repeated_label_calls": sum(1 for v in label_posts.values() if v > 1),
        "predictions_missing": sum(1 for key in labels if predictions.get(key, 0) == 0),
        "predictions_duplicated": sum(1 for v in predictions.values() if v > 1),
        "failed_jobs": {q: ids for q, ids in failed.items() if ids},
        "delivery_outcomes": {str(k)[:40]: v for k, v in sorted(outcomes.items(), key=lambda kv: -kv[1])[:8]},
    }


def promote_again(database_url: str, model_dir: Path, source: Path) -> str:
    """A new version of the model (the same weights registered again) promoted: the mid-run upgrade."""
    from sqlalchemy.exc import OperationalError

    # The database fault may terminate this admin's session too (it ends every backend of the database):
    # an operator promotes again, and so does the bench. Nothing was committed by the attempt that failed.
    for attempt in range(3):
        try:
            return promote_model(database_url, model_dir, source, reason="chaos bench: the upgrade mid-run")
        except OperationalError:
            if attempt == 2:
                raise
            time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--rate", type=float, default=5.0, help="deliveries per second")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--redis-restarts", type=int, default=2)
    parser.add_argument("--db-restarts", type=int, default=2)
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--sweep-interval", type=int, default=5, help="seconds between redelivery sweeps")
    parser.add_argument("--installations", type=int, default=1, help="installations the issues spread over")
    parser.add_argument("--labelling-workers", type=int, default=1)
    parser.add_argument("--write-interval", type=float, default=1.0, help="GITHUB_WRITE_INTERVAL")
    parser.add_argument("--rolling-restart", action="store_true",
                        help="restart every process one at a time, a new model version promoted halfway")
    parser.add_argument("--settle", type=float, default=300, help="give up after this long without "
                        "progress (a job a worker died taking comes back after 1-2 min)")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--flush-redis", action="store_true", help="empty REDIS_URL's database first")
    args = parser.parse_args(argv)
    report = run(args, args.workdir or Path(tempfile.mkdtemp(prefix="chaos-")))
    print_report(report, args.json)
    ok = (report["lost"] == report["duplicated"] == report["predictions_missing"]
          == report["comments_missing"] == report["write_gaps_under_interval"] == 0 and not report["failed_jobs"])
    return 0 if ok else 1


def run(args, workdir: Path) -> dict:
    issues = real_issues(args.n, args.installations)
    if os.environ.get("REDIS_URL") and args.flush_redis:
        own_redis()
    repos = {i["repo"]: i["installation"] for i in issues}
    commented = {min(r for r, inst in repos.items() if inst == installation)  # one per installation
                 for installation in set(repos.values())}
    source = served_model(args.model, workdir)
    config = {repo: {".github/issue-sorter.yml": COMMENT_MODE} for repo in commented}
    with prepared(workdir, repos, source, files=config, GITHUB_WRITE_INTERVAL=str(args.write_interval),
                  ISSUE_SORTER_REDELIVERY_INTERVAL=str(args.sweep_interval),
                  ISSUE_SORTER_LABELLING_WORKERS=str(args.labelling_workers)) as (fake, env):
        for issue in issues:
            fake.add_issue(issue["repo"], issue["number"], issue["title"], issue["body"])
        with Service(workdir, env) as service:
            service.wait_healthy()
            fake.webhook_url, fake.webhook_secret = f"{service.base}/webhook", env["GITHUB_WEBHOOK_SECRET"]
            upgrade = functools.partial(promote_again, env["DATABASE_URL"], Path(env["MODEL_DIR"]), source)
            repo_ids = {repo: fake.repo_id(repo) for repo in repos}
            return _measure(args, service, fake, issues, repo_ids, env, commented, upgrade)


def _measure(args, service: Service, fake: FakeGitHub, issues: list[dict], repo_ids: dict, env: dict,
             commented: set[str], upgrade) -> dict:
    faults = Faults(service, env["DATABASE_URL"], random.Random(args.seed), upgrade)
    fault_log: list[dict] = []
    plan = fault_plan(args, args.n / args.rate, random.Random(args.seed))
    watchers: list[threading.Thread] = []
    injector = threading.Thread(target=lambda: watchers.extend(inject(faults, plan, fake, fault_log)), daemon=True)
    started = time.monotonic()
    injector.start()
    answers = send_all(service, fake, issues, args.rate, repo_ids)
    sent = time.monotonic() - started
    # The plan ends before the last issue is sent, but a rolling restart may outlast the sending (each of
    # its steps waits up to 90 s for a successor): the drain is measured once it is over, and its entry is whole.
    injector.join()
    for watcher in watchers:
        if watcher.name == "rolling_restart":
            watcher.join()
    waited = time.monotonic() - started - sent + settle(fake, issues, args.settle, commented)
    for watcher in watchers:
        watcher.join(timeout=5)
    result = check(fake, issues, env["DATABASE_URL"], service.redis_url(), commented)
    stopped = service.stop()
    log = service.log()
    during, _, shutdown = log.partition("issue-sorter run: stopping")
    return {
        "n": args.n, "rate_per_s": args.rate, "installations": args.installations,
        "labelling_workers": args.labelling_workers, "web_processes": 2,
        "write_interval_s": args.write_interval,
        "sent_in_s": round(sent, 1), "drained_after_s": round(waited, 1),
        "database": env["DATABASE_URL"].split(":")[0], "redis": "machine" if env.get("REDIS_URL") else "embedded",
        "answers": {str(code): sum(1 for a in answers.values() if a == code) for code in sorted(set(answers.values()))},
        "redeliveries": sum(1 for d in fake.deliveries if d["redelivery"]),
        "faults": fault_log, **result, **write_gaps(fake, args.write_interval),
        "restarts_logged": len(re.findall(r"restarted \(pid", log)),
        "shutdown_exit_code": stopped,
        "tracebacks_during_faults": during.count("Traceback"), "tracebacks_at_shutdown": shutdown.count("Traceback"),
        "workdir": str(service.workdir),
    }


if __name__ == "__main__":
    sys.exit(main())
