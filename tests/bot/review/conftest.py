"""The review page's harness: the App's OAuth client on the fake GitHub, reviewers with each role, and
the bot's decisions seeded in the database as the labelling job stores them."""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

import pytest
import requests

from bot.app import create_app
from core import store
from core.db import session_scope
from core.tables import OwnLabelDecision, Prediction
from tests.bot.conftest import INSTALLATION, REPO

CLIENT_ID, CLIENT_SECRET = "Iv1.review-test", "review-client-secret"
SESSION_SECRET = "a-session-secret-of-at-least-32-characters"
OTHER_REPO, OTHER_INSTALLATION = "OtherOrg/private-repo", 2
XSS_TITLE = "<script>alert(1)</script>"
OWN_TITLE = "Streaming stops on large images"


@dataclasses.dataclass(frozen=True)
class Seeded:
    prediction_id: int
    number: int
    title: str


@pytest.fixture
def review_github(fake_github):
    """The fake with the App's OAuth client, and an organisation of its own for the outsider."""
    fake_github.add_oauth_client(CLIENT_ID, CLIENT_SECRET)
    fake_github.add_repo(OTHER_REPO, labels=["bug", "enhancement"], installation_id=OTHER_INSTALLATION,
                         collaborators={"outsider": "admin"})
    return fake_github


@pytest.fixture
def review_settings(app_settings, review_github):
    return dataclasses.replace(app_settings, client_id=CLIENT_ID, client_secret=CLIENT_SECRET,
                               session_secret=SESSION_SECRET, web_url=review_github.url, admins=("boss",))


@pytest.fixture
def review_app(review_settings, redis):
    return create_app(review_settings, redis=redis)


@pytest.fixture
def served_settings(review_settings, sessions):
    """The `client` fixture serves the review pages (the instance's admins: ("boss",)), its database's tables
    created: every page reads them."""
    return review_settings


def seed(sessions, fake, number: int, title: str, *, outcome: str, label: str | None,
         scores: dict[str, float] | None = None, repo: str = REPO, installation: int = INSTALLATION,
         reason: str = "the repository has this label", body: str = "body", **why) -> Seeded:
    """An issue on the fake GitHub and the bot's prediction for it, as classify_and_label stores them;
    `why`: the prediction's model_scores, neighbours, threshold or model_version_id."""
    fake.add_issue(repo, number, title, body, labels=[label] if outcome == "applied" and label else [])
    scores = scores or {"bug": 0.7, "feature": 0.2, "question": 0.1}
    with session_scope(sessions) as session:
        repository = store.ensure_repository(session, repo, installation)
        issue, _ = store.upsert_issue(session, repository, number, title=title, body=body,
                                      author_login="octocat", state="open")
        prediction = Prediction(issue_id=issue.id, scores=scores, predicted=max(scores, key=scores.get),
                                label=label, applied=outcome == "applied", outcome=outcome,
                                reason=reason, **why)
        session.add(prediction)
        session.flush()
        return Seeded(prediction.id, number, title)


def seed_own_labels(sessions, fake, number: int = 5, *, applied=("vision",), suggested=("streaming",)
                    ) -> Seeded:
    """A suggestion of the kind `bug` with the repository's own labels beside it, as the labelling job stores
    them: those `applied` are on the issue, those `suggested` are not."""
    row = seed(sessions, fake, number, OWN_TITLE, outcome="suggested", label="bug")
    fake.add_issue(REPO, number, OWN_TITLE, "body", labels=list(applied))
    with session_scope(sessions) as session:
        session.add_all([OwnLabelDecision(prediction_id=row.prediction_id, label=name, score=0.9,
                                          threshold=0.6, outcome="applied") for name in applied])
        session.add_all([OwnLabelDecision(prediction_id=row.prediction_id, label=name, score=0.7,
                                          threshold=None, outcome="suggested") for name in suggested])
    return row


def sign_in(client, fake, login: str):
    """GitHub's web flow through the test client: our redirect, the fake's consent, our callback."""
    fake.sign_in_as(login)
    start = client.get("/review/sign-in/github")
    assert start.status_code == 302
    consent = requests.get(start.headers["Location"], allow_redirects=False, timeout=5)
    assert consent.status_code == 302
    back = urlsplit(consent.headers["Location"])
    return client.get(f"{back.path}?{back.query}")


def csrf_token(client) -> str:
    """The CSRF token of the client's session, as the page's forms carry it."""
    page = client.get("/review/")
    marker = 'name="csrf_token" value="'
    text = page.get_data(as_text=True)
    return text.split(marker, 1)[1].split('"', 1)[0]
