"""The service as the service benchmarks start it: `issue-sorter run` (tests.issue_sorter.running.Service, as
the end-to-end tests start it) or one of its commands, in a folder of its own, against the fake GitHub on
loopback, with a promoted model; signed deliveries as GitHub sends them; the report printed as JSON."""

from __future__ import annotations

import argparse
import contextlib
import copy
import csv
import functools
import itertools
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from bot.intake.signatures import sign_body
from core.migrate import upgrade
from simulation.fake_github import FakeGitHub
from tests.paths import NLBSE, REPO_ROOT, WEBHOOKS
from tests.ports import free_port
from tests.tiny_model import promote_model

SHAPE = WEBHOOKS / "issues" / "opened.payload.json"  # GitHub's example: every delivery sent has its shape
SECRET = "bench-" + uuid.uuid4().hex
APP_ID, INSTALLATION = 4711, 1
LABELS = ["bug", "enhancement", "question", "documentation"]
CLI = [sys.executable, "-m", "issue_sorter.cli"]
LABELLING_WORKER = r"issue_sorter\.cli worker --queues labeling"
LABEL_POST = r"/repos/[^/]+/[^/]+/issues/\d+/labels"  # a label written, as the fake GitHub records it


def arguments(doc: str, *, model: bool = True,
              parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The options the service benchmarks share (on `parser`, a subcommand's): the model it serves and where the
    report also goes."""
    parser = parser or argparse.ArgumentParser(description=doc.split("\n")[0])
    if model:
        parser.add_argument("--model", type=Path, help="a trained model folder (default: train a small one)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    return parser


def print_report(report: dict, path: Path | None) -> None:
    text = json.dumps(report, indent=2)
    print(text)
    if path:
        path.write_text(text + "\n")


def environment(fake: FakeGitHub | None, workdir: Path, *, inherit: bool = True, **settings: str) -> dict[str, str]:
    """The service's environment: a port of its own, the bench's webhook secret, no age limit (the payloads
    are GitHub's examples, dated 2019), SQLite and the models under workdir/var (DATABASE_URL when set);
    with `fake`, the App on it and threshold 0, so that every job ends in the label write a bench counts.
    `inherit=False`: none of this shell's GITHUB_*, ISSUE_SORTER_*, DATABASE_URL and REDIS_URL (the
    service's defaults)."""
    (workdir / "var").mkdir(parents=True, exist_ok=True)
    own = ("GITHUB_", "ISSUE_SORTER_", "DATABASE_URL", "REDIS_URL")
    env = {k: v for k, v in os.environ.items() if k != "MODEL_DIR" and (inherit or not k.startswith(own))}
    env.update(PORT=str(free_port()), PYTHONPATH=str(REPO_ROOT), GITHUB_WEBHOOK_SECRET=SECRET,
               ISSUE_SORTER_MAX_EVENT_AGE="0", MODEL_DIR=str(workdir / "var" / "models"))
    env.setdefault("DATABASE_URL", f"sqlite:///{workdir / 'var' / 'issue-sorter.db'}")
    if fake is not None:
        env.update(GITHUB_APP_ID=str(APP_ID), GITHUB_PRIVATE_KEY=fake.private_key_pem, GITHUB_API_URL=fake.url,
                   ISSUE_SORTER_THRESHOLD="0")
    env.update(settings)
    return env


def served_model(source: Path | None, workdir: Path, *, max_length: int = 128) -> Path:
    """`source`, or the tests' tiny model trained here (about a minute) at the served model's length: latency
    and throughput depend on the architecture, not on how well it was trained."""
    if source is not None:
        return source
    from tests.tiny_model import train_tiny_model

    return train_tiny_model(workdir / "tiny-model", max_length=max_length, version="bench")


@contextlib.contextmanager
def prepared(workdir: Path, repos: dict[str, int], model: Path | None, *,
             files: dict[str, dict[str, str]] | None = None, inherit: bool = True,
             **settings: str) -> Iterator[tuple[FakeGitHub, dict[str, str]]]:
    """The fake GitHub holding `repos` (each → its installation, with the four labels, and its `files`), the
    service's environment against it (`environment`), its database migrated and `model` (or the tiny one)
    promoted there to serve every repository; the fake stopped at the end."""
    fake = FakeGitHub(app_id=APP_ID).start()
    try:
        for repo, installation in sorted(repos.items()):
            fake.add_repo(repo, labels=LABELS, installation_id=installation, files=(files or {}).get(repo))
        env = environment(fake, workdir, inherit=inherit, **settings)
        upgrade(env["DATABASE_URL"])
        promote_model(env["DATABASE_URL"], Path(env["MODEL_DIR"]), served_model(model, workdir), reason="bench")
        yield fake, env
    finally:
        fake.stop()


def own_redis():
    """REDIS_URL's database, emptied: the benchmarks that run single commands need one of their own."""
    from redis import Redis

    if not os.environ.get("REDIS_URL"):
        raise SystemExit("set REDIS_URL to a Redis database of its own (it is flushed)")
    redis = Redis.from_url(os.environ["REDIS_URL"])
    redis.flushdb()
    return redis


@contextlib.contextmanager
def started(commands: dict[str, list[str]], env: dict[str, str], workdir: Path) -> Iterator[None]:
    """Each command (its name → its arguments) running, its log in workdir/NAME.log; SIGTERMed at the end."""
    processes = []
    try:
        for name, command in commands.items():
            with (workdir / f"{name}.log").open("w") as log:
                processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                                  cwd=REPO_ROOT))
        yield
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=60)


def real_issues(n: int, installations: int = 1, *, together: int | None = None) -> list[dict]:
    """N distinct NLBSE issues (train, then test); past the 3,000 a number makes each title distinct. With
    several installations the repositories take turns, each five issues (one of each repository) go to the
    next installation (`together` issues, when given), and a repository is renamed owner-K/name in
    installation K."""
    csv.field_size_limit(sys.maxsize)
    rows = []
    for name in ("issues_train.csv", "issues_test.csv"):
        with (NLBSE / name).open(newline="") as handle:
            rows += [{"repo": r["repo"], "title": r["title"], "body": r["body"]} for r in csv.DictReader(handle)]
    if installations > 1:  # every installation gets every repository, not one repository's run of rows
        by_repo: dict[str, list[dict]] = {}
        for row in rows:
            by_repo.setdefault(row["repo"], []).append(row)
        rows = [row for turn in itertools.zip_longest(*by_repo.values()) for row in turn if row is not None]
        per_turn = together or len(by_repo)
    numbers: dict[str, int] = {}
    picked = []
    for i in range(n):
        row = dict(rows[i % len(rows)])
        if i >= len(rows):
            row["title"] = f"{row['title']} ({i // len(rows)})"
        row["installation"] = (i // per_turn) % installations + 1 if installations > 1 else INSTALLATION
        if installations > 1:
            owner, name = row["repo"].split("/")
            row["repo"] = f"{owner}-{row['installation']}/{name}"
        numbers[row["repo"]] = row["number"] = numbers.get(row["repo"], 0) + 1
        picked.append(row)
    return picked


@functools.cache
def _shape() -> dict:
    return json.loads(SHAPE.read_text())


def delivery_body(issue: dict, repo_id: int, *, fresh: bool = False) -> bytes:
    """GitHub's example `issues.opened` payload carrying this issue (repo, number, title, body and
    installation), in this repository; `fresh`: dated now, as a new issue is (the job need not read it again
    from GitHub), else the example's 2019 dates."""
    payload = copy.deepcopy(_shape())
    owner, name = issue["repo"].split("/")
    payload["issue"].update(number=issue["number"], title=issue["title"], body=issue["body"], labels=[])
    if fresh:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        payload["issue"].update(created_at=now, updated_at=now)
    payload["repository"].update(id=repo_id, name=name, full_name=issue["repo"])
    payload["repository"]["owner"]["login"] = owner
    payload["installation"] = {"id": issue.get("installation", INSTALLATION)}
    return json.dumps(payload).encode()


def signed_headers(event: str, body: bytes, delivery: str) -> dict[str, str]:
    return {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "Content-Type": "application/json",
            "X-Hub-Signature-256": sign_body(body, SECRET), "User-Agent": "GitHub-Hookshot/bench"}


def post(base: str, event: str, body: bytes, delivery: str | None = None, *, timeout: float = 30) -> int:
    """A signed delivery to POST /webhook; the answer's status (0: none)."""
    headers = signed_headers(event, body, delivery or str(uuid.uuid4()))
    try:
        return requests.post(f"{base}/webhook", data=body, headers=headers, timeout=timeout).status_code
    except requests.RequestException:
        return 0


def send_at_rate(base: str, issues: list[dict], repo_ids: dict[str, int], rate: float, *, threads: int = 8,
                 answered: Callable[[dict, str, bytes, int], None] | None = None) -> None:
    """Each issue's `issues.opened` delivery, `rate` a second from `threads` threads, as GitHub's would;
    `answered(issue, delivery id, body, status)` after each."""

    def send(issue: dict) -> None:
        body, delivery = delivery_body(issue, repo_ids[issue["repo"]]), str(uuid.uuid4())
        status = post(base, "issues", body, delivery, timeout=10)
        if answered:
            answered(issue, delivery, body, status)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for i, issue in enumerate(issues):
            time.sleep(max(0.0, started + i / rate - time.monotonic()))
            pool.submit(send, issue)
