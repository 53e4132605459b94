"""`issue-sorter setup` against the fake GitHub over real HTTP: the page, GitHub's redirect, `.env`, and
the service started from it labelling an issue."""

import os
import re
import stat
import threading
import time
from html import unescape

import pytest
import requests
import yaml

from core.migrate import upgrade
from issue_sorter.setup import SetupError, read_env, run_setup, start_registration
from simulation.fake_github import FakeGitHub
from tests.issue_sorter.running import deliver, running_service, wait_for
from tests.paths import REPO_ROOT
from tests.ports import free_port
from tests.tiny_model import promote_model

APP_YML = REPO_ROOT / "app.yml"
REPO = "octo/widgets"
EVERY_VALUE = {"GITHUB_APP_ID", "GITHUB_APP_SLUG", "GITHUB_WEBHOOK_SECRET", "GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET",
               "GITHUB_PRIVATE_KEY_PATH", "GITHUB_API_URL", "GITHUB_WEB_URL", "ISSUE_SORTER_SESSION_SECRET"}


@pytest.fixture
def fake():
    with FakeGitHub(app_id=4242) as github:
        github.add_repo(REPO, labels=["bug", "enhancement", "question"], installation_id=9)
        yield github


def register(fake, tmp_path, *, org=None, **options):
    """Run the flow as a maintainer would: open the page, press the button, let GitHub redirect back."""
    port = free_port()
    registration = start_registration(APP_YML, webhook_url="https://sorter.example.org/webhook", port=port,
                                      api_url=fake.url, web_url=fake.url, org=org,
                                      public_url="https://sorter.example.org", env_file=tmp_path / ".env",
                                      key_file=tmp_path / "var" / "app.pem", **options)
    thread, finished = in_background(lambda: run_setup(registration, port=port, open_browser=False, timeout=30))
    page = wait_for_page(f"http://127.0.0.1:{port}/")
    action = unescape(re.search(r'<form action="([^"]+)"', page).group(1))
    manifest = unescape(re.search(r'name="manifest" value="([^"]+)"', page).group(1))
    answer = requests.post(action, data={"manifest": manifest}, timeout=10)  # GitHub redirects to the callback
    thread.join(timeout=30)
    assert "error" not in finished, finished.get("error")
    return registration, yaml.safe_load(manifest), action, answer, finished["result"]


def wait_for_page(url: str) -> str:
    for _ in range(100):
        try:
            return requests.get(url, timeout=1).text
        except requests.ConnectionError:
            time.sleep(0.1)
    pytest.fail(f"the setup page never came up at {url}")


def in_background(work) -> tuple[threading.Thread, dict]:
    """Run `work` in a thread; the dict gets its result or its exception."""
    outcome: dict = {}

    def target():
        try:
            outcome["result"] = work()
        except Exception as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=target)
    thread.start()
    return thread, outcome


def test_the_page_posts_app_yml_as_the_manifest_and_the_redirect_writes_every_value(fake, tmp_path):
    registration, manifest, action, answer, app = register(fake, tmp_path)
    app_yml = yaml.safe_load(APP_YML.read_text())
    for key in ("name", "url", "description", "public", "default_events", "default_permissions"):
        assert manifest[key] == app_yml[key], key
    assert manifest["hook_attributes"] == {"url": "https://sorter.example.org/webhook", "active": True}
    assert manifest["redirect_url"].endswith("/callback") and manifest["redirect_url"].startswith("http://127.0.0.1:")
    assert manifest["callback_urls"] == ["https://sorter.example.org/review/oauth/callback"]
    assert action.startswith(f"{fake.url}/settings/apps/new?state=")
    assert answer.status_code == 200 and f"/apps/{app['slug']}/installations/new" in answer.text

    env = read_env(tmp_path / ".env")
    assert set(env) == EVERY_VALUE and env["GITHUB_APP_ID"] == "4242"
    assert env["GITHUB_WEBHOOK_SECRET"] == app["webhook_secret"] and env["GITHUB_API_URL"] == fake.url
    for path in (tmp_path / ".env", tmp_path / "var" / "app.pem"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert (tmp_path / "var" / "app.pem").read_text() == fake.private_key_pem
    assert "BEGIN" not in (tmp_path / ".env").read_text()  # the key lives in its own file


def test_an_organisation_registers_on_its_own_page(fake, tmp_path):
    _, _, action, answer, app = register(fake, tmp_path, org="octo")
    assert action.startswith(f"{fake.url}/organizations/octo/settings/apps/new?state=") and app["owner"]["login"] == "octo"


def test_an_answer_with_another_state_is_refused(fake, tmp_path):
    port = free_port()
    registration = start_registration(APP_YML, webhook_url="https://x/webhook", port=port, api_url=fake.url,
                                      web_url=fake.url, org=None, public_url=None, env_file=tmp_path / ".env")
    thread, outcome = in_background(lambda: run_setup(registration, port=port, open_browser=False, timeout=3))
    wait_for_page(f"http://127.0.0.1:{port}/")
    assert requests.get(f"http://127.0.0.1:{port}/callback?code=abc&state=forged", timeout=5).status_code == 400
    thread.join()
    assert isinstance(outcome["error"], SetupError) and not (tmp_path / ".env").exists()


def test_an_app_already_in_env_is_not_replaced_without_force(fake, tmp_path):
    (tmp_path / ".env").write_text("GITHUB_APP_ID='1'\n")
    with pytest.raises(SetupError, match="--force"):
        start_registration(APP_YML, webhook_url="https://x/webhook", port=3000, api_url=fake.url,
                           web_url=fake.url, org=None, public_url=None, env_file=tmp_path / ".env")


@pytest.mark.slow
@pytest.mark.e2e
def test_the_readmes_steps_from_setup_to_the_first_label(fake, tmp_path, tiny_model_dir, payload):
    """README, "Install on your repository": setup → the service from .env → installed → an issue → its label."""
    register(fake, tmp_path)
    var = tmp_path / "var"
    upgrade(f"sqlite:///{var / 'issue-sorter.db'}")
    promote_model(f"sqlite:///{var / 'issue-sorter.db'}", var / "models", tiny_model_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "REDIS_URL", "DATABASE_URL",
                                                                    "MODEL_DIR", "ISSUE_SORTER_"))}
    env.update(PORT=str(free_port()), ISSUE_SORTER_THRESHOLD="0", GITHUB_WRITE_INTERVAL="0")
    secret = read_env(tmp_path / ".env")["GITHUB_WEBHOOK_SECRET"]
    delivery = payload("issues/opened")
    delivery |= {"installation": {"id": 9}, "repository": delivery["repository"] | {"full_name": REPO}}
    delivery["issue"]["labels"] = []
    fake.add_issue(REPO, 1, delivery["issue"]["title"], delivery["issue"]["body"])
    installed = payload("installation/created")
    installed["installation"]["id"] = 9
    installed["repositories"] = [{"id": 1, "name": "widgets", "full_name": REPO, "private": False}]
    with running_service(tmp_path, env) as base:
        assert deliver(base, "installation", installed, "setup-0", secret).status_code == 202
        assert deliver(base, "issues", delivery, "setup-1", secret).status_code == 202
        assert wait_for(lambda: fake.issue_labels(REPO, 1))
        assert wait_for(lambda: fake.calls("GET", rf"/repos/{REPO}/issues"))  # installing started the backfill
    assert "read .env" in (tmp_path / "run.log").read_text()
    assert "every installation of the App (1) may read .github/issue-sorter.yml" in (tmp_path / "run.log").read_text()
