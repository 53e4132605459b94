"""The review page through Flask's test client: who sees what, and what one click does."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from sqlalchemy import select

from bot.app import create_app
from bot.review import access
from core import store
from core.db import session_scope
from core.tables import IssueRecord, LabelEvent, Prediction
from tests.bot.conftest import REPO, run_worker
from tests.bot.review.conftest import OTHER_REPO, XSS_TITLE, csrf_token, seed, sign_in

TITLE = "Crash when the config file is empty"
PAGE = f"/review/{REPO}"


@pytest.fixture
def seeded(sessions, review_github):
    return {"suggested": seed(sessions, review_github, 1, TITLE, outcome="suggested", label="bug"),
            "applied": seed(sessions, review_github, 2, "Add a dark mode", outcome="applied",
                            label="enhancement", scores={"feature": 0.8, "bug": 0.1, "question": 0.1}),
            "abstained": seed(sessions, review_github, 3, "How do I run it?", outcome="abstained", label=None,
                              scores={"question": 0.4, "bug": 0.3, "feature": 0.3}),
            "xss": seed(sessions, review_github, 4, XSS_TITLE, outcome="suggested", label="bug"),
            "other": seed(sessions, review_github, 1, "Secret other-org issue", outcome="suggested",
                          label="bug", repo=OTHER_REPO, installation=2)}


def review(client, prediction_id: int, choice: str, label: str | None = None, repo: str = REPO):
    data = {"choice": choice, "csrf_token": csrf_token(client), "filter": "all"}
    if label:
        data["label"] = label
    return client.post(f"/review/{repo}/predictions/{prediction_id}", data=data)


def decision(sessions, prediction_id: int) -> tuple[str | None, str | None, str | None]:
    with session_scope(sessions) as session:
        prediction = session.get(Prediction, prediction_id)
        issue = session.get(IssueRecord, prediction.issue_id)
        return prediction.decision, issue.confirmed_label, issue.confirmed_by


def test_the_review_page_is_off_without_an_oauth_client(app_settings, redis, caplog):
    caplog.set_level("INFO")
    client = create_app(app_settings, redis=redis).test_client()
    assert client.get("/review/").status_code == 404
    assert client.get("/review/sign-in").status_code == 404
    assert "review page off" in caplog.text


def test_without_a_session_every_page_redirects_to_sign_in_and_shows_no_title(client, seeded):
    pages = [("get", "/review/"), ("get", PAGE), ("get", f"{PAGE}?filter=all"),
             ("get", f"/review/{OTHER_REPO}"), ("post", "/review/sign-out"),
             ("post", f"{PAGE}/predictions/{seeded['suggested'].prediction_id}"),
             ("get", f"{PAGE}/quality"), ("get", f"{PAGE}/charts/weekly.png"), ("post", f"{PAGE}/models/retrain"),
             ("get", "/review/operator"), ("post", "/review/operator/jobs/feedback/x/retry")]
    for method, path in pages:
        response = getattr(client, method)(path, data={"choice": "accept"})
        assert response.status_code == 302 and "/review/sign-in" in response.headers["Location"], path
        assert TITLE not in response.get_data(as_text=True)
    assert client.get("/review/nope/nope/predictions/1").status_code in (302, 404, 405)


def test_a_maintainer_signs_in_and_sees_the_repository_s_decisions(client, review_github, seeded):
    signed_in = sign_in(client, review_github, "maintainer")
    assert signed_in.status_code == 302 and signed_in.headers["Location"].endswith("/review/")
    index = client.get("/review/").get_data(as_text=True)
    assert REPO in index and OTHER_REPO not in index
    waiting = client.get(PAGE).get_data(as_text=True)
    assert TITLE in waiting and "How do I run it?" in waiting
    assert "Add a dark mode" not in waiting  # applied: not waiting
    assert f'href="{review_github.url}/{REPO}/issues/1"' in waiting
    assert "bug 0.70" in waiting
    everything = client.get(f"{PAGE}?filter=all").get_data(as_text=True)
    assert "Add a dark mode" in everything and "Secret other-org issue" not in everything
    assert "Nothing here" in client.get(f"{PAGE}?filter=corrected").get_data(as_text=True)


def test_an_issue_title_is_text_not_markup(client, review_github, seeded):
    sign_in(client, review_github, "maintainer")
    page = client.get(PAGE).get_data(as_text=True)
    assert XSS_TITLE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.parametrize("login", ["reader", "outsider", "stranger"])
def test_without_triage_permission_a_repository_is_404_and_shows_nothing(client, review_github, seeded,
                                                                          login):
    """A reader of the repository, an admin of another organisation, someone with no access at all."""
    assert sign_in(client, review_github, login).status_code == 302
    assert REPO not in client.get("/review/").get_data(as_text=True)
    for path in (PAGE, f"{PAGE}?filter=all"):
        response = client.get(path)
        assert response.status_code == 404 and TITLE not in response.get_data(as_text=True)
    assert review(client, seeded["suggested"].prediction_id, "accept").status_code == 404
    assert review_github.issue_labels(REPO, 1) == []


def test_the_outsider_sees_only_their_own_organisation(client, review_github, seeded):
    sign_in(client, review_github, "outsider")
    assert "Secret other-org issue" in client.get(f"/review/{OTHER_REPO}?filter=all").get_data(as_text=True)
    assert client.get(PAGE).status_code == 404


def test_a_triager_accepts_a_suggestion_the_app_labels_it_and_the_decision_is_theirs(
        client, review_github, seeded, sessions, bare_context, redis):
    sign_in(client, review_github, "helper")
    suggested = seeded["suggested"]
    response = review(client, suggested.prediction_id, "accept")
    assert response.status_code == 303
    page = client.get(f"{PAGE}?filter=all").get_data(as_text=True)
    assert "queued" in page and "accept" in page
    assert review_github.issue_labels(REPO, 1) == []  # the web process wrote nothing
    run_worker(redis)
    assert review_github.issue_labels(REPO, 1) == ["bug"]
    assert decision(sessions, suggested.prediction_id) == ("accepted", "bug", "helper")
    with session_scope(sessions) as session:
        event = session.scalars(select(LabelEvent)).one()
        assert (event.action, event.label, event.actor_login, event.actor_is_human) == \
            ("labeled", "bug", "helper", True)
    page = client.get(f"{PAGE}?filter=all").get_data(as_text=True)
    assert "helper added" in page
    assert TITLE not in client.get(PAGE).get_data(as_text=True)  # no longer waiting


def test_another_label_on_an_applied_prediction_is_a_correction(client, review_github, seeded, sessions,
                                                                bare_context, redis):
    sign_in(client, review_github, "maintainer")
    applied = seeded["applied"]
    assert review(client, applied.prediction_id, "relabel", "bug").status_code == 303
    run_worker(redis)
    assert review_github.issue_labels(REPO, 2) == ["bug"]
    assert decision(sessions, applied.prediction_id) == ("corrected", "bug", "maintainer")
    assert "Add a dark mode" in client.get(f"{PAGE}?filter=corrected").get_data(as_text=True)


def test_rejecting_an_abstention_writes_nothing_and_records_who(client, review_github, seeded, sessions,
                                                               bare_context, redis):
    sign_in(client, review_github, "maintainer")
    assert review(client, seeded["abstained"].prediction_id, "reject").status_code == 303
    run_worker(redis)
    assert review_github.issue_labels(REPO, 3) == []
    assert review_github.calls("POST", r".*/labels") == [] and review_github.calls("DELETE", r".*") == []
    assert decision(sessions, seeded["abstained"].prediction_id)[0] == "rejected"
    assert "maintainer dismissed" in client.get(f"{PAGE}?filter=all").get_data(as_text=True)


def test_a_label_the_repository_does_not_have_is_refused_before_queueing(client, review_github, seeded,
                                                                          redis):
    sign_in(client, review_github, "maintainer")
    response = review(client, seeded["suggested"].prediction_id, "relabel", "no-such-label")
    assert response.status_code == 303
    assert "Pick one of the repository" in client.get(PAGE).get_data(as_text=True)
    assert redis.llen("rq:queue:feedback") == 0


def test_a_second_click_while_queued_queues_nothing(client, review_github, seeded, redis):
    sign_in(client, review_github, "maintainer")
    review(client, seeded["suggested"].prediction_id, "accept")
    review(client, seeded["suggested"].prediction_id, "reject")
    assert redis.llen("rq:queue:feedback") == 1
    assert "queued already" in client.get(PAGE).get_data(as_text=True)


def test_a_form_without_its_csrf_token_is_refused(client, review_github, seeded, redis):
    sign_in(client, review_github, "maintainer")
    response = client.post(f"{PAGE}/predictions/{seeded['suggested'].prediction_id}",
                           data={"choice": "accept"})
    assert response.status_code == 400
    assert client.post("/review/sign-out").status_code == 400
    assert redis.llen("rq:queue:feedback") == 0


def test_sign_out_ends_the_session_on_the_server_too(client, review_github, seeded):
    sign_in(client, review_github, "maintainer")
    cookie = client.get_cookie("issue_sorter_session").value
    assert client.post("/review/sign-out", data={"csrf_token": csrf_token(client)}).status_code == 302
    assert client.get(PAGE).status_code == 302
    client.set_cookie("issue_sorter_session", cookie)  # the old cookie, replayed
    response = client.get(PAGE)
    assert response.status_code == 302 and TITLE not in response.get_data(as_text=True)


def test_permissions_are_cached_for_minutes_then_asked_again(client, review_github, seeded, redis):
    sign_in(client, review_github, "maintainer")
    assert client.get(PAGE).status_code == 200
    asked = len(review_github.calls("GET", "/user/installations"))
    review_github.add_repo(REPO, labels=["bug"], collaborators={"maintainer": "read"})  # demoted on GitHub
    assert client.get(PAGE).status_code == 200  # still cached
    assert len(review_github.calls("GET", "/user/installations")) == asked
    keys = redis.keys("issue-sorter:review:access:*")
    assert len(keys) == 1 and 0 < redis.ttl(keys[0]) <= access.ACCESS_TTL
    redis.delete(keys[0])  # as when the TTL runs out
    assert client.get(PAGE).status_code == 404


def test_a_revoked_token_signs_the_user_out(client, review_github, seeded, redis):
    sign_in(client, review_github, "maintainer")
    assert client.get(PAGE).status_code == 200
    redis.delete(*redis.keys("issue-sorter:review:access:*"))  # the cache ran out: GitHub is asked again
    review_github.fail_next("GET", "/user/installations", 401)
    response = client.get(PAGE)
    assert response.status_code == 302 and "/review/sign-in" in response.headers["Location"]
    assert redis.keys("issue-sorter:review:session:*") == []


def test_a_forged_or_replayed_oauth_state_signs_nobody_in(client, review_github, seeded):
    review_github.sign_in_as("maintainer")
    start = client.get("/review/sign-in/github")
    assert start.status_code == 302
    response = client.get("/review/oauth/callback?code=whatever&state=forged")
    assert response.status_code == 302 and response.headers["Location"].endswith("/review/sign-in")
    assert client.get(PAGE).status_code == 302


def test_session_cookie_is_httponly_lax_and_secure_behind_https(review_settings, redis, review_github):
    plain = create_app(review_settings, redis=redis).test_client()
    cookie = plain.get("/review/sign-in/github").headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    proxied = create_app(dataclasses.replace(review_settings, trusted_proxies=1), redis=redis).test_client()
    https = {"X-Forwarded-Proto": "https"}
    cookie = proxied.get("/review/sign-in/github", headers=https).headers["Set-Cookie"]
    assert "Secure" in cookie
    untrusted = plain.get("/review/sign-in/github", headers=https).headers["Set-Cookie"]
    assert "Secure" not in untrusted
    assert "Secure" in plain.get("/review/sign-in/github", base_url="https://localhost").headers["Set-Cookie"]


def test_sign_in_returns_only_to_the_review_page(client, review_github):
    review_github.sign_in_as("maintainer")
    client.get("/review/sign-in/github?next=https://evil.example/")
    with client.session_transaction() as session:
        assert session["next"] == "/review/"


@pytest.mark.e2e  # a Python process of its own: what it imports
def test_the_review_page_never_imports_torch_pygithub_or_the_jobs(review_settings, redis_url, review_github):
    script = f"""
import dataclasses, json, sys
from redis import Redis
from bot.app import create_app
from core.settings import Settings
settings = Settings(webhook_secret="s", database_url={review_settings.database_url!r},
                    redis_url={redis_url!r}, client_id="c", client_secret="s", session_secret="x" * 32,
                    api_url={review_github.url!r}, web_url={review_github.url!r})
client = create_app(settings, redis=Redis.from_url({redis_url!r})).test_client()
paths = ("/review/sign-in", "/review/", "/review/sign-in/github")
statuses = [client.get(path).status_code for path in paths]
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers", "github", "trainer")
               or m in ("bot.jobs", "bot.worker", "core.classifier", "bot.review.decide"))
print(json.dumps({{"statuses": statuses, "heavy": heavy}}))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {"statuses": [200, 302, 302], "heavy": []}


def test_the_review_job_is_in_the_contract_with_its_arguments():
    import importlib
    import inspect

    from core.queues import JOBS, REVIEW_PREDICTION

    module, name = REVIEW_PREDICTION.name.rsplit(".", 1)
    function = getattr(importlib.import_module(module), name)
    assert REVIEW_PREDICTION in JOBS and REVIEW_PREDICTION.queue == "feedback"
    assert inspect.signature(function).parameters["review"].kind is inspect.Parameter.VAR_KEYWORD
    from bot.review.decide import Review

    assert REVIEW_PREDICTION.arguments == set(Review.__dataclass_fields__) | {"installation_id"}


def test_a_review_github_refuses_is_shown_and_decides_nothing(client, review_github, seeded, sessions,
                                                              bare_context, redis):
    sign_in(client, review_github, "maintainer")
    review_github.fail_next("POST", r"/repos/.*/issues/1/labels", 403)
    review(client, seeded["suggested"].prediction_id, "accept")
    run_worker(redis)
    assert decision(sessions, seeded["suggested"].prediction_id) == (None, None, None)
    page = client.get(PAGE).get_data(as_text=True)
    assert "last try: failed: GitHub answered 403" in page and TITLE in page  # still waiting, can be retried


def test_a_review_of_a_decided_prediction_is_refused_by_the_worker(client, review_github, seeded, sessions,
                                                                   bare_context, redis):
    """Two maintainers click at once: the second review finds the decision made and writes nothing."""
    sign_in(client, review_github, "maintainer")
    review(client, seeded["abstained"].prediction_id, "relabel", "question")
    run_worker(redis)
    from bot.jobs import review_prediction

    outcome = review_prediction(review_id="second", installation_id=1, repo=REPO, number=3,
                                prediction_id=seeded["abstained"].prediction_id, choice="reject", label=None,
                                reviewer_login="boss")
    assert outcome.startswith("refused: already decided")
    assert review_github.issue_labels(REPO, 3) == ["question"]
    assert decision(sessions, seeded["abstained"].prediction_id) == (None, "question", "maintainer")


def test_decisions_come_newest_first_twenty_a_page(client, review_github, sessions):
    for number in range(1, 26):
        seed(sessions, review_github, number, f"Issue number {number}", outcome="suggested", label="bug")
    sign_in(client, review_github, "maintainer")
    first = client.get(PAGE).get_data(as_text=True)
    assert "#25 Issue number 25" in first and "#6 Issue number 6" in first
    assert "#5 Issue number 5" not in first
    assert first.index("#25 Issue") < first.index("#24 Issue") and "page 1 of 2" in first
    second = client.get(f"{PAGE}?page=2").get_data(as_text=True)
    assert "#5 Issue number 5" in second and "#1 Issue number 1" in second and "#6 Issue" not in second


def test_webhooks_need_no_csrf_token_when_the_review_page_is_on(client, payload):
    from tests.bot.conftest import deliver, issue_payload

    response = deliver(client, "issues", issue_payload(payload, "opened", 1, title="t"), "d-review-on")
    assert response.status_code == 202 and "Set-Cookie" not in response.headers


def test_the_repository_page_says_how_far_its_memory_is_filled(client, review_github, seeded, sessions):
    sign_in(client, review_github, "maintainer")
    assert 'id="memory"' not in client.get(PAGE).get_data(as_text=True)  # no fill has run yet
    with session_scope(sessions) as session:  # as core.memory.fill stores it after a batch
        repository = store.find_repository(session, full_name=REPO)
        repository.memory_version, repository.memory_embedded, repository.memory_of = "v3", 812, 1000
    assert "memory: 812 of 1,000 issues embedded by v3" in client.get(PAGE).get_data(as_text=True)


def test_error_pages_are_pages_of_the_site_with_a_way_back(client, review_github, seeded):
    """An unknown repository, a bad filter and the operator page for a non-admin answered raw JSON
    ({"error": "Not Found: ..."}): no layout, no way back. JSON stays for a client that asks for it."""
    sign_in(client, review_github, "maintainer")
    for path, back in (("/review/nobody/nothing", None), (f"{PAGE}?filter=bogus", PAGE),
                       ("/review/operator", None), ("/review/no/such/page/here", None)):
        response = client.get(path)
        body = response.get_data(as_text=True)
        assert (response.status_code, response.mimetype) == (404, "text/html"), path
        assert '"error"' not in body and 'href="/review/">← Your repositories</a>' in body, path
        assert "Sign out" in body  # the page's own layout
        assert (f'href="{back}">← {REPO}</a>' in body) == (back is not None), path
    assert "There is no filter &#39;bogus&#39;" in client.get(f"{PAGE}?filter=bogus").get_data(as_text=True)
    asked = client.get("/review/nobody/nothing", headers={"Accept": "application/json"})
    assert asked.status_code == 404 and asked.get_json()["error"].startswith("Not Found")
