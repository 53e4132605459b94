"""The bot's integration harness: webhook test client, real Redis, a real RQ worker in this process,
the fake GitHub over real HTTP, and a real fine-tuned encoder."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import json

import pytest
from rq import SimpleWorker

from bot import context
from bot.app import create_app
from bot.intake.signatures import sign_body
from bot.worker import build_context
from core.queues import QUEUES, SERIALIZER
from simulation.fake_github import FakeGitHub, generate_app_keypair
from tests.bot.rules import repository
from tests.conftest import WEBHOOK_SECRET, marked_settings
from tests.tiny_model import promote_model
from trainer import context as training_context
from trainer.worker import build_context as build_training_context

REPO = "Codertocat/Hello-World"
INSTALLATION = 1


@pytest.fixture(scope="session")
def app_key() -> tuple[str, str]:
    """The App's RSA key pair (private PEM, public PEM), made once: making one takes a tenth of a second, and
    hundreds of tests start a fake GitHub."""
    return generate_app_keypair()


@pytest.fixture
def fake_github(app_key):
    with FakeGitHub(app_id=1, public_key_pem=app_key[1]) as fake:
        fake.add_repo(REPO, labels=["bug", "enhancement", "question", "documentation", "wontfix"],
                      installation_id=INSTALLATION, collaborators={"maintainer": "maintain", "boss": "admin",
                                                                   "helper": "triage", "reader": "read"})
        yield fake


@pytest.fixture
def github(request):
    """The rules' in-memory GitHub (tests/bot/rules.py), made with the fields of the test's
    `@pytest.mark.github(...)` (issue types, other labels, files), copied: a test that changes them changes
    its own; not the `fake_github` over HTTP."""
    marker = request.node.get_closest_marker("github")
    return repository(**copy.deepcopy(marker.kwargs if marker else {}))


@pytest.fixture
def app_settings(request, settings, fake_github, app_key):
    """The App on the fake GitHub. Its jobs read every issue again from the fake (no fresh window), where
    the tests set the state under test; tests/bot/github_api/test_github_calls.py opens the window to measure it
    (a `@pytest.mark.settings(...)` field wins over these too)."""
    return marked_settings(request, dataclasses.replace(
        settings, app_id=1, private_key=app_key[0], api_url=fake_github.url, threshold=0.0,
        app_slug="issue-sorter", fresh_delivery_seconds=0.0))


@pytest.fixture
def bare_context(app_settings, sessions, redis):
    """The worker's context with no model promoted: enough for feedback, commands and backfill jobs."""
    ctx = build_context(app_settings, redis=redis)
    ctx.retry_base_seconds = 1.0
    context.configure(ctx)
    yield ctx
    context.configure(None)


@pytest.fixture
def install_training_context(bare_context):
    """Installs the training worker's context, built from the bot's settings as they are when called."""
    def install():
        training_context.configure(build_training_context(bare_context.settings, redis=bare_context.redis))

    yield install
    training_context.configure(None)


@pytest.fixture
def worker_context(bare_context, tiny_model_dir):
    """What `issue-sorter worker` builds, with the tiny model promoted; installed for the jobs."""
    settings = bare_context.settings
    promote_model(settings.database_url, settings.model_dir, tiny_model_dir)
    return bare_context


@pytest.fixture
def served_settings(app_settings):
    """What `client` serves: the App on the fake GitHub (tests/bot/review serves its review settings)."""
    return app_settings


@pytest.fixture
def client(served_settings, redis):
    """The web process's test client: the webhook receiver, /healthz, /metrics and the review pages."""
    return create_app(served_settings, redis=redis).test_client()


def run_worker(redis, queues: tuple[str, ...] = QUEUES) -> None:
    """A real RQ worker, in this process, until the queues are empty."""
    SimpleWorker(list(queues), connection=redis, serializer=SERIALIZER).work(burst=True)


def deliver(client, event: str, body: dict, delivery: str, secret: str = WEBHOOK_SECRET):
    raw = json.dumps(body).encode()
    return client.post("/webhook", data=raw, headers={
        "X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": sign_body(raw, secret),
        "Content-Type": "application/json"})


def issue_payload(payload, action: str, number: int, *, title: str = "", body: str = "", labels=(),
                  label: str | None = None, sender: str | None = None, sender_type: str = "User") -> dict:
    """A real `issues` example from ../shared, pointed at our repository, issue and sender, stamped now
    (`updated_at`: GitHub's time of the event; an older one never overwrites newer state). The sender is the
    example's author for `opened`, else the repository's maintainer (fake_github's collaborators)."""
    name = {"opened": "issues/opened", "labeled": "issues/labeled", "unlabeled": "issues/unlabeled",
            "closed": "issues/opened", "edited": "issues/edited", "deleted": "issues/deleted"}[action]
    data = payload(name)
    data["action"] = action
    data["installation"] = {"id": INSTALLATION, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ=="}
    data["issue"].update(number=number, title=title or data["issue"]["title"], body=body,
                         labels=[{"name": name} for name in labels], state="closed" if action == "closed" else "open",
                         updated_at=dt.datetime.now(dt.UTC).isoformat())
    data["sender"].update(login=sender or ("Codertocat" if action == "opened" else "maintainer"), type=sender_type)
    if label is not None:
        data["label"] = {"name": label, "color": "ededed"}
    return data
