"""Maintainers' label decisions through the real pipeline: the bot labels an issue once (real model), then
`issues` deliveries as GitHub sends them → Redis → RQ worker → label events, decisions and training data."""

import dataclasses

import pytest
from rq.registry import FailedJobRegistry, ScheduledJobRegistry
from sqlalchemy import select

from bot import context, feedback
from bot.queueing import DELIVERY_KEY
from bot.repo_config import CONFIG_PATH
from bot.worker import build_context
from core import store
from core.db import Base, make_sessionmaker, session_scope
from core.queues import FEEDBACK_QUEUE, SERIALIZER
from core.tables import IssueRecord, LabelEvent, WebhookDelivery
from tests.bot.conftest import REPO, deliver, issue_payload, run_worker

pytestmark = pytest.mark.redis
BOT = "issue-sorter[bot]"
TITLE, BODY = "App crashes with TypeError when saving", "Steps to reproduce: click save. Traceback: TypeError ..."
KNOWN = ("bug", "enhancement", "question")  # labels of the fake repository that map to the model's kinds


def send(client, payload, action: str, delivery: str, *, labels=(), label=None, sender="maintainer",
         sender_type="User", number=1, title=TITLE, body=BODY):
    """An `issues` delivery as GitHub sends it: `labels` is the issue's labels after the change."""
    data = issue_payload(payload, action, number, title=title, body=body, labels=labels, label=label,
                         sender=sender, sender_type=sender_type)
    return deliver(client, "issues", data, delivery)


def open_and_label(fake_github, client, payload, redis) -> list[str]:
    fake_github.add_issue(REPO, 1, TITLE, BODY)
    deliver(client, "issues", issue_payload(payload, "opened", 1, title=TITLE, body=BODY), "d-open")
    run_worker(redis)
    return fake_github.issue_labels(REPO, 1)


@pytest.fixture
def ours(worker_context, fake_github, client, payload, redis) -> str:
    """Issue 1 labelled by the bot with the real model, and GitHub's `labeled` delivery of that label."""
    (label,) = open_and_label(fake_github, client, payload, redis)
    send(client, payload, "labeled", "d-bot", labels=[label], label=label, sender=BOT, sender_type="Bot")
    run_worker(redis)
    return label


def other_than(label: str) -> str:
    return next(known for known in KNOWN if known != label)


def decision_and_training_label(ctx, number: int = 1) -> tuple[str | None, str | None]:
    with session_scope(ctx.sessionmaker) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()
        prediction = store.latest_prediction(session, issue)
        return (prediction.decision if prediction else None), issue.confirmed_label


def stored_issue(ctx, number: int = 1) -> dict:
    with session_scope(ctx.sessionmaker) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == number)).one()
        return {c: getattr(issue, c) for c in ("title", "body", "state", "confirmed_label", "confirmed_by",
                                               "confirmed_at")}


def label_events(ctx) -> list[tuple]:
    with session_scope(ctx.sessionmaker) as session:
        return [(e.action, e.label, e.actor_login, e.actor_is_human, e.by_this_app)
                for e in session.scalars(select(LabelEvent).order_by(LabelEvent.id))]


def no_job_failed_or_retried(redis) -> bool:
    return (FailedJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).count,
            ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).count) == (0, 0)


def outcome(ctx, delivery: str) -> str:
    with session_scope(ctx.sessionmaker) as session:
        return session.get(WebhookDelivery, delivery).outcome


# ---- pure rules ------------------------------------------------------------------------------------

@pytest.mark.parametrize("login,is_bot,via_app,human,this_app", [
    ("maintainer", False, None, True, False),
    (BOT, True, None, False, True),  # our App's own label
    (BOT, False, None, False, True),  # our login is enough, whatever the type says
    ("dependabot[bot]", True, None, False, False),  # another App
    ("renovate[bot]", True, 99, False, False),  # performed via another App
    ("some-bot", True, 1, False, True),  # performed via our App id
])
def test_identify_actor_tells_humans_our_app_and_other_bots_apart(login, is_bot, via_app, human, this_app):
    actor = feedback.identify_actor(login, is_bot, via_app, bot_login=BOT, app_id=1)
    assert (actor.login, actor.is_human, actor.is_this_app) == (login, human, this_app)


def test_without_a_known_identity_only_the_bot_flag_marks_a_bot():
    assert feedback.identify_actor(BOT, False, None, bot_login=None, app_id=None).is_human
    assert not feedback.identify_actor(BOT, True, None, bot_login=None, app_id=None).is_human


@pytest.mark.parametrize("label,classes,known", [
    ("bug", [], True), ("Type: Bug", [], True), ("kind/feature", [], True), ("C-enhancement", [], True),
    ("question", ["bug", "feature", "question"], True), ("documentation", [], True),
    ("area: ui", ["area: ui", "area: api"], True),  # a repository model's own class
    ("area: ui", ["bug", "feature"], False), ("wontfix", [], False), ("good first issue", [], False),
    ("duplicate", [], False), ("bug", ["area: ui"], True),
])
def test_is_known_label_accepts_model_classes_and_kind_labels(label, classes, known):
    assert feedback.is_known_label(label, classes) is known


# ---- decisions, end to end ---------------------------------------------------------------------------

@pytest.mark.slow
def test_the_bots_own_label_event_is_recorded_and_decides_nothing(ours, worker_context):
    assert label_events(worker_context) == [("labeled", ours, BOT, False, True)]
    assert decision_and_training_label(worker_context) == (None, None)
    assert outcome(worker_context, "d-bot").startswith("bot event")


@pytest.mark.slow
def test_closing_an_issue_with_the_bots_label_on_accepts_it(ours, worker_context, client, payload, redis):
    send(client, payload, "closed", "d-close", labels=[ours], sender="maintainer")
    run_worker(redis)
    assert decision_and_training_label(worker_context) == ("accepted", ours)
    assert stored_issue(worker_context)["confirmed_by"] == "maintainer"
    assert stored_issue(worker_context)["state"] == "closed"


@pytest.mark.slow
@pytest.mark.parametrize("action,label,after", [
    ("labeled", "good first issue", ["wontfix", "good first issue"]),  # another label added
    ("unlabeled", "wontfix", []),  # another label removed
])
def test_changing_other_labels_and_leaving_the_bots_on_accepts_it(worker_context, fake_github, client, payload,
                                                                   redis, action, label, after):
    fake_github.add_issue(REPO, 1, TITLE, BODY, labels=["wontfix"])
    deliver(client, "issues", issue_payload(payload, "opened", 1, title=TITLE, body=BODY, labels=["wontfix"]),
            "d-open")
    run_worker(redis)
    ours = fake_github.issue_labels(REPO, 1)[-1]
    send(client, payload, action, "d-change", labels=after + [ours], label=label)
    run_worker(redis)
    assert decision_and_training_label(worker_context) == ("accepted", ours)


@pytest.mark.slow
def test_a_known_label_beside_the_bots_waits_for_the_maintainer(ours, worker_context, client, payload, redis):
    other = other_than(ours)
    send(client, payload, "labeled", "d-add", labels=[ours, other], label=other)
    run_worker(redis)
    assert decision_and_training_label(worker_context) == (None, None)
    assert outcome(worker_context, "d-add").startswith("recorded: another known label")


@pytest.mark.slow
def test_the_bots_label_removed_by_a_human_is_rejected_and_never_put_back(ours, worker_context, fake_github,
                                                                          client, payload, redis):
    send(client, payload, "unlabeled", "d-remove", labels=[], label=ours)
    run_worker(redis)
    assert decision_and_training_label(worker_context) == ("rejected", None)
    assert label_events(worker_context)[-1] == ("unlabeled", ours, "maintainer", True, False)
    # the label is gone on GitHub; a fresh `opened` delivery (a transfer back, a redelivery) must not re-add it
    fake_github.add_issue(REPO, 1, TITLE, BODY)
    deliver(client, "issues", issue_payload(payload, "opened", 1, title=TITLE, body=BODY), "d-open-again")
    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) == []
    assert len(fake_github.calls("POST", rf"/repos/{REPO}/issues/1/labels")) == 1


@pytest.mark.slow
def test_a_rejection_after_an_acceptance_takes_the_training_label_back(ours, worker_context, client, payload,
                                                                       redis):
    """A maintainer added `wontfix` beside our label (accepted: ours became training data), then thought
    again and removed ours. The prediction was marked rejected, but the issue kept teaching our label."""
    send(client, payload, "labeled", "d-wontfix", labels=[ours, "wontfix"], label="wontfix")
    run_worker(redis)
    assert decision_and_training_label(worker_context) == ("accepted", ours)
    send(client, payload, "unlabeled", "d-remove", labels=["wontfix"], label=ours)
    run_worker(redis)
    assert decision_and_training_label(worker_context) == ("rejected", None)


@pytest.mark.slow
@pytest.mark.parametrize("order", ["remove ours first", "add the replacement first"])
def test_the_bots_label_replaced_by_another_known_label_is_corrected(ours, worker_context, client, payload, redis,
                                                                     order):
    other = other_than(ours)
    if order == "remove ours first":
        send(client, payload, "unlabeled", "d-1", labels=[], label=ours)
        send(client, payload, "labeled", "d-2", labels=[other], label=other)
    else:
        send(client, payload, "labeled", "d-1", labels=[ours, other], label=other)
        send(client, payload, "unlabeled", "d-2", labels=[other], label=ours)
    run_worker(redis)
    assert decision_and_training_label(worker_context) == ("corrected", other)
    assert stored_issue(worker_context)["confirmed_by"] == "maintainer"


@pytest.mark.slow
def test_a_human_label_where_the_bot_abstained_is_new_training_data(worker_context, fake_github, client, payload,
                                                                    redis):
    fake_github.add_repo(REPO, labels=fake_github.repo_labels(REPO), files={CONFIG_PATH: "threshold: 1.0\n"})
    assert open_and_label(fake_github, client, payload, redis) == []
    send(client, payload, "labeled", "d-human", labels=["question"], label="question")
    run_worker(redis)
    assert decision_and_training_label(worker_context) == (None, "question")
    assert outcome(worker_context, "d-human").startswith("new training data")


@pytest.mark.slow
def test_a_label_a_human_took_off_before_the_bot_ran_is_not_put_on(worker_context, fake_github, client, payload,
                                                                   redis):
    """The labelling queue was busy: a maintainer tried every kind label and removed each again before the
    label job ran. Whatever the model predicts, it was removed by a human, so the bot abstains."""
    fake_github.add_issue(REPO, 1, TITLE, BODY)
    deliver(client, "issues", issue_payload(payload, "opened", 1, title=TITLE, body=BODY), "d-open")
    for label in KNOWN:
        send(client, payload, "labeled", f"d-add-{label}", labels=[label], label=label)
        send(client, payload, "unlabeled", f"d-remove-{label}", labels=[], label=label)
    run_worker(redis, queues=(FEEDBACK_QUEUE,))
    run_worker(redis)
    assert fake_github.issue_labels(REPO, 1) == []
    with session_scope(worker_context.sessionmaker) as session:
        issue = session.scalars(select(IssueRecord)).one()
        prediction = store.latest_prediction(session, issue)
        assert prediction.outcome == "abstained" and "a maintainer removed" in prediction.reason
        assert issue.confirmed_label is None  # each confirmation was taken back


# ---- without a model: issues the bot never labelled ---------------------------------------------------

@pytest.mark.parametrize("label,training", [("bug", "bug"), ("Type: Bug", "Type: Bug"), ("wontfix", None)])
def test_a_human_label_on_an_issue_the_bot_never_saw_is_training_data_when_known(bare_context, client, payload,
                                                                                 redis, label, training):
    send(client, payload, "labeled", "d-human", labels=[label], label=label)
    run_worker(redis)
    assert decision_and_training_label(bare_context) == (None, training)
    assert label_events(bare_context) == [("labeled", label, "maintainer", True, False)]


def test_another_bots_label_events_are_not_a_human_decision(bare_context, client, payload, redis):
    other_bot = {"sender": "dependabot[bot]", "sender_type": "Bot"}
    send(client, payload, "labeled", "d-1", labels=["bug"], label="bug", **other_bot)
    send(client, payload, "unlabeled", "d-2", labels=[], label="bug", **other_bot)
    run_worker(redis)
    assert decision_and_training_label(bare_context) == (None, None)
    assert [e[3:] for e in label_events(bare_context)] == [(False, False), (False, False)]
    with session_scope(bare_context.sessionmaker) as session:
        assert feedback.removed_by_human(session, session.scalars(select(IssueRecord)).one()) == set()


def test_edited_updates_the_stored_text(bare_context, client, payload, redis):
    send(client, payload, "labeled", "d-1", labels=["bug"], label="bug")
    send(client, payload, "edited", "d-2", labels=["bug"], title="Crash on save", body="Now with a traceback")
    run_worker(redis)
    issue = stored_issue(bare_context)
    assert (issue["title"], issue["body"], issue["confirmed_label"]) == ("Crash on save", "Now with a traceback",
                                                                         "bug")


def test_deleted_erases_the_text_and_the_training_label(bare_context, client, payload, redis):
    send(client, payload, "labeled", "d-1", labels=["bug"], label="bug")
    send(client, payload, "deleted", "d-2", labels=["bug"])
    run_worker(redis)
    issue = stored_issue(bare_context)
    assert issue == {"title": "", "body": "", "state": "deleted", "confirmed_label": None, "confirmed_by": None,
                     "confirmed_at": None}


def test_a_redelivered_feedback_delivery_is_recorded_once(bare_context, client, payload, redis):
    """GitHub redelivers; our Redis marker may have expired; the worker may have died after committing
    the event and before marking the delivery done. Each time the event must be stored once, no job fails."""
    assert send(client, payload, "labeled", "d-1", labels=["bug"], label="bug").json["queued"]
    assert not send(client, payload, "labeled", "d-1", labels=["bug"], label="bug").json["queued"]
    run_worker(redis)
    redis.delete(DELIVERY_KEY.format("d-1"))  # the marker expired: the job runs again, and skips
    send(client, payload, "labeled", "d-1", labels=["bug"], label="bug")
    run_worker(redis)
    with session_scope(bare_context.sessionmaker) as session:  # as if the worker died before marking
        session.delete(session.get(WebhookDelivery, "d-1"))
    redis.delete(DELIVERY_KEY.format("d-1"))
    send(client, payload, "labeled", "d-1", labels=["bug"], label="bug")
    run_worker(redis)
    assert len(label_events(bare_context)) == 1
    assert no_job_failed_or_retried(redis)
    assert decision_and_training_label(bare_context) == (None, "bug")


@pytest.mark.postgres
def test_a_long_outcome_fits_the_deliveries_table_on_postgresql(app_settings, postgres_url, redis, client,
                                                                payload):
    """SQLite ignores VARCHAR lengths; PostgreSQL does not. Outcomes such as "new training data: a human
    labelled an issue the bot did not label" are longer than webhook_deliveries.outcome (64), so on
    PostgreSQL every such job failed after its work was committed, and RQ retried it."""
    sessions = make_sessionmaker(postgres_url)
    Base.metadata.create_all(sessions.kw["bind"])
    ctx = build_context(dataclasses.replace(app_settings, database_url=postgres_url), redis=redis)
    context.configure(ctx)
    try:
        send(client, payload, "labeled", "d-human", labels=["bug"], label="bug")
        run_worker(redis)
    finally:
        context.configure(None)
    assert no_job_failed_or_retried(redis)
    assert outcome(ctx, "d-human").startswith("new training data")
