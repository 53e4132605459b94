"""Bad input, each a test: whatever GitHub (or anyone) sends gets a clear answer and loses nothing.

Deliveries go through the webhook test client, real Redis and a real RQ worker to the fake GitHub over
HTTP; the text a reporter typed reaches a label on the fakes (tests/bot/rules.py), through the queue for
the texts whose path differs, and on the real PostgreSQL below.
"""

from __future__ import annotations

import dataclasses
import json
from urllib.parse import urlencode

import pytest
from rq.job import Job
from rq.registry import FailedJobRegistry, ScheduledJobRegistry
from sqlalchemy import select

from bot import context
from bot.app import MAX_DELIVERY_BYTES
from bot.intake.queueing import DELIVERY_KEY
from bot.intake.signatures import sign_body
from bot.worker import build_context
from core.db import session_scope
from core.issue_text import format_issue_text
from core.migrate import upgrade
from core.queues import LABELING_QUEUE, QUEUES, SERIALIZER, make_queue
from core.storable_text import storable
from core.tables import IssueRecord, Prediction, WebhookDelivery
from tests.bot import rules
from tests.bot.conftest import INSTALLATION, REPO, deliver, issue_payload, run_worker
from tests.bot.rules import CLASSIFIER, label, repository, snapshot
from tests.conftest import WEBHOOK_SECRET
from tests.fakes import FakeClassifier, FakeGitHub
from tests.tiny_model import promote_model

pytestmark = pytest.mark.redis


def post(client, body: bytes, *, content_type: str | None = "application/json", signature: str | None = None,
         event: str = "issues", delivery: str = "d-bad"):
    headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery,
               "X-Hub-Signature-256": signature if signature is not None else sign_body(body, WEBHOOK_SECRET)}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return client.post("/webhook", data=body, headers=headers)


def opened(payload, number: int = 1, **fields) -> dict:
    return issue_payload(payload, "opened", number, **fields)


def nothing_queued(redis) -> bool:
    queued = sum(make_queue(redis, name).count for name in QUEUES)
    return queued == 0 and not redis.keys(DELIVERY_KEY.format("*"))


def outcome(ctx, delivery: str) -> str | None:
    with session_scope(ctx.sessionmaker) as session:
        row = session.get(WebhookDelivery, delivery)
        return row.outcome if row else None


def stored_issue(ctx, number: int) -> IssueRecord:
    with session_scope(ctx.sessionmaker) as session:
        return session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()


def predictions(ctx) -> list[Prediction]:
    with session_scope(ctx.sessionmaker) as session:
        return session.scalars(select(Prediction).order_by(Prediction.id)).all()


def no_jobs_left(redis) -> bool:
    """Nothing waiting, scheduled for a retry or failed: a dropped delivery makes no retry storm."""
    return all(make_queue(redis, q).count == 0 and not ScheduledJobRegistry(q, connection=redis, serializer=SERIALIZER).get_job_ids()
               and not FailedJobRegistry(q, connection=redis, serializer=SERIALIZER).get_job_ids() for q in QUEUES)


# --- the request: each bad body, header or size gets its own clear answer --------------------------------

DEEP_ARRAYS = b"[" * 100_000 + b"]" * 100_000
DEEP_OBJECTS = b'{"a":' * 100_000 + b"1" + b"}" * 100_000


@pytest.mark.parametrize("body,reason", [
    (b"{not json", "not JSON"),
    (b'{"action": "opened", "issue": \xff\xfe}', "not JSON"),  # not UTF-8
    (b'"just a string"', "not a JSON object"),
    (DEEP_ARRAYS, "nested too deeply"),  # json raises RecursionError: was a 500
    (DEEP_OBJECTS, "nested too deeply"),
], ids=["malformed", "not-utf8", "not-an-object", "100k-nested-arrays", "100k-nested-objects"])
def test_bodies_that_are_not_a_json_object_are_400_naming_why(client, redis, body, reason):
    response = post(client, body)
    assert response.status_code == 400 and reason in response.json["error"]
    assert nothing_queued(redis)


@pytest.mark.parametrize("change", [{"number": "abc"}, {"created_at": "yesterday"}, {"labels": 5}],
                         ids=["number-not-a-number", "date-not-a-date", "labels-not-a-list"])
def test_an_issue_with_mistyped_fields_is_400(client, redis, payload, change):
    body = opened(payload)
    body["issue"].update(change)
    response = post(client, json.dumps(body).encode())
    assert response.status_code == 400
    assert response.json["error"].startswith("malformed payload: issues.opened")
    assert nothing_queued(redis)


def test_a_delivery_one_byte_over_25_mb_is_413_as_json(client, redis):
    response = post(client, b"x" * (MAX_DELIVERY_BYTES + 1))
    assert response.status_code == 413 and response.is_json  # Flask's own 413 is an HTML page
    assert str(MAX_DELIVERY_BYTES) in response.json["error"]
    assert nothing_queued(redis)


def test_other_http_errors_are_json_too(client):
    response = client.get("/webhook")
    assert response.status_code == 405 and response.is_json and "Method Not Allowed" in response.json["error"]


@pytest.mark.parametrize("header", ["sha256=café", "sha256=\u00c3\u00a9" + "0" * 62, "sha256=" + "é" * 64],
                         ids=["latin-1", "utf-8-bytes-read-as-latin-1", "64-non-ascii"])
def test_a_non_ascii_signature_is_401_not_500(client, redis, payload, header):
    """Servers hand header bytes over as latin-1 text; hmac.compare_digest raises TypeError on it."""
    response = post(client, json.dumps(opened(payload)).encode(), signature=header)
    assert response.status_code == 401 and response.json == {"error": "invalid signature"}
    assert nothing_queued(redis)


def form_body(delivery: dict) -> bytes:
    """GitHub's `application/x-www-form-urlencoded` content type: the JSON in a `payload` field."""
    return urlencode({"payload": json.dumps(delivery)}).encode()


def test_a_form_encoded_delivery_is_verified_then_queued_like_json(client, redis, payload):
    delivery = opened(payload, 3, title="Crash on start ✨", body="naïve — 日本語")
    assert post(client, json.dumps(delivery).encode(), delivery="d-json").status_code == 202
    response = post(client, form_body(delivery), content_type="application/x-www-form-urlencoded",
                    delivery="d-form")
    assert response.status_code == 202 and response.json == {"queued": True, "delivery": "d-form"}
    queue = make_queue(redis, LABELING_QUEUE)
    as_json, as_form = (queue.fetch_job(f"label_issue--{d}").kwargs for d in ("d-json", "d-form"))
    assert as_form == as_json | {"delivery_id": "d-form", "received_at": as_form["received_at"]}


def test_a_form_encoded_delivery_with_a_wrong_signature_is_401_before_it_is_decoded(client, redis, payload):
    response = post(client, form_body(opened(payload)), content_type="application/x-www-form-urlencoded",
                    signature=sign_body(b"something else", WEBHOOK_SECRET))
    assert response.status_code == 401 and nothing_queued(redis)


@pytest.mark.parametrize("body", [b"action=opened", b"payload=%7B&payload=%7B", b"payload=%FF%FE",
                                  "payload=ü".encode()],
                         ids=["no-payload-field", "two-payload-fields", "escapes-not-utf8", "not-ascii"])
def test_a_form_body_without_one_json_payload_field_is_400(client, redis, body):
    response = post(client, body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and response.json["error"].startswith("malformed payload")
    assert nothing_queued(redis)


def test_another_content_type_is_415_naming_the_two_github_sends(client, redis, payload):
    response = post(client, json.dumps(opened(payload)).encode(), content_type="text/plain")
    assert response.status_code == 415
    assert "application/json" in response.json["error"]
    assert "application/x-www-form-urlencoded" in response.json["error"]
    assert nothing_queued(redis)


# --- the text: whatever a reporter typed reaches a label, and the database keeps all it can -------------

MEGABYTE_BODY = "The app crashes when I save. " * 36_000  # about 1 MB, 50 times what a job carries
TEXTS = {
    "nul": ("Crash\x00 on save\x00", "Traceback:\x00\x00 TypeError in save()\x00"),
    "emoji": ("App crashes 💥🐛 when saving", "Steps: click 💾 → 🔥. Expected: 🙂, got: 😱"),
    "right-to-left": ("\u202eevas nehw sehsarc ppA", "שלום, the app crashes when saving. مرحبا"),
    "lone-surrogate": ("Crash \ud800 on save", "From a JSON escape: \udfff\ud83d (no pair)"),
    "1-mb-body": ("App crashes when saving a big file", MEGABYTE_BODY),
}


@pytest.mark.parametrize("kind", TEXTS)
def test_odd_text_in_a_title_or_body_goes_through_to_a_label_on_the_fakes(sessions, kind):
    title, body = TEXTS[kind]
    github, classifier = repository(), FakeClassifier(CLASSIFIER.rules)
    github.issues[(rules.REPO, 5)] = snapshot(5, title=title, body=body)  # read when the body was cut
    assert label(sessions, github, 5, classifier=classifier, title=title, body=body)[:2] == ("applied", "bug")
    assert classifier.seen == [format_issue_text(title, body)]  # the model read the text as GitHub sent it
    assert github.issue_labels == {(rules.REPO, 5): ["bug"]}
    record = rules.stored_issue(sessions, 5)
    assert (record.title, record.body) == (storable(title), storable(body))  # only NUL and lone surrogates go


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["lone-surrogate", "1-mb-body"])
def test_odd_text_through_the_webhook_and_the_queue_reaches_a_label(worker_context, fake_github, client,
                                                                    payload, redis, kind):
    """The plumbing of the two texts whose path differs: a lone surrogate through JSON into Redis and back,
    and a body cut for the queue, which the job reads again from GitHub."""
    title, body = TEXTS[kind]
    fake_github.add_issue(REPO, 5, title, body)
    response = deliver(client, "issues", opened(payload, 5, title=title, body=body), f"d-{kind}")
    assert response.status_code == 202
    run_worker(redis)

    (prediction,) = predictions(worker_context)
    model = worker_context.models.for_repository(REPO)
    scores = model.predict([format_issue_text(title, body)])[0]  # the text as GitHub sent it
    assert prediction.outcome == "applied" and fake_github.issue_labels(REPO, 5) == [prediction.label]
    assert prediction.predicted == max(scores, key=scores.get)
    record = stored_issue(worker_context, 5)
    assert (record.title, record.body) == (storable(title), storable(body))
    assert outcome(worker_context, f"d-{kind}") == "applied"


ODD_LABELS = {"bug": "🐛 bug, confirmed", "feature": "✨ " + "f" * 48, "question": "سؤال, ❓"}


def test_odd_label_names_chosen_by_a_repositorys_config_are_applied(sessions):
    config = "labels:\n" + "".join(f"  {kind}: {json.dumps(name, ensure_ascii=False)}\n"
                                   for kind, name in ODD_LABELS.items())
    github = FakeGitHub(labels={rules.REPO: list(ODD_LABELS.values())})
    assert len(ODD_LABELS["feature"]) == 50  # GitHub's longest label name
    titles = {1: "App crash on save", 2: "Please add dark mode", 3: "How do I set a proxy?"}
    results = [label(sessions, github, n, config=config, title=title)[:2] for n, title in titles.items()]
    assert results == [("applied", ODD_LABELS[kind]) for kind in ("bug", "feature", "question")]
    assert github.issue_labels == {(rules.REPO, n): [name] for n, name in zip(titles, ODD_LABELS.values())}


# --- the issue changed before its job ran ------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("fate,status", [("deleted", 404), ("transferred", 301), ("transferred-away", 404)])
def test_an_issue_deleted_or_transferred_before_its_job_is_recorded_and_dropped(
        worker_context, fake_github, client, payload, redis, fate, status):
    fake_github.add_repo("Codertocat/Elsewhere", labels=["bug", "enhancement", "question"],
                         installation_id=INSTALLATION)
    fake_github.add_repo("Stranger/Repo", labels=["bug"], installation_id=99)  # beyond this installation
    if fate != "deleted":
        fake_github.add_issue(REPO, 1, "App crashes on save", "")
        where = "Codertocat/Elsewhere" if fate == "transferred" else "Stranger/Repo"
        fake_github.transfer_issue(REPO, 1, where, 7)
    deliver(client, "issues", opened(payload, 1, title="App crashes on save"), "d-gone")
    run_worker(redis)

    assert outcome(worker_context, "d-gone").startswith(f"dropped: GitHub answered {status}")
    assert predictions(worker_context) == [] and no_jobs_left(redis)
    assert len(fake_github.calls("GET", rf"/repos/{REPO}/issues/1")) == 1  # asked once, not again and again
    assert fake_github.calls("POST", r".*/labels") == []
    if fate == "transferred":  # the log names where it went; the outcome column keeps 64 characters
        assert outcome(worker_context, "d-gone").startswith("dropped: GitHub answered 301 (transferred to")


# --- GitHub and the database failing under a job ----------------------------------------------------------

@pytest.mark.slow
def test_a_token_github_refuses_mid_job_is_renewed_once_and_the_job_labels(worker_context, fake_github,
                                                                            client, payload, redis):
    fake_github.add_issue(REPO, 1, "App crashes on save", "")
    deliver(client, "issues", opened(payload, 1, title="App crashes on save"), "d-token-1")
    run_worker(redis)
    fake_github.expire_tokens()  # the cached token is refused from now on; PyGithub thinks it fresh
    fake_github.add_issue(REPO, 2, "Add dark mode", "")
    deliver(client, "issues", opened(payload, 2, title="Add dark mode"), "d-token-2")
    run_worker(redis)

    assert [row.outcome for row in predictions(worker_context)] == ["applied", "applied"]
    assert len(fake_github.issue_labels(REPO, 2)) == 1 and no_jobs_left(redis)
    assert len(fake_github.calls("POST", rf"/app/installations/{INSTALLATION}/access_tokens")) == 2
    assert [r.status for r in fake_github.calls("GET", rf"/repos/{REPO}/issues/2")] == [401, 200]


@pytest.mark.slow
def test_the_database_down_during_a_job_fails_it_for_rqs_retry_and_marks_nothing(
        worker_context, app_settings, fake_github, client, payload, redis):
    fake_github.add_issue(REPO, 1, "App crashes on save", "")
    deliver(client, "issues", opened(payload, 1, title="App crashes on save"), "d-db")
    down = dataclasses.replace(app_settings, database_url="postgresql+psycopg://postgres@127.0.0.1:1/down")
    context.configure(build_context(down, redis=redis))
    run_worker(redis)

    job = Job.fetch("label_issue--d-db", connection=redis, serializer=SERIALIZER)
    scheduled = ScheduledJobRegistry(LABELING_QUEUE, connection=redis, serializer=SERIALIZER)
    assert scheduled.get_job_ids() == [job.id] and job.retries_left == 2  # core.queues.CRASH_RETRY
    assert fake_github.issue_labels(REPO, 1) == [] and outcome(worker_context, "d-db") is None

    context.configure(worker_context)  # the database is back; run the retry now, not in 10 s
    scheduled.remove(job)
    make_queue(redis, LABELING_QUEUE).enqueue_job(job)
    run_worker(redis)
    assert outcome(worker_context, "d-db") == "applied" and len(fake_github.issue_labels(REPO, 1)) == 1


# --- PostgreSQL: the text it refuses is cleaned on the way in ---------------------------------------------

@pytest.fixture
def postgres_context(bare_context, postgres_url, tiny_model_dir, redis):
    """The worker's context on a migrated PostgreSQL, with the tiny model promoted there."""
    upgrade(postgres_url)
    settings = dataclasses.replace(bare_context.settings, database_url=postgres_url)
    promote_model(postgres_url, settings.model_dir, tiny_model_dir)
    ctx = build_context(settings, redis=redis)
    ctx.retry_base_seconds = 1.0
    context.configure(ctx)
    yield ctx
    context.configure(None)
    ctx.sessionmaker.kw["bind"].dispose()


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_labels_an_issue_with_nul_in_title_and_body_and_stores_the_rest(
        postgres_context, fake_github, client, payload, redis):
    """psycopg refuses NUL in text and cannot encode a lone surrogate: the job used to fail three times
    and the issue was never labelled (SQLite took the NUL, so the tests passed)."""
    title, body = "Crash\x00 when saving\x00 \ud800", "Traceback:\x00 TypeError\x00 in save()"
    fake_github.add_issue(REPO, 1, title, body)
    deliver(client, "issues", opened(payload, 1, title=title, body=body), "d-pg")
    run_worker(redis)

    (prediction,) = predictions(postgres_context)
    assert prediction.outcome == "applied" and fake_github.issue_labels(REPO, 1) == [prediction.label]
    assert outcome(postgres_context, "d-pg") == "applied"
    record = stored_issue(postgres_context, 1)
    assert (record.title, record.body) == ("Crash when saving ", "Traceback: TypeError in save()")
    # The model read the text as sent; training reads it as stored: the same input for its tokenizer.
    model = postgres_context.models.for_repository(REPO)
    as_sent, as_stored = model.predict([format_issue_text(title, body),
                                        format_issue_text(record.title, record.body)])
    assert as_sent == as_stored and prediction.predicted == max(as_sent, key=as_sent.get)

    edited = issue_payload(payload, "edited", 1, title=title, body=body + "\x00 more")
    deliver(client, "issues", edited, "d-pg-edit")
    run_worker(redis)
    assert outcome(postgres_context, "d-pg-edit") is not None and no_jobs_left(redis)
    assert stored_issue(postgres_context, 1).body == "Traceback: TypeError in save() more"
