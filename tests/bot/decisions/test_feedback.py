"""Maintainers' decisions: each `issues` event as GitHub sends it → label events, decisions and training data.

The rules on the fakes (tests/bot/rules.py: the labelling job, then the feedback job's domain call, on
SQLite); a redelivery through the real webhook, Redis and RQ worker, and PostgreSQL's column lengths.
"""

import dataclasses

import pytest
from rq.registry import FailedJobRegistry, ScheduledJobRegistry
from sqlalchemy import select

from bot import context
from bot.decisions import gather
from bot.intake.queueing import DELIVERY_KEY
from bot.worker import build_context
from core import memory, store
from core.db import Base, make_sessionmaker, session_scope
from core.kinds import is_known_label
from core.queues import FEEDBACK_QUEUE, SERIALIZER
from core.tables import IssueRecord, MemoryEntry, Repository, WebhookDelivery
from tests.bot.conftest import deliver, issue_payload, run_worker
from tests.bot.rules import (
    BOT,
    REPO,
    event,
    issue_row,
    label,
    label_events,
    record,
    stored_issue,
)

KNOWN = ("bug", "enhancement", "question")  # labels of the repository that map to the model's kinds


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
    actor = gather.identify_actor(login, is_bot, via_app, bot_login=BOT, app_id=1)
    assert (actor.login, actor.is_human, actor.is_this_app) == (login, human, this_app)


def test_without_a_known_identity_only_the_bot_flag_marks_a_bot():
    assert gather.identify_actor(BOT, False, None, bot_login=None, app_id=None).is_human
    assert not gather.identify_actor(BOT, True, None, bot_login=None, app_id=None).is_human


@pytest.mark.parametrize("label,classes,known", [
    ("bug", [], True), ("Type: Bug", [], True), ("kind/feature", [], True), ("C-enhancement", [], True),
    ("question", ["bug", "feature", "question"], True), ("documentation", [], True),
    ("area: ui", ["area: ui", "area: api"], True),  # a repository model's own class
    ("area: ui", ["bug", "feature"], False), ("wontfix", [], False), ("good first issue", [], False),
    ("duplicate", [], False), ("bug", ["area: ui"], True),
])
def test_is_known_label_accepts_model_classes_and_kind_labels(label, classes, known):
    assert is_known_label(label, classes) is known


# ---- decisions on the fakes -----------------------------------------------------------------------

@pytest.fixture
def labelled(sessions, github):
    """Issue 1 labelled `bug` by the bot, and GitHub's `labeled` delivery of that label recorded; no model
    is registered, so labels are known by their kind."""
    assert label(sessions, github, 1)[:2] == ("applied", "bug")
    ours = event("labeled", 1, labels=["bug"], label="bug", sender=BOT, is_bot=True)
    assert record(sessions, ours).startswith("bot event")
    return sessions


def decision_and_training_label(sessions, number: int = 1) -> tuple:
    confirmed, decision, _ = issue_row(sessions, number)
    return decision, confirmed


def test_the_bots_own_label_events_are_recorded_and_decide_nothing(labelled):
    assert label_events(labelled) == [("labeled", "bug", BOT, False, True)]
    outcome = record(labelled, event("unlabeled", 1, label="bug", sender=BOT, is_bot=True))
    assert outcome == "bot event: recorded, not a decision"
    assert decision_and_training_label(labelled) == (None, None)


def test_closing_an_issue_with_the_bots_label_on_accepts_it_and_confirms_training_data(labelled):
    assert record(labelled, event("closed", 1, labels=["bug"])).startswith("accepted")
    assert decision_and_training_label(labelled) == ("accepted", "bug")
    issue = stored_issue(labelled, 1)
    assert (issue.confirmed_by, issue.state) == ("maintainer", "closed")


@pytest.mark.parametrize("action,changed,after", [
    ("labeled", "good first issue", ["wontfix", "good first issue"]),  # another label added
    ("unlabeled", "wontfix", []),  # another label removed
])
def test_changing_other_labels_and_leaving_the_bots_on_accepts_it(sessions, github, action, changed, after):
    assert label(sessions, github, 1, labels=("wontfix",))[:2] == ("applied", "bug")
    record(sessions, event(action, 1, labels=after + ["bug"], label=changed))
    assert decision_and_training_label(sessions) == ("accepted", "bug")


def test_a_known_label_beside_the_bots_waits_for_the_maintainer(labelled):
    outcome = record(labelled, event("labeled", 1, labels=["bug", "question"], label="question"))
    assert outcome.startswith("recorded: another known label")
    assert decision_and_training_label(labelled) == (None, None)


def test_the_bots_label_removed_by_a_human_is_rejected_and_never_put_back(labelled, github):
    assert record(labelled, event("unlabeled", 1, label="bug")).startswith("rejected")
    assert decision_and_training_label(labelled) == ("rejected", None)
    assert label_events(labelled)[-1] == ("unlabeled", "bug", "maintainer", True, False)
    # the label is gone on GitHub; a fresh `opened` delivery (a transfer back, a redelivery) must not re-add it
    github.issue_labels[(REPO, 1)] = []
    assert isinstance(label(labelled, github, 1), str)
    assert github.issue_labels[(REPO, 1)] == [] and [c[0] for c in github.writes()] == ["add_labels"]


def test_a_rejection_after_an_acceptance_takes_the_training_label_back(labelled):
    """A maintainer added `wontfix` beside our label (accepted: ours became training data), then thought
    again and removed ours. The prediction was marked rejected, but the issue kept teaching our label."""
    record(labelled, event("labeled", 1, labels=["bug", "wontfix"], label="wontfix"))
    assert decision_and_training_label(labelled) == ("accepted", "bug")
    record(labelled, event("unlabeled", 1, labels=["wontfix"], label="bug"))
    assert decision_and_training_label(labelled) == ("rejected", None)


@pytest.mark.parametrize("order", ["remove ours first", "add the replacement first"])
def test_the_bots_label_replaced_by_another_known_label_is_corrected(labelled, order):
    if order == "remove ours first":
        record(labelled, event("unlabeled", 1, labels=[], label="bug"))
        outcome = record(labelled, event("labeled", 1, labels=["question"], label="question"))
    else:
        record(labelled, event("labeled", 1, labels=["bug", "question"], label="question"))
        outcome = record(labelled, event("unlabeled", 1, labels=["question"], label="bug"))
    assert outcome.startswith("corrected")
    assert decision_and_training_label(labelled) == ("corrected", "question")
    assert stored_issue(labelled, 1).confirmed_by == "maintainer"


def test_a_human_label_where_the_bot_abstained_is_new_training_data(sessions, github):
    assert label(sessions, github, 3)[0] == "abstained"
    assert record(sessions, event("labeled", 3, labels=["question"], label="question")).startswith(
        "new training data")
    assert decision_and_training_label(sessions, 3) == (None, "question")


def test_a_label_a_human_took_off_before_the_bot_ran_is_not_put_on(sessions, github):
    """The labelling queue was busy: a maintainer tried every kind label and removed each again before the
    label job ran. Whatever the model predicts, it was removed by a human, so the bot abstains."""
    for known in KNOWN:
        record(sessions, event("labeled", 1, labels=[known], label=known))
        record(sessions, event("unlabeled", 1, labels=[], label=known))
    outcome, chosen, reason = label(sessions, github, 1)
    assert (outcome, chosen) == ("abstained", None) and "a maintainer removed" in reason
    assert github.writes() == []
    assert stored_issue(sessions, 1).confirmed_label is None  # each confirmation was taken back


@pytest.mark.parametrize("added,verdict", [("bug", "accepted"), ("question", "corrected")])
def test_in_shadow_mode_the_first_known_label_a_human_adds_judges_the_bots_choice(sessions, github, added,
                                                                                  verdict):
    """Shadow mode exists to judge the bot before it writes, yet a human's label on a shadow prediction
    only became training data: no verdict, so every count stayed at zero."""
    assert label(sessions, github, 1, config="mode: shadow")[:2] == ("shadow", "bug")
    assert github.writes() == []
    assert record(sessions, event("labeled", 1, labels=[added], label=added)).startswith(verdict)
    assert decision_and_training_label(sessions) == (verdict, added)


def test_a_shadow_abstention_labelled_by_a_human_is_training_data_not_a_verdict(sessions, github):
    assert label(sessions, github, 3, config="mode: shadow")[:2] == ("shadow", None)
    assert record(sessions, event("labeled", 3, labels=["question"], label="question")).startswith(
        "new training data")
    assert decision_and_training_label(sessions, 3) == (None, "question")


# ---- a transferred issue and the old repository's memory ----------------------------------------------

def remembered(sessions, number: int) -> list[str]:
    """The repositories whose memory holds the issue now numbered `number` (one entry per row)."""
    with session_scope(sessions) as session:
        return list(session.scalars(select(Repository.full_name).join(
            MemoryEntry, MemoryEntry.repository_id == Repository.id).join(
            IssueRecord, MemoryEntry.issue_id == IssueRecord.id).where(IssueRecord.number == number)))


@pytest.fixture
def confirmed_in_memory(labelled):
    """Issue 1's label accepted by a maintainer, and the issue in the repository's memory."""
    record(labelled, event("closed", 1, labels=["bug"]))
    with session_scope(labelled) as session:
        issue = session.scalars(select(IssueRecord).where(IssueRecord.number == 1)).one()
        memory.remember(session, issue, "bug", "fake-1", [1.0, 0.0])
    assert remembered(labelled, 1) == [REPO]
    return labelled


def transferred(to_repo: str, number: int) -> dict:
    data = event("transferred", 1, labels=["bug"])
    return {**data, "moved_to": {"repo": to_repo, "repo_id": None, "private": False, "number": number}}


def test_an_issue_transferred_out_of_the_installation_leaves_the_old_repositorys_memory(confirmed_in_memory):
    """Its text and label were cleared, but its embedding stayed in the memory, voting `bug` on every
    issue of a repository it no longer belongs to."""
    assert record(confirmed_in_memory, transferred("someone-else/elsewhere", 9)).startswith(
        "transferred out of this installation")
    assert remembered(confirmed_in_memory, 1) == []


def test_an_issue_moved_within_the_installation_leaves_the_old_memory_for_the_new_one(confirmed_in_memory):
    assert record(confirmed_in_memory, transferred("octo/gadgets", 7)).startswith("transferred: history")
    assert remembered(confirmed_in_memory, 7) == ["octo/gadgets"]


def test_an_issue_merged_into_its_new_place_leaves_no_memory_behind(confirmed_in_memory):
    with session_scope(confirmed_in_memory) as session:
        target = store.ensure_repository(session, "octo/gadgets", 1)
        store.upsert_issue(session, target, 7, title="t", body="b", author_login="a", state="open")
    assert record(confirmed_in_memory, transferred("octo/gadgets", 7)).startswith("transferred: history and "
                                                                                  "decisions merged")
    assert remembered(confirmed_in_memory, 1) == remembered(confirmed_in_memory, 7) == []


# ---- issues the bot never labelled -------------------------------------------------------------------

@pytest.mark.parametrize("name,training", [("bug", "bug"), ("Type: Bug", "Type: Bug"), ("wontfix", None)])
def test_a_human_label_on_an_issue_the_bot_never_saw_is_training_data_when_known(sessions, name, training):
    record(sessions, event("labeled", 1, labels=[name], label=name))
    assert decision_and_training_label(sessions) == (None, training)
    assert label_events(sessions) == [("labeled", name, "maintainer", True, False)]


def test_another_bots_label_events_are_not_a_human_decision(sessions):
    other_bot = {"sender": "dependabot[bot]", "is_bot": True}
    record(sessions, event("labeled", 1, labels=["bug"], label="bug", **other_bot))
    record(sessions, event("unlabeled", 1, labels=[], label="bug", **other_bot))
    assert decision_and_training_label(sessions) == (None, None)
    assert [e[3:] for e in label_events(sessions)] == [(False, False), (False, False)]
    with session_scope(sessions) as session:
        assert store.removed_by_human(session, session.scalars(select(IssueRecord)).one()) == set()


def test_edited_updates_the_stored_text(sessions):
    record(sessions, event("labeled", 1, labels=["bug"], label="bug"))
    record(sessions, event("edited", 1, labels=["bug"], title="Crash on save", body="Now with a traceback"))
    issue = stored_issue(sessions, 1)
    assert (issue.title, issue.body) == ("Crash on save", "Now with a traceback")
    assert issue.confirmed_label == "bug"


def test_deleted_erases_the_text_and_the_training_label(labelled):
    record(labelled, event("closed", 1, labels=["bug"]))
    record(labelled, event("deleted", 1, labels=["bug"]))
    issue = stored_issue(labelled, 1)
    assert (issue.title, issue.body, issue.state) == ("", "", "deleted")
    assert (issue.confirmed_label, issue.confirmed_by, issue.confirmed_at) == (None, None, None)
    assert decision_and_training_label(labelled) == ("accepted", None)  # the decision stays, its text goes


def test_the_same_delivery_is_recorded_once(labelled):
    once, before = event("unlabeled", 1, label="bug", delivery="d-twice"), len(label_events(labelled))
    record(labelled, once)
    assert record(labelled, once) == "skipped: event already recorded"
    assert len(label_events(labelled)) == before + 1


# ---- through the webhook, Redis and an RQ worker (no model) --------------------------------------------

def send(client, payload, action: str, delivery: str, *, labels=(), label=None):
    """An `issues` delivery from the maintainer, as GitHub sends it to the HTTP harness's repository."""
    data = issue_payload(payload, action, 1, title="App crashes with TypeError when saving", labels=labels,
                         label=label, sender="maintainer")
    return deliver(client, "issues", data, delivery)


def no_job_failed_or_retried(redis) -> bool:
    return (FailedJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).count,
            ScheduledJobRegistry(FEEDBACK_QUEUE, connection=redis, serializer=SERIALIZER).count) == (0, 0)


def outcome(ctx, delivery: str) -> str:
    with session_scope(ctx.sessionmaker) as session:
        return session.get(WebhookDelivery, delivery).outcome


@pytest.mark.redis
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
    assert len(label_events(bare_context.sessionmaker)) == 1
    assert no_job_failed_or_retried(redis)
    assert decision_and_training_label(bare_context.sessionmaker) == (None, "bug")


@pytest.mark.redis
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
