"""`issue-sorter setup` makes a complete App: a webhook URL GitHub can post to safely, a review page that signs in
or is plainly off, and a proxy channel kept in `.env` that `run` relays (the laptop's path, end to end)."""

from __future__ import annotations

import json
import os
import re
from html import unescape

import pytest
import requests
import yaml

from bot.intake.signatures import sign_body
from core.migrate import upgrade
from core.settings import Settings
from issue_sorter.env_file import fill_from_env_file
from issue_sorter.setup import SetupError, next_steps, read_env, run_setup, start_registration
from simulation.fake_github import FakeGitHub
from tests.issue_sorter.running import running_service, wait_for
from tests.issue_sorter.test_forward import Channel
from tests.issue_sorter.test_setup import in_background, wait_for_page
from tests.paths import REPO_ROOT
from tests.ports import free_port
from tests.tiny_model import promote_model

APP_YML = REPO_ROOT / "app.yml"
REPO = "octo/widgets"


@pytest.fixture
def fake():
    with FakeGitHub(app_id=4242) as github:
        github.add_repo(REPO, labels=["bug", "enhancement", "question"], installation_id=9)
        yield github


def registered(fake, tmp_path, webhook_url: str, public_url: str | None = None, **options):
    """The flow as a maintainer runs it: the page, its button, GitHub's redirect; (registration, manifest)."""
    port = free_port()
    registration = start_registration(APP_YML, webhook_url=webhook_url, port=port, api_url=fake.url,
                                      web_url=fake.url, org=None, public_url=public_url,
                                      env_file=tmp_path / ".env", key_file=tmp_path / "var" / "app.pem", **options)
    thread, finished = in_background(lambda: run_setup(registration, port=port, open_browser=False, timeout=30))
    page = wait_for_page(f"http://127.0.0.1:{port}/")
    action = unescape(re.search(r'<form action="([^"]+)"', page).group(1))
    manifest = unescape(re.search(r'name="manifest" value="([^"]+)"', page).group(1))
    requests.post(action, data={"manifest": manifest}, timeout=10)
    thread.join(timeout=30)
    assert "error" not in finished, finished.get("error")
    return registration, yaml.safe_load(manifest)


@pytest.mark.parametrize("url,why", [
    ("http://sorter.example.org/webhook", "must be https"),
    ("https://localhost:8000/webhook", "GitHub cannot reach localhost"),
    ("https://127.0.0.1/webhook", "GitHub cannot reach 127.0.0.1"),
    ("https://192.168.1.20/webhook", "GitHub cannot reach 192.168.1.20"),
    ("sorter.example.org/webhook", "must be a URL"),
])
def test_a_webhook_url_github_cannot_post_to_safely_is_refused(tmp_path, url, why):
    with pytest.raises(SetupError, match=why):
        start_registration(APP_YML, webhook_url=url, port=3000, api_url="https://api.github.com",
                           web_url="https://github.com", org=None, public_url=None, env_file=tmp_path / ".env")
    assert not (tmp_path / ".env").exists()


@pytest.mark.parametrize("url,channel", [
    ("https://smee.io/AbC123", False),  # known by its host
    ("http://127.0.0.1:3300/channel", True),  # a channel of one's own, named as such
    ("https://sorter.example.org/webhook", False),
])
def test_https_or_a_proxy_channel_is_accepted(tmp_path, url, channel):
    registration = start_registration(APP_YML, webhook_url=url, port=3000, api_url="https://api.github.com",
                                      web_url="https://github.com", org=None, public_url=None,
                                      env_file=tmp_path / ".env", channel=channel)
    assert registration.manifest["hook_attributes"]["url"] == url
    assert registration.channel == (url if "sorter.example.org" not in url else None)


@pytest.mark.parametrize("public_url", ["http://sorter.example.org", "sorter.example.org", "ftp://x"])
def test_a_public_url_that_is_not_https_is_refused(tmp_path, public_url):
    with pytest.raises(SetupError, match="--public-url must be"):
        start_registration(APP_YML, webhook_url="https://sorter.example.org/webhook", port=3000,
                           api_url="https://api.github.com", web_url="https://github.com", org=None,
                           public_url=public_url, env_file=tmp_path / ".env")


def test_without_a_public_url_the_app_has_no_sign_in_and_the_review_page_is_said_to_be_off(fake, tmp_path):
    registration, manifest = registered(fake, tmp_path, "https://sorter.example.org/webhook")
    assert "callback_urls" not in manifest and "setup_url" not in manifest  # not app.yml's placeholder
    env = read_env(tmp_path / ".env")
    assert {"GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET", "ISSUE_SORTER_SESSION_SECRET"}.isdisjoint(env)
    assert not Settings.from_env(env).review_enabled
    assert "The review page is off" in next_steps(registration, None)


def test_with_a_public_url_the_review_page_signs_in_there(fake, tmp_path):
    registration, manifest = registered(fake, tmp_path, "https://sorter.example.org/webhook",
                                        "https://sorter.example.org")
    assert manifest["callback_urls"] == ["https://sorter.example.org/review/oauth/callback"]
    assert Settings.from_env(read_env(tmp_path / ".env")).review_enabled
    assert "reviewers sign in at https://sorter.example.org/review/" in next_steps(registration, None)


def test_a_proxy_channel_is_kept_in_env_for_run(fake, tmp_path):
    registration, _ = registered(fake, tmp_path, "https://smee.io/AbC123")
    env = read_env(tmp_path / ".env")
    assert env["ISSUE_SORTER_WEBHOOK_CHANNEL"] == "https://smee.io/AbC123"
    assert Settings.from_env(env).webhook_channel == "https://smee.io/AbC123"
    assert "make run relays the webhook proxy channel https://smee.io/AbC123" in next_steps(registration, None)


def test_every_command_reads_env_without_overriding_the_environment(tmp_path):
    (tmp_path / ".env").write_text("GITHUB_APP_SLUG='from-file'\nPORT='9001'\n")
    environ = {"PORT": "8123"}
    assert fill_from_env_file(environ, tmp_path / ".env")
    assert environ == {"PORT": "8123", "GITHUB_APP_SLUG": "from-file"}
    assert not fill_from_env_file({}, tmp_path / "absent")


@pytest.mark.slow
@pytest.mark.e2e
def test_a_laptop_registers_on_a_channel_and_run_relays_it_to_the_first_label(fake, tmp_path, tiny_model_dir, payload):
    """setup with a proxy channel's URL, `run` from .env with no --forward: a delivery posted to the channel is
    relayed to the receiver and the issue gets its label."""
    channel = Channel()
    registered(fake, tmp_path, channel.url, channel=True)
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
    body = json.dumps(delivery).encode()
    with running_service(tmp_path, env):
        channel.events.put({"x-github-event": "issues", "x-github-delivery": "via-channel",
                            "x-hub-signature-256": sign_body(body, secret), "content-type": "application/json",
                            "body": delivery, "rawbody": body.decode(), "query": {}, "timestamp": 1})
        assert wait_for(lambda: fake.issue_labels(REPO, 1))
    assert f"relaying deliveries from {channel.url}" in (tmp_path / "run.log").read_text()
