"""End to end, as deployed: the web server on loopback, a real `issue-sorter worker` process, the local Redis
and PostgreSQL, and the fake GitHub answering over HTTP. Deliveries are GitHub's own examples, signed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import requests
from sqlalchemy import create_engine, select
from sqlalchemy.orm import Session

from bot.intake.signatures import sign_body
from core.classifier import load_classifier
from core.issue_text import format_issue_text
from core.kinds import labels_for_kinds
from core.migrate import upgrade
from core.tables import Prediction
from simulation.fake_github import FakeGitHub
from tests.conftest import WEBHOOK_SECRET
from tests.ports import free_port
from tests.tiny_model import promote_model

pytestmark = [pytest.mark.e2e, pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]
REPO = "Codertocat/Hello-World"


def wait_until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.fixture
def service(postgres_url, redis, redis_url, tmp_path, tiny_model_dir):
    """The deployed shape: migrations, a promoted model, web + worker processes, a GitHub to talk to."""
    upgrade(postgres_url)
    model_dir = tmp_path / "models"
    promote_model(postgres_url, model_dir, tiny_model_dir)
    fake = FakeGitHub(app_id=4242).start()
    fake.add_repo(REPO, labels=["bug", "enhancement", "question", "documentation"], installation_id=1)
    port = free_port()
    env = {**os.environ, "GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET, "GITHUB_APP_ID": "4242",
           "GITHUB_PRIVATE_KEY": fake.private_key_pem, "GITHUB_API_URL": fake.url, "DATABASE_URL": postgres_url,
           "REDIS_URL": redis_url, "MODEL_DIR": str(model_dir), "PORT": str(port), "ISSUE_SORTER_THRESHOLD": "0",
           "GITHUB_WRITE_INTERVAL": "0", "ISSUE_SORTER_MAX_EVENT_AGE": "0"}  # GitHub's examples date from 2019
    logs = tmp_path / "logs"
    logs.mkdir()
    cli = [sys.executable, "-m", "issue_sorter.cli"]
    processes = [subprocess.Popen(cli + command, env=env, stdout=(logs / f"{name}.log").open("w"),
                                  stderr=subprocess.STDOUT)
                 for name, command in [("web", ["web", "--host", "127.0.0.1"]),
                                       ("worker", ["worker", "--queues", "labeling,feedback"])]]
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _healthy(base), 60, "the web server to answer /healthz")
        yield {"url": base, "fake": fake, "database_url": postgres_url, "logs": logs}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        fake.stop()


def _healthy(base: str) -> bool:
    try:
        return requests.get(f"{base}/healthz", timeout=1).status_code == 200
    except requests.RequestException:
        return False


def post_delivery(base: str, body: bytes, delivery: str, secret: str = WEBHOOK_SECRET) -> requests.Response:
    return requests.post(f"{base}/webhook", data=body, timeout=10, headers={
        "X-GitHub-Event": "issues", "X-GitHub-Delivery": delivery, "Content-Type": "application/json",
        "X-Hub-Signature-256": sign_body(body, secret)})


def test_a_signed_issue_opened_delivery_gets_exactly_one_label(service, payload, tiny_model_dir):
    fake = service["fake"]
    delivery = payload("issues/opened")
    delivery["installation"] = {"id": 1}
    delivery["issue"]["labels"] = []  # GitHub's example already carries `bug`; a new issue has none
    issue = delivery["issue"]
    fake.add_issue(REPO, issue["number"], issue["title"], issue["body"])
    body = json.dumps(delivery).encode()

    started = time.monotonic()
    assert post_delivery(service["url"], body, "e2e-1").status_code == 202
    labels_path = rf"/repos/{REPO}/issues/{issue['number']}/labels"
    calls = wait_until(lambda: fake.calls("POST", labels_path), 60, "the label on GitHub")
    seconds = time.monotonic() - started

    scores = load_classifier(tiny_model_dir).predict([format_issue_text(issue["title"], issue["body"])])[0]
    expected = labels_for_kinds(fake.repo_labels(REPO))[max(scores, key=scores.get)]
    assert fake.issue_labels(REPO, issue["number"]) == [expected]
    engine = create_engine(service["database_url"])
    with Session(engine) as session:
        (row,) = session.scalars(select(Prediction)).all()
        assert (row.label, row.outcome, row.applied, row.delivery_id) == (expected, "applied", True, "e2e-1")
        assert set(row.scores) == {"bug", "feature", "question"}

    # GitHub redelivers the same delivery, and someone replays it with a bad signature: nothing changes.
    assert post_delivery(service["url"], body, "e2e-1").status_code == 202
    assert post_delivery(service["url"], body, "e2e-2", secret="not the secret").status_code == 401
    time.sleep(3)  # give the worker every chance to (wrongly) act on them
    assert len(fake.calls("POST", labels_path)) == len(calls) == 1
    with Session(engine) as session:
        assert len(session.scalars(select(Prediction)).all()) == 1
    engine.dispose()
    print(f"label applied {seconds:.1f} s after the delivery")
